//! Grading in the agent's environment (`[verifier] environment_mode = "shared"`, Harbor's
//! default) under the `container` runtime, end to end: a real registry, the Debian test
//! image, the agent and then the grader in one environment. The grader reaches a TCP
//! service the agent left running and a file it wrote outside the working folder (the
//! oracle solves, a no-op agent does not), a process the agent left that keeps
//! writing reward files cannot change the verdict, and a hook the agent planted in the
//! environment's Python is caught by the tripwire twin run there.

mod common;

use akbench_core::record::RunRecord;
use akbench_worker::orchestrator::Silent;
use akbench_worker::process::CancelToken;
use akbench_worker::runtime::RuntimeKind;
use common::container_trial::{
    base_registry, first_attempt_file, run_in_container, runs_here, DEBIAN_PATH,
};
use common::registry::{base_tar, Registry};
use common::Corpus;
use std::fs;

/// Task `id`'s agent gets no network and its grading the public one.
fn agent_offline_grading_public(c: &Corpus, id: &str) {
    let toml = c.tasks().join(id).join("task.toml");
    let text = fs::read_to_string(&toml)
        .unwrap()
        .replace(
            "environment_mode = \"shared\"\n",
            "environment_mode = \"shared\"\nnetwork_mode = \"public\"\n",
        )
        .replace(
            "[agent]\ntimeout_sec = 60\n",
            "[agent]\ntimeout_sec = 60\nnetwork_mode = \"no-network\"\n",
        );
    assert!(
        text.contains("no-network") && text.contains("\"public\""),
        "{text}"
    );
    fs::write(&toml, text).unwrap();
}

/// Adds task `id` graded in the agent's environment by `test_sh` (Harbor's shape: it
/// writes `/logs/verifier/reward.txt`), solved by `solve_sh`.
fn add_shared_task(c: &Corpus, reg: &Registry, id: &str, test_sh: &str, solve_sh: &str) {
    c.add_task(
        id,
        &c.first_commit,
        test_sh,
        &format!(
            "[environment]\nimage = \"{}/akbench/base:bookworm\"\n",
            reg.addr
        ),
    );
    let toml = c.tasks().join(id).join("task.toml");
    let text = fs::read_to_string(&toml).unwrap().replace(
        "[verifier]\ntimeout_sec = 30\n",
        "[verifier]\ntimeout_sec = 30\nenvironment_mode = \"shared\"\n",
    );
    assert!(text.contains("environment_mode"), "{text}");
    fs::write(&toml, text).unwrap();
    fs::write(c.tasks().join(id).join("solution/solve.sh"), solve_sh).unwrap();
}

fn run(c: &Corpus, task: &str, agent: &str, name: &str) -> RunRecord {
    let record = run_in_container(c, task, agent, name, 60.0, 0);
    let read = |f: &str| first_attempt_file(c, name, f);
    eprintln!(
        "{name}: state={} ok={:?} cause={:?}\nagent stdout={}\nagent stderr={}\ngrader stdout={}\ngrader stderr={}",
        record.outcome.state,
        record.outcome.ok,
        record.attempts[0].cause,
        read("agent.stdout.log"),
        read("agent.stderr.log"),
        read("evaluator.stdout.log"),
        read("evaluator.stderr.log"),
    );
    record
}

fn environment(r: &RunRecord) -> Option<String> {
    r.attempts[0].grade.as_ref()?.environment.clone()
}

/// A server on 127.0.0.1:7070 answering `42`, started in the background (its output
/// still the script's: the environment keeps draining it), and a wait until it listens.
const START_SERVER: &str = r#"python3 -c '
import socket
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 7070))
s.listen()
print("serving", flush=True)
while True:
    c, _ = s.accept()
    c.sendall(b"42\n")
    c.close()
' &
for i in $(seq 100); do
  python3 -c 'import socket; socket.create_connection(("127.0.0.1", 7070), timeout=1)' 2>/dev/null && break
  sleep 0.1
done
echo started
"#;

/// Asks the server on 127.0.0.1:7070 for the answer.
const ASK_SERVER: &str = r#"got="$(python3 -c '
import socket
s = socket.create_connection(("127.0.0.1", 7070), timeout=5)
print(s.recv(100).decode().strip())
' 2>&1)"
echo "server said: $got"
if [ "$got" = "42" ]; then r=1; else r=0; fi
echo "$r" > /logs/verifier/reward.txt
echo "graded: reward $r"
"#;

#[test]
fn the_grader_reaches_a_service_the_agent_left_running() {
    const TEST: &str = "the_grader_reaches_a_service_the_agent_left_running";
    if !runs_here(TEST) {
        return;
    }
    let (reg, c) = base_registry();
    add_shared_task(&c, &reg, "service", ASK_SERVER, START_SERVER);
    let r = run(&c, "service", "oracle", "oracle");
    assert_eq!(r.outcome.ok, Some(true), "{:?}", r.attempts[0].grade);
    assert_eq!(environment(&r).as_deref(), Some("shared"));
    let stdout =
        fs::read_to_string(c.root().join("out/oracle/a1/agent.stdout.log")).unwrap_or_default();
    assert!(stdout.contains("started"), "{stdout}");
    let r = run(&c, "service", "noop", "noop");
    assert_eq!(r.outcome.state.to_string(), "completed");
    assert_eq!(r.outcome.ok, Some(false), "{:?}", r.attempts[0].grade);
    assert_eq!(environment(&r).as_deref(), Some("shared"));
}

#[test]
fn the_grader_sees_a_file_the_agent_wrote_outside_the_working_folder() {
    const TEST: &str = "the_grader_sees_a_file_the_agent_wrote_outside_the_working_folder";
    if !runs_here(TEST) {
        return;
    }
    let (reg, c) = base_registry();
    add_shared_task(
        &c,
        &reg,
        "outside",
        "if [ \"$(cat /etc/akb-answer 2>/dev/null)\" = 42 ]; then r=1; else r=0; fi\n\
         echo \"$r\" > /logs/verifier/reward.txt\n",
        "mkdir -p /srv/state && echo 42 > /srv/state/answer && cp /srv/state/answer /etc/akb-answer\n",
    );
    let r = run(&c, "outside", "oracle", "oracle");
    assert_eq!(r.outcome.ok, Some(true), "{:?}", r.attempts[0].grade);
    assert_eq!(environment(&r).as_deref(), Some("shared"));
    let r = run(&c, "outside", "noop", "noop");
    assert_eq!(r.outcome.ok, Some(false), "{:?}", r.attempts[0].grade);
}

/// The agent leaves a loop that writes `1` into every reward file it can name while the
/// grader runs: its own `/logs/verifier`, and the grader's through `/proc/PID/root`. The
/// grader writes 0 and then waits, so a write that reached its reward would be read.
#[test]
fn a_process_the_agent_left_cannot_change_the_reward() {
    const TEST: &str = "a_process_the_agent_left_cannot_change_the_reward";
    if !runs_here(TEST) {
        return;
    }
    let (reg, c) = base_registry();
    add_shared_task(
        &c,
        &reg,
        "guarded",
        "echo 0 > /logs/verifier/reward.txt\necho 'graded: reward 0'\nsleep 3\n\
         echo \"reward now: $(cat /logs/verifier/reward.txt)\"\n",
        "exit 0\n",
    );
    c.add_agent(
        "forger",
        "adapter = \"scripted\"\nscript = \"forger.sh\"\n",
        Some(
            "(while true; do\n\
               mkdir -p /logs/verifier && echo 1 > /logs/verifier/reward.txt\n\
               for f in /proc/[0-9]*/root/logs/verifier; do echo 1 > \"$f/reward.txt\"; done\n\
               for f in /proc/[0-9]*/root/tmp/*/eval/run/verifier /proc/[0-9]*/root/work*/*/eval/run/verifier; do echo 1 > \"$f/reward.txt\"; done\n\
               sleep 0.05\n\
             done) >/dev/null 2>&1 &\n\
             echo left-running\nexit 0\n",
        ),
    );
    let r = run(&c, "guarded", "forger", "forger");
    assert_eq!(
        r.outcome.state.to_string(),
        "completed",
        "{:?}",
        r.attempts[0].cause
    );
    let g = r.attempts[0].grade.clone().unwrap();
    assert_eq!(g.environment.as_deref(), Some("shared"));
    assert!(!g.ok, "the forged reward was read: {g:?}");
    assert_eq!(g.score, 0.0, "{g:?}");
    assert!(g.report.contains("reward now: 0"), "{}", g.report);
}

/// Harbor's shape of a pytest grader: the hidden tests run by the image's Python, the reward
/// from pytest's exit status.
const PYTEST_GRADER: &str = "python3 -m pytest -q -p no:cacheprovider /tests/test_answer.py\n\
if [ $? -eq 0 ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi\n";

/// The hidden test the twin is made of: value.txt holds 42.
const PYTEST_ANSWER: &str = "def test_answer():\n    with open(\"value.txt\") as f:\n        assert f.read().strip() == \"42\"\n";

/// The agent plants a `.pth` file in every site folder of the environment's Python, whose
/// `import` line ends the interpreter with status 0 before any test runs: the grader's
/// pytest "passes" and the task's own test.sh writes reward 1. The tripwire twin, run in
/// the same environment after the graded run, passes too, while the reference solution
/// graded on the twin in a fresh environment fails it: tampering, never solved. The
/// oracle's grade keeps its tripwire, which fails as it must.
#[test]
fn a_hook_the_agent_planted_in_its_environment_is_caught_by_the_tripwire_twin() {
    const TEST: &str = "a_hook_the_agent_planted_in_its_environment_is_caught_by_the_tripwire_twin";
    if !runs_here(TEST) {
        return;
    }
    let (reg, c) = base_registry();
    add_shared_task(&c, &reg, "hooked", PYTEST_GRADER, "echo 42 > value.txt\n");
    fs::write(c.tasks().join("hooked/tests/test_answer.py"), PYTEST_ANSWER).unwrap();
    c.add_agent(
        "hooker",
        "adapter = \"scripted\"\nscript = \"hooker.sh\"\n",
        Some(
            "for d in $(python3 -c 'import site; print(\" \".join(site.getsitepackages()))'); do\n\
               mkdir -p \"$d\" && echo 'import os; os._exit(0)' > \"$d/zz_akb.pth\" && echo \"planted in $d\"\n\
             done\nexit 0\n",
        ),
    );
    let r = run(&c, "hooked", "oracle", "oracle");
    let g = r.attempts[0].grade.clone().unwrap();
    assert_eq!(g.environment.as_deref(), Some("shared"));
    assert!(g.ok && !g.tampered, "{g:?}");
    let held = g.tripwire.as_ref().map(|t| t.result.clone());
    assert_eq!(
        held.as_deref(),
        Some(akbench_core::record::TRIPWIRE_OK),
        "the oracle's twin ran in its environment and failed: {g:?}"
    );

    let r = run(&c, "hooked", "hooker", "hooker");
    let stdout =
        fs::read_to_string(c.root().join("out/hooker/a1/agent.stdout.log")).unwrap_or_default();
    assert!(stdout.contains("planted in /usr"), "{stdout}");
    assert_eq!(
        r.outcome.state.to_string(),
        "completed",
        "{:?}",
        r.attempts[0].cause
    );
    let g = r.attempts[0].grade.clone().unwrap();
    assert_eq!(g.environment.as_deref(), Some("shared"));
    assert!(
        !g.ok && g.tampered,
        "the planted hook was graded solved: {g:?}"
    );
    assert_eq!(g.score, 0.0);
    let result = g
        .tripwire
        .as_ref()
        .map(|t| t.result.clone())
        .unwrap_or_default();
    assert!(
        result.starts_with("grading tampered") && result.contains("reference solution fails"),
        "{result}"
    );
}

/// Pushes the base image with a layer holding `/usr/local/bin/entry.sh` (a server on
/// 127.0.0.1:7071 answering `7`, then `exec "$@"`) as its ENTRYPOINT.
fn push_with_entrypoint(reg: &Registry, c: &Corpus) {
    let layers = c.root().join("entry-layers");
    fs::create_dir_all(&layers).unwrap();
    let entry = common::registry::layer(
        &layers,
        "entry",
        &[(
            "usr/local/bin/entry.sh",
            "#!/bin/sh\npython3 -c '\nimport socket\ns = socket.socket()\ns.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\ns.bind((\"127.0.0.1\", 7071))\ns.listen()\nwhile True:\n    c, _ = s.accept()\n    c.sendall(b\"7\\n\")\n    c.close()\n' >/dev/null 2>&1 &\nexec \"$@\"\n",
        )],
        "gzip",
    );
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/oci-push.py");
    let out = std::process::Command::new("python3")
        .arg(script)
        .arg(&reg.addr)
        .arg("akbench/entry:bookworm")
        .args([
            "--env",
            DEBIAN_PATH,
            "--workdir",
            "/app",
            "--entrypoint",
            "[\"/bin/sh\", \"/usr/local/bin/entry.sh\"]",
        ])
        .arg(format!("{}:tar", base_tar().display()))
        .arg(format!("{}:gzip", entry.display()))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "oci-push: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Appends `[environment] healthcheck` to task `id` (after its `[environment]` table's
/// image line) and switches its image to `image`.
fn set_healthcheck(c: &Corpus, id: &str, image: &str, healthcheck: &str) {
    let toml = c.tasks().join(id).join("task.toml");
    let text = fs::read_to_string(&toml).unwrap();
    let start = text.find("image = \"").unwrap();
    let end = start + text[start..].find('\n').unwrap();
    let text = format!(
        "{}image = \"{image}\"\nhealthcheck = {healthcheck}{}",
        &text[..start],
        &text[end..]
    );
    fs::write(&toml, text).unwrap();
}

/// Harbor keeps the image's ENTRYPOINT running (it replaces only the command): the server
/// it starts is up before the agent (the healthcheck waits for it), the agent uses it, and
/// grading reaches it.
#[test]
fn the_images_entrypoint_runs_before_the_agent_and_until_grading_ends() {
    const TEST: &str = "the_images_entrypoint_runs_before_the_agent_and_until_grading_ends";
    if !runs_here(TEST) {
        return;
    }
    let (reg, c) = base_registry();
    push_with_entrypoint(&reg, &c);
    let ask = "python3 -c 'import socket; print(socket.create_connection((\"127.0.0.1\", 7071), timeout=5).recv(9).decode().strip())'";
    add_shared_task(
        &c,
        &reg,
        "entry",
        &format!(
            "cd \"$AKBENCH_WORKSPACE\"\nwant=\"$({ask})\"\necho \"server said: $want\"\n\
             if [ -n \"$want\" ] && [ \"$(cat value.txt)\" = \"$want\" ]; then r=1; else r=0; fi\n\
             echo \"$r\" > /logs/verifier/reward.txt\n"
        ),
        &format!("{ask} > value.txt\n"),
    );
    set_healthcheck(
        &c,
        "entry",
        &format!("{}/akbench/entry:bookworm", reg.addr),
        "{ command = \"python3 -c 'import socket; socket.create_connection((\\\"127.0.0.1\\\", 7071), timeout=1)'\", interval_sec = 0.2, start_period_sec = 30, start_interval_sec = 0.1, retries = 3 }",
    );
    let r = run(&c, "entry", "oracle", "oracle");
    assert_eq!(
        r.outcome.ok,
        Some(true),
        "{:?} {:?}",
        r.attempts[0].cause,
        r.attempts[0].grade
    );
    assert_eq!(environment(&r).as_deref(), Some("shared"));
    let r = run(&c, "entry", "noop", "noop");
    assert_eq!(r.outcome.state.to_string(), "completed");
    assert_eq!(r.outcome.ok, Some(false), "{:?}", r.attempts[0].grade);
}

/// A healthcheck that never passes ends the attempt `infrastructure_error` before the
/// agent starts (the agent is not blamed), naming the command and its last output.
#[test]
fn a_failing_healthcheck_is_an_infrastructure_error_before_the_agent() {
    const TEST: &str = "a_failing_healthcheck_is_an_infrastructure_error_before_the_agent";
    if !runs_here(TEST) {
        return;
    }
    let (reg, c) = base_registry();
    add_shared_task(&c, &reg, "sick", ASK_SERVER, START_SERVER);
    set_healthcheck(
        &c,
        "sick",
        &format!("{}/akbench/base:bookworm", reg.addr),
        "{ command = \"echo not-ready; exit 3\", interval_sec = 0.1, retries = 2 }",
    );
    let r = run(&c, "sick", "oracle", "oracle");
    assert_eq!(r.outcome.state.to_string(), "infrastructure_error");
    let cause = r.attempts[0].cause.clone().unwrap_or_default();
    assert!(
        cause.contains("healthcheck failed 2 consecutive times")
            && cause.contains("exit 3")
            && cause.contains("not-ready"),
        "{cause}"
    );
    assert!(r.attempts[0].agent_process.is_none(), "the agent started");
}

/// An agent that runs past its time in a shared environment is stopped (its process
/// group), the attempt ends `agent_timeout` without hanging on what it left, and the
/// environment is gone afterwards.
#[test]
fn an_agent_out_of_time_in_a_shared_environment_is_stopped() {
    const TEST: &str = "an_agent_out_of_time_in_a_shared_environment_is_stopped";
    if !runs_here(TEST) {
        return;
    }
    let (reg, c) = base_registry();
    add_shared_task(&c, &reg, "slow", ASK_SERVER, START_SERVER);
    c.add_agent(
        "sleeper",
        "adapter = \"scripted\"\nscript = \"sleeper.sh\"\n",
        Some("sleep 300 &\necho waiting\nsleep 300\n"),
    );
    let t = c.task("slow");
    let a = c.agent("sleeper");
    let mut req = c.request(&t, &a, "sleeper");
    req.options.runtime = RuntimeKind::Container;
    req.options.agent_timeout_sec = Some(2.0);
    let r = c
        .orchestrator()
        .run_trial(
            &req,
            &akbench_core::dispatch::Backoff::NONE,
            &Silent,
            &CancelToken::new(),
        )
        .unwrap()
        .record;
    assert_eq!(
        r.outcome.state.to_string(),
        "timeout",
        "{:?}",
        r.attempts[0].cause
    );
    let stdout = fs::read_to_string(c.root().join("out/sleeper/a1/agent.stdout.log")).unwrap();
    assert_eq!(stdout, "waiting\n");
    // No process of the attempt is left (each carries the attempt's tag).
    let tag = r.attempts[0].attempt.id.to_string();
    let left: Vec<String> = fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| {
            fs::read(e.path().join("environ"))
                .map(|env| String::from_utf8_lossy(&env).contains(&tag))
                .unwrap_or(false)
        })
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(left.is_empty(), "processes left: {left:?}");
}

/// The agent's phase has no network and grading's is public (`[agent] network_mode =
/// "no-network"`, `[verifier] network_mode = "public"`), in one environment: the agent's
/// fetch of the test upstream finds no way out, the grader's succeeds through the proxy
/// (its variables given to it in the environment), and each phase's record lists its own
/// contacts (grading's, not the agent's, has the host).
#[test]
fn each_phase_of_a_shared_environment_gets_its_own_network_and_record() {
    const TEST: &str = "each_phase_of_a_shared_environment_gets_its_own_network_and_record";
    if !runs_here(TEST) {
        return;
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        akbench_core::testkit::skip(TEST, "network namespaces need root");
        return;
    }
    let u = common::upstream::Upstream::create_on_host().unwrap();
    fs::create_dir_all(u.www().join("up.test")).unwrap();
    fs::write(u.www().join("up.test/answer"), "42\n").unwrap();
    // SAFETY: set before any thread of this test reads the environment.
    unsafe {
        std::env::set_var("AKBENCH_EGRESS_OPEN_RANGES", "10.215.0.0/16");
        std::env::set_var("AKBENCH_EGRESS_HOSTS", u.hosts_env());
    }
    let (reg, c) = base_registry();
    const FETCH: &str = r#"python3 -c '
import sys, urllib.request
try:
    print(urllib.request.urlopen("http://up.test/answer", timeout=10).read().decode().strip())
except Exception as e:
    print("failed:", type(e).__name__)
'"#;
    let solve = format!(
        "got=\"$({FETCH})\"\necho \"agent fetched: $got\"\necho \"$got\" > /etc/akb-agent-fetch\n"
    );
    let grade = format!(
        "got=\"$({FETCH})\"\necho \"grader fetched: $got\"\nagent=\"$(cat /etc/akb-agent-fetch)\"\necho \"agent had: $agent\"\ncase \"$agent\" in failed*) a=1;; *) a=0;; esac\nif [ \"$got\" = 42 ] && [ $a = 1 ]; then r=1; else r=0; fi\necho $r > /logs/verifier/reward.txt\n"
    );
    add_shared_task(&c, &reg, "phases", &grade, &solve);
    agent_offline_grading_public(&c, "phases");
    let r = run(&c, "phases", "oracle", "oracle");
    assert_eq!(r.outcome.ok, Some(true), "{:?}", r.attempts[0].grade);
    assert_eq!(environment(&r).as_deref(), Some("shared"));
    let a = &r.attempts[0];
    let agent = a
        .agent_process
        .as_ref()
        .and_then(|p| p.runtime.as_ref())
        .map(|f| f.egress.clone())
        .unwrap_or_default();
    assert!(
        agent.iter().all(|c| c.host != "up.test"),
        "the agent's phase had no network: {agent:?}"
    );
    let grading = a
        .grade
        .as_ref()
        .and_then(|g| g.runtime.as_ref())
        .map(|f| f.egress.clone())
        .unwrap_or_default();
    assert!(
        grading
            .iter()
            .any(|c| c.host == "up.test" && c.port == 80 && c.bytes_down > 0),
        "grading's record lists its fetch: {grading:?}"
    );
}

/// The agent's phase has no network and grading's has one: the environment's namespace gets
/// an egress proxy for grading only (a later phase's listener, bound again inside the
/// namespace: by a forked child when the worker is not root). Needs no test host, so it
/// also runs in the unprivileged rerun.
#[test]
fn a_later_phase_gets_its_own_proxy_in_the_environments_namespace() {
    const TEST: &str = "a_later_phase_gets_its_own_proxy_in_the_environments_namespace";
    if !runs_here(TEST) {
        return;
    }
    let (reg, c) = base_registry();
    const PROBE: &str = r#"python3 -c '
import os, socket, urllib.parse
p = os.environ.get("http_proxy") or os.environ.get("HTTP_PROXY")
if not p:
    print("none")
else:
    u = urllib.parse.urlparse(p)
    try:
        socket.create_connection((u.hostname, u.port), timeout=10).close()
        print("listening")
    except OSError as e:
        print("refused", e)
'"#;
    let solve =
        format!("got=\"$({PROBE})\"\necho \"agent: $got\"\necho \"$got\" > /etc/akb-agent-proxy\n");
    let grade = format!(
        "got=\"$({PROBE})\"\necho \"grader: $got\"\nagent=\"$(cat /etc/akb-agent-proxy)\"\necho \"agent had: $agent\"\nif [ \"$got\" = listening ] && [ \"$agent\" = none ]; then r=1; else r=0; fi\necho $r > /logs/verifier/reward.txt\n"
    );
    add_shared_task(&c, &reg, "later", &grade, &solve);
    agent_offline_grading_public(&c, "later");
    let r = run(&c, "later", "oracle", "oracle");
    assert_eq!(environment(&r).as_deref(), Some("shared"));
    assert_eq!(
        r.outcome.ok,
        Some(true),
        "{:?} {:?}",
        r.attempts[0].cause,
        r.attempts[0].grade
    );
}

/// The network fails only during the tripwire twin's run: the grader's fetch of a host the
/// task declares works for the graded run and gets a 503 in the twin's (a flag the first run
/// leaves in the environment picks the failing path). A failed fetch is not evidence either
/// way: the solved verdict stands and the tripwire says it had no verdict, where the twin's
/// failed fetch used to end the grade as an evaluation error.
#[test]
fn a_fetch_that_fails_only_in_the_tripwire_run_leaves_the_verdict() {
    const TEST: &str = "a_fetch_that_fails_only_in_the_tripwire_run_leaves_the_verdict";
    if !runs_here(TEST) {
        return;
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        akbench_core::testkit::skip(TEST, "network namespaces need root");
        return;
    }
    let u = common::upstream::Upstream::create_on_host().unwrap();
    fs::create_dir_all(u.www().join("up.test")).unwrap();
    fs::write(u.www().join("up.test/answer"), "42\n").unwrap();
    // SAFETY: set before any thread of this test reads the environment.
    unsafe {
        std::env::set_var("AKBENCH_EGRESS_OPEN_RANGES", "10.215.0.0/16");
        std::env::set_var("AKBENCH_EGRESS_HOSTS", u.hosts_env());
    }
    let (reg, c) = base_registry();
    let grade = format!(
        "if [ -e /etc/akb-graded-once ]; then path=fail; else touch /etc/akb-graded-once; path=answer; fi\n\
         got=\"$(python3 -c \"import urllib.request; print(urllib.request.urlopen('http://up.test/$path', timeout=10).read().decode().strip())\" 2>&1)\"\n\
         echo \"fetched $path: $got\"\n\
         case \"$got\" in 42) ;; *) echo 0 > /logs/verifier/reward.txt; exit 0 ;; esac\n{PYTEST_GRADER}"
    );
    add_shared_task(&c, &reg, "flaky", &grade, "echo 42 > value.txt\n");
    fs::write(c.tasks().join("flaky/tests/test_answer.py"), PYTEST_ANSWER).unwrap();
    let toml = c.tasks().join("flaky/task.toml");
    let text = fs::read_to_string(&toml).unwrap().replace(
        "environment_mode = \"shared\"\n",
        "environment_mode = \"shared\"\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"up.test\"]\n",
    );
    assert!(text.contains("allowed_hosts"), "{text}");
    fs::write(&toml, text).unwrap();
    let r = run(&c, "flaky", "oracle", "oracle");
    assert_eq!(
        r.outcome.state.to_string(),
        "completed",
        "{:?}",
        r.attempts[0].cause
    );
    let g = r.attempts[0].grade.clone().unwrap();
    assert_eq!(g.environment.as_deref(), Some("shared"));
    assert!(g.ok && !g.tampered, "{g:?}");
    let result = g
        .tripwire
        .as_ref()
        .map(|t| t.result.clone())
        .unwrap_or_default();
    assert!(
        result.starts_with(akbench_core::grading::TWIN_NO_VERDICT) && result.contains("up.test"),
        "{result}"
    );
}

/// Every other test of this file again with the worker as an unprivileged user
/// (common::unprivileged): the environment's overlay mounted in a user namespace of the
/// worker's own, the agent and the grader entering the environment as that namespace's
/// owner, the grader in a sibling of the environment's user namespace
/// (akbench_worker::runtime::userns).
#[test]
fn grading_in_the_agents_environment_holds_with_an_unprivileged_worker() {
    const TEST: &str = "grading_in_the_agents_environment_holds_with_an_unprivileged_worker";
    if common::unprivileged::is_child() || !runs_here(TEST) {
        return;
    }
    // The image is built (mmdebstrap needs root) before the unprivileged child reads it.
    let _ = base_tar();
    // These two make a test host in a network namespace of their own, which needs root
    // (the test's set-up, not the worker).
    common::unprivileged::rerun_suite(
        TEST,
        &[
            "each_phase_of_a_shared_environment_gets_its_own_network_and_record",
            "a_fetch_that_fails_only_in_the_tripwire_run_leaves_the_verdict",
        ],
    );
}
