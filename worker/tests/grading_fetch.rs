//! The fail-closed rule for grading fetches, vouched (core::egress::vouch), end to end under
//! the `container` runtime: a real registry, the Debian test image, the worker's egress
//! proxy. Code the agent leaves, run by the tests, that fetches an unresolvable host on
//! purpose, or breaks its own exchange with a host the worker vouches for, cannot turn its
//! failing verdict into `infrastructure_error`; a grader whose fetch
//! of a host the task declares fails (the host is down: its name does not resolve) still
//! ends `infrastructure_error`.

mod common;

use akbench_core::record::RunRecord;
use common::container_trial::{base_registry, first_attempt_file, run_in_container, runs_here};
use common::registry::Registry;
use common::Corpus;
use std::fs;

/// Adds task `id` in the test image, graded (clean room) by `test_sh`, with `network`
/// appended to its `[environment]` and `verifier` to its `[verifier]`.
fn add_task(c: &Corpus, reg: &Registry, id: &str, test_sh: &str, network: &str, verifier: &str) {
    c.add_task(
        id,
        &c.first_commit,
        test_sh,
        &format!(
            "[environment]\nimage = \"{}/akbench/base:bookworm\"\n{network}",
            reg.addr
        ),
    );
    let toml = c.tasks().join(id).join("task.toml");
    let text = fs::read_to_string(&toml).unwrap().replace(
        "[verifier]\ntimeout_sec = 30\n",
        &format!("[verifier]\ntimeout_sec = 30\n{verifier}"),
    );
    fs::write(&toml, text).unwrap();
}

fn run(c: &Corpus, task: &str, agent: &str, name: &str) -> RunRecord {
    let record = run_in_container(c, task, agent, name, 60.0, 0);
    let read = |f: &str| first_attempt_file(c, name, f);
    eprintln!(
        "{name}: state={} ok={:?} cause={:?}\ngrader stdout={}\ngrader stderr={}",
        record.outcome.state,
        record.outcome.ok,
        record.attempts[0].cause,
        read("evaluator.stdout.log"),
        read("evaluator.stderr.log"),
    );
    record
}

/// Fetches `$1` through the proxy the sandbox is given (Python's urllib reads
/// `https_proxy`), printing how it went.
const FETCH_PY: &str = r#"import sys, urllib.request
try:
    urllib.request.urlopen(sys.argv[1], timeout=30)
    print("fetched", sys.argv[1])
except Exception as e:
    print("fetch failed:", sys.argv[1], e)
"#;

/// The grader runs what the agent left (`check.sh`, when there is one), then checks the
/// answer: Terminal-Bench's shape of "the tests run the agent's code".
const RUNS_AGENT_CODE: &str = "cd \"$AKBENCH_WORKSPACE\"\n\
    if [ -f check.sh ]; then sh check.sh; fi\n\
    if [ \"$(cat value.txt)\" = 42 ]; then r=1; else r=0; fi\n\
    echo \"$r\" > \"$AKBENCH_VERIFIER_DIR/reward.txt\"\necho \"graded: reward $r\"\n";

#[test]
fn an_agents_unresolvable_fetch_during_grading_leaves_a_fail_verdict() {
    const TEST: &str = "an_agents_unresolvable_fetch_during_grading_leaves_a_fail_verdict";
    if !runs_here(TEST) {
        return;
    }
    let (reg, c) = base_registry();
    add_task(
        &c,
        &reg,
        "hack",
        RUNS_AGENT_CODE,
        "network_mode = \"public\"\n",
        "",
    );
    c.add_agent(
        "cheater",
        "adapter = \"scripted\"\nscript = \"cheater.sh\"\n",
        Some(&format!(
            "cat > fetch.py <<'EOF'\n{FETCH_PY}EOF\n\
             echo 'python3 fetch.py https://nowhere.invalid/' > check.sh\n"
        )),
    );
    let r = run(&c, "hack", "cheater", "cheater");
    assert_eq!(
        r.outcome.state.to_string(),
        "completed",
        "{:?}",
        r.attempts[0].cause
    );
    assert_eq!(r.outcome.ok, Some(false));
    let g = r.attempts[0].grade.clone().unwrap();
    let egress = &g.runtime.as_ref().unwrap().egress;
    assert!(
        egress
            .iter()
            .any(|c| c.host == "nowhere.invalid" && c.port == 443 && c.failed_fetch()),
        "{egress:?}"
    );
    let cause = g.cause.unwrap_or_default();
    assert!(
        cause.starts_with("not counted as infrastructure: the fetch of nowhere.invalid:443")
            && cause.contains("host not declared by the task nor a known upstream"),
        "{cause}"
    );
}

/// Opens a tunnel to a known upstream (`deb.debian.org:443`, vouched by default) through the
/// proxy the sandbox is given, then sends something else than TLS: the exchange fails at
/// the proxy's handshake, on purpose.
const BROKEN_HANDSHAKE_PY: &str = r#"import os, socket, urllib.parse
p = urllib.parse.urlparse(os.environ.get("https_proxy") or os.environ["HTTPS_PROXY"])
s = socket.create_connection((p.hostname, p.port), timeout=10)
s.sendall(b"CONNECT deb.debian.org:443 HTTP/1.1\r\nHost: deb.debian.org:443\r\n\r\n")
print("proxy said:", s.recv(200).split(b"\r\n")[0])
s.sendall(b"this is not TLS\r\n\r\n")
try:
    print("then:", s.recv(200)[:40])
except Exception as e:
    print("then:", e)
"#;

/// Code the agent leaves breaks its own exchange with a host the worker vouches for (a
/// handshake that is not TLS): recorded `client_error`, never a failed fetch, so the
/// failing verdict stands instead of becoming `infrastructure_error`.
#[test]
fn an_agents_broken_exchange_with_a_known_upstream_leaves_a_fail_verdict() {
    const TEST: &str = "an_agents_broken_exchange_with_a_known_upstream_leaves_a_fail_verdict";
    if !runs_here(TEST) {
        return;
    }
    let (reg, c) = base_registry();
    add_task(
        &c,
        &reg,
        "broken",
        RUNS_AGENT_CODE,
        "network_mode = \"public\"\n",
        "",
    );
    c.add_agent(
        "breaker",
        "adapter = \"scripted\"\nscript = \"breaker.sh\"\n",
        Some(&format!(
            "cat > broken.py <<'EOF'\n{BROKEN_HANDSHAKE_PY}EOF\n\
             echo 'python3 broken.py' > check.sh\n"
        )),
    );
    let r = run(&c, "broken", "breaker", "breaker");
    assert_eq!(
        r.outcome.state.to_string(),
        "completed",
        "{:?}",
        r.attempts[0].cause
    );
    assert_eq!(r.outcome.ok, Some(false));
    let g = r.attempts[0].grade.clone().unwrap();
    let egress = &g.runtime.as_ref().unwrap().egress;
    let broken = egress
        .iter()
        .find(|c| c.host == "deb.debian.org" && c.port == 443)
        .unwrap_or_else(|| panic!("the tunnel was not recorded: {egress:?}"));
    assert_eq!(
        broken.outcome,
        akbench_core::egress::Outcome::ClientError,
        "{broken:?}"
    );
    assert!(!broken.failed_fetch(), "{broken:?}");
}

#[test]
fn a_grader_whose_declared_host_is_down_is_an_infrastructure_error() {
    const TEST: &str = "a_grader_whose_declared_host_is_down_is_an_infrastructure_error";
    if !runs_here(TEST) {
        return;
    }
    let (reg, c) = base_registry();
    fs::create_dir_all(c.tasks().join("mirror/tests")).unwrap();
    add_task(
        &c,
        &reg,
        "mirror",
        &format!(
            "out=\"$(python3 \"$AKBENCH_TESTS_DIR/fetch.py\" https://mirror.invalid/tool.tar.gz)\"\necho \"$out\"\n\
             case \"$out\" in fetched*) ;; *) echo 0 > \"$AKBENCH_VERIFIER_DIR/reward.txt\"; exit 0 ;; esac\n{RUNS_AGENT_CODE}"
        ),
        "",
        "network_mode = \"allowlist\"\nallowed_hosts = [\"mirror.invalid\"]\n",
    );
    fs::write(c.tasks().join("mirror/tests/fetch.py"), FETCH_PY).unwrap();
    let r = run(&c, "mirror", "oracle", "oracle");
    assert_eq!(r.outcome.state.to_string(), "infrastructure_error");
    let cause = r.attempts[0].cause.clone().unwrap_or_default();
    assert!(
        cause.starts_with("the grader's fetch of mirror.invalid failed: mirror.invalid:443")
            && cause.contains("declared by the task"),
        "{cause}"
    );
}
