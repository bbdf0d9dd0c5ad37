//! The escape suite: one scripted agent per attack, run under `sandbox` (each must fail and
//! the grade stay honest) and under `direct` (the outcome is printed; docs/agents.md lists
//! which attacks succeed there). An attack that succeeds prints `ESCAPED` or solves the
//! task without fixing it; processes left behind carry a unique marker in their command
//! line so the suite can find (and, under `direct`, clean up) survivors.
//!
//! Every test needs a working sandbox (bubblewrap and writable cgroups); where there is
//! none it prints that it skipped.

mod common;

use akbench_core::lifecycle::State;
use akbench_core::record::RunRecord;
use akbench_worker::orchestrator::{Silent, TrialRequest};
use akbench_worker::process::CancelToken;
use akbench_worker::runtime::{Limits, RuntimeKind};
use common::escape::sandbox_works;
use common::{corpus, Corpus};
use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

/// A fresh corpus, or `None` (said skipped) where the sandbox does not work.
fn corpus_if_sandboxed(test: &str) -> Option<Corpus> {
    sandbox_works(test).then(corpus)
}

/// What one attack gave.
struct Outcome {
    record: RunRecord,
    stdout: String,
    survivors: Vec<i32>,
}

impl Outcome {
    fn escaped(&self) -> bool {
        self.stdout.contains("ESCAPED")
    }
    fn solved(&self) -> bool {
        self.record.outcome.ok == Some(true)
    }
    fn summary(&self) -> String {
        format!(
            "state={} ok={:?} escaped={} survivors={} cause={:?}",
            self.record.outcome.state,
            self.record.outcome.ok,
            self.escaped(),
            self.survivors.len(),
            self.record.attempts[0].cause
        )
    }
}

/// Live processes whose command line contains `marker`.
fn marked(marker: &str) -> Vec<i32> {
    let mut out = Vec::new();
    for e in fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        let cmd = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        if String::from_utf8_lossy(&cmd).contains(marker) && !akbench_worker::process::is_gone(pid)
        {
            out.push(pid);
        }
    }
    out
}

fn kill_all(pids: &[i32]) {
    for p in pids {
        // SAFETY: kill(2) on pids found by marker, in test cleanup.
        unsafe {
            libc::kill(*p, libc::SIGKILL);
        }
    }
}

/// The record of one trial of `req`.
fn run(c: &Corpus, req: &TrialRequest) -> RunRecord {
    c.orchestrator()
        .run_trial(
            req,
            &akbench_core::dispatch::Backoff::NONE,
            &Silent,
            &CancelToken::new(),
        )
        .unwrap()
        .record
}

/// Runs `script` as a scripted agent under `runtime` on task `answer` (whose honest grade is
/// "not solved" unless value.txt is fixed). `env` goes into the descriptor.
fn attack(
    c: &Corpus,
    name: &str,
    runtime: RuntimeKind,
    script: &str,
    env: &[(&str, String)],
    limits: Limits,
) -> Outcome {
    let marker = format!("AKBMARK{}", uuid::Uuid::now_v7().simple());
    let script = script.replace("MARK", &marker);
    let agent = format!("{name}-{}", runtime.as_str());
    let mut toml = format!("adapter = \"scripted\"\nscript = \"{agent}.sh\"\n[env]\n");
    for (k, v) in env {
        toml.push_str(&format!("{k} = \"{v}\"\n"));
    }
    c.add_agent(&agent, &toml, Some(&script));
    let t = c.task("answer");
    let a = c.agent(&agent);
    let mut req = c.request(&t, &a, &agent);
    req.options.runtime = runtime;
    req.options.limits = limits;
    req.options.agent_timeout_sec = Some(30.0);
    let record = run(c, &req);
    let stdout = fs::read_to_string(
        c.root()
            .join("out")
            .join(&agent)
            .join("a1/agent.stdout.log"),
    )
    .unwrap_or_default();
    let survivors = marked(&marker);
    kill_all(&survivors);
    if std::env::var("AKBENCH_ESCAPE_DEBUG").is_ok() {
        let err = fs::read_to_string(
            c.root()
                .join("out")
                .join(&agent)
                .join("a1/agent.stderr.log"),
        )
        .unwrap_or_default();
        eprintln!(
            "{name} {}: stdout={stdout:?} stderr={err:?}",
            runtime.as_str()
        );
    }
    let o = Outcome {
        record,
        stdout,
        survivors,
    };
    eprintln!("{name} under {}: {}", runtime.as_str(), o.summary());
    o
}

/// Runs the attack under both runtimes; asserts the sandbox held and the grade is honest
/// (not solved); returns the direct outcome for the test to describe.
fn both(c: &Corpus, name: &str, script: &str, env: &[(&str, String)]) -> Outcome {
    let s = attack(
        c,
        name,
        common::in_container::isolated(),
        script,
        env,
        Limits::default(),
    );
    assert!(!s.escaped(), "{name}: escaped the sandbox: {}", s.stdout);
    assert!(
        !s.solved(),
        "{name}: the sandboxed attack was graded solved"
    );
    assert!(
        s.survivors.is_empty(),
        "{name}: a process survived the sandbox"
    );
    assert_eq!(
        s.record.options.runtime,
        common::in_container::isolated().as_str()
    );
    let rt = s.record.attempts[0].agent_process.as_ref().unwrap();
    assert!(rt.runtime.as_ref().unwrap().isolated);
    let d = attack(c, name, RuntimeKind::Direct, script, env, Limits::default());
    // Every record made with `direct` says it was unisolated.
    assert_eq!(d.record.options.runtime, "direct");
    let rt = d.record.attempts[0].agent_process.as_ref().unwrap();
    assert!(!rt.runtime.as_ref().unwrap().isolated);
    let note = d.record.attempts[0].transitions[3].note.clone().unwrap();
    assert!(note.starts_with("direct: UNISOLATED"), "{note}");
    d
}

/// Runs the attack sandboxed under `limits`: it must end failed, its cause naming the limit
/// (`names`). Returns the sandboxed outcome.
fn stopped_at_the_limit(
    c: &Corpus,
    name: &str,
    script: &str,
    limits: Limits,
    names: &str,
) -> Outcome {
    let s = attack(
        c,
        name,
        common::in_container::isolated(),
        script,
        &[],
        limits,
    );
    assert_eq!(s.record.outcome.state, State::Failed, "{}", s.summary());
    let cause = s.record.attempts[0].cause.clone().unwrap();
    assert!(cause.contains(names), "{cause}");
    s
}

/// Where the sandbox works: `both` on a fresh corpus, the agent told where the tasks are
/// (`$TASKS`); the direct outcome.
fn both_with_tasks(test: &str, name: &str, script: &str) -> Option<Outcome> {
    let c = corpus_if_sandboxed(test)?;
    Some(both(&c, name, script, &tasks_env(&c)))
}

fn tasks_env(c: &Corpus) -> Vec<(&'static str, String)> {
    vec![("TASKS", c.tasks().display().to_string())]
}

#[test]
fn reading_the_hidden_tests_fails() {
    let Some(d) = both_with_tasks(
        "reading_the_hidden_tests_fails",
        "hidden-tests",
        "cat \"$TASKS/answer/tests/test.sh\" && echo ESCAPED\nexit 0\n",
    ) else {
        return;
    };
    assert!(d.escaped(), "direct lets the agent read the tests");
}

#[test]
fn using_the_reference_solution_fails() {
    let Some(d) = both_with_tasks(
        "using_the_reference_solution_fails",
        "reference",
        "if bash \"$TASKS/answer/solution/solve.sh\"; then echo ESCAPED; fi\nexit 0\n",
    ) else {
        return;
    };
    assert!(
        d.escaped() && d.solved(),
        "direct lets the agent copy the answer"
    );
}

#[test]
fn listing_the_tasks_root_fails() {
    let Some(d) = both_with_tasks(
        "listing_the_tasks_root_fails",
        "tasks-root",
        "ls \"$TASKS\" | grep -q answer && echo ESCAPED\nexit 0\n",
    ) else {
        return;
    };
    assert!(d.escaped());
}

#[test]
fn reading_another_attempts_workspace_fails() {
    let Some(c) = corpus_if_sandboxed("reading_another_attempts_workspace_fails") else {
        return;
    };
    let victim = c.root().join("cache/work/victim/ws");
    fs::create_dir_all(&victim).unwrap();
    fs::write(victim.join("secret.txt"), "another trial's work\n").unwrap();
    let work = c.root().join("cache/work").display().to_string();
    let d = both(
        &c,
        "other-workspace",
        "cat \"$WORK/victim/ws/secret.txt\" && echo ESCAPED\nls \"$WORK\" | grep -q victim && echo ESCAPED\nexit 0\n",
        &[("WORK", work)],
    );
    assert!(d.escaped());
}

#[test]
fn reading_the_workers_environment_fails() {
    // The test process (the worker) has CARGO_MANIFEST_DIR in its environment; the agent's
    // reduced environment does not.
    let Some(c) = corpus_if_sandboxed("reading_the_workers_environment_fails") else {
        return;
    };
    let d = both(
        &c,
        "worker-environ",
        "grep -qa CARGO_MANIFEST_DIR /proc/$PPID/environ && echo ESCAPED\n\
         for f in /proc/[0-9]*/environ; do grep -qa CARGO_MANIFEST_DIR \"$f\" 2>/dev/null && echo ESCAPED; done\nexit 0\n",
        &[],
    );
    assert!(d.escaped());
}

#[test]
fn connecting_to_a_host_loopback_listener_and_postgresql_fails() {
    if !sandbox_works("connecting_to_a_host_loopback_listener_and_postgresql_fails") {
        return;
    }
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let dsn = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(akbench_coordinator::pgcluster::test_support::fresh_database());
    let c = corpus();
    let d = both(
        &c,
        "loopback",
        "(exec 3<>/dev/tcp/127.0.0.1/$PORT) 2>/dev/null && echo ESCAPED-tcp\n\
         psql \"$DSN\" -Atc 'select 1' 2>/dev/null | grep -q 1 && echo ESCAPED-postgres\nexit 0\n",
        &[("PORT", port.to_string()), ("DSN", dsn)],
    );
    assert!(d.stdout.contains("ESCAPED-tcp"), "{}", d.stdout);
    assert!(d.stdout.contains("ESCAPED-postgres"), "{}", d.stdout);
}

#[test]
fn a_declared_endpoint_is_reachable_and_nothing_else() {
    if !sandbox_works("a_declared_endpoint_is_reachable_and_nothing_else") {
        return;
    }
    use std::io::{Read, Write};
    let allowed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let other = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let (ap, op) = (
        allowed.local_addr().unwrap().port(),
        other.local_addr().unwrap().port(),
    );
    let server = std::thread::spawn(move || {
        let (mut s, _) = allowed.accept().unwrap();
        s.write_all(b"hello from the provider\n").unwrap();
        let mut buf = [0u8; 64];
        let n = s.read(&mut buf).unwrap_or(0);
        String::from_utf8_lossy(&buf[..n]).into_owned()
    });
    let c = corpus();
    c.add_agent(
        "net",
        &format!(
            "adapter = \"scripted\"\nscript = \"net.sh\"\nnetwork = [\"localhost:{ap}\"]\n"
        ),
        Some(&format!(
            "exec 3<>/dev/tcp/localhost/{ap} || exit 3\nread -r line <&3\necho \"got: $line\"\necho ping >&3\n\
             (exec 4<>/dev/tcp/127.0.0.1/{op}) 2>/dev/null && echo ESCAPED\nexit 0\n"
        )),
    );
    let t = c.task("answer");
    let a = c.agent("net");
    let rec = run(&c, &c.request(&t, &a, "net"));
    let out = fs::read_to_string(c.root().join("out/net/a1/agent.stdout.log"))
        .unwrap_or_else(|e| panic!("no agent output ({e}): {:?}", rec.attempts[0].cause));
    assert_eq!(
        rec.outcome.state,
        State::Completed,
        "{:?}",
        rec.attempts[0].cause
    );
    assert!(out.contains("got: hello from the provider"), "{out}");
    assert!(!out.contains("ESCAPED"), "{out}");
    assert_eq!(server.join().unwrap(), "ping\n");
}

#[test]
fn a_setsid_process_without_its_tag_does_not_survive() {
    let Some(c) = corpus_if_sandboxed("a_setsid_process_without_its_tag_does_not_survive") else {
        return;
    };
    let d = both(
        &c,
        "setsid",
        "env -u AKBENCH_ATTEMPT_TAG setsid sh -c 'sleep 300; :' MARK >/dev/null 2>&1 < /dev/null &\n\
         env -i sh -c '(sh -c \"sleep 300; :\" MARK &) ' >/dev/null 2>&1 < /dev/null\nsleep 0.3\nexit 0\n",
        &[],
    );
    assert!(
        !d.survivors.is_empty(),
        "direct: the untagged processes survive"
    );
}

#[test]
fn a_surviving_process_cannot_rewrite_the_graders_files() {
    // The survivor keeps replacing the evaluator's copy of the tests (beside the worktree)
    // with one that awards full marks; the agent itself fixes nothing (it waits a moment so
    // the survivor has left its process group before the agent exits).
    let Some(c) = corpus_if_sandboxed("a_surviving_process_cannot_rewrite_the_graders_files")
    else {
        return;
    };
    let script = r#"E="$(dirname "$AKBENCH_WORKSPACE")/eval/tests"
env -u AKBENCH_ATTEMPT_TAG setsid sh -c '
  for i in $(seq 1 400); do
    if [ -d "$1" ]; then printf "echo 1 > \"\$AKBENCH_VERIFIER_DIR/reward.txt\"\n" > "$1/test.sh.new" && mv "$1/test.sh.new" "$1/test.sh"; fi
    sleep 0.02
  done' MARK "$E" >/dev/null 2>&1 < /dev/null &
sleep 0.3
exit 0
"#;
    let d = both(&c, "rewrite-grader", script, &[]);
    eprintln!(
        "direct: rewrite-grader solved={} (a grade that depends on a race with the survivor)",
        d.solved()
    );
}

#[test]
fn allocating_past_memory_mb_ends_failed_naming_the_limit() {
    let Some(c) = corpus_if_sandboxed("allocating_past_memory_mb_ends_failed_naming_the_limit")
    else {
        return;
    };
    let limits = Limits {
        memory_mb: Some(128),
        ..Limits::default()
    };
    let script = "/usr/bin/python3 -c 'b = bytearray(512 * 1024 * 1024); b[::4096] = b\"x\" * len(b[::4096])' && echo ESCAPED\nexit 0\n";
    let s = stopped_at_the_limit(
        &c,
        "memory",
        script,
        limits,
        "memory limit (memory_mb = 128)",
    );
    let rt = s.record.attempts[0]
        .agent_process
        .as_ref()
        .unwrap()
        .runtime
        .clone();
    assert_eq!(rt.unwrap().limit_hit.as_deref(), Some("memory_mb"));
    let d = attack(&c, "memory", RuntimeKind::Direct, script, &[], limits);
    assert!(d.escaped(), "direct enforces no memory limit");
}

#[test]
fn forking_past_the_process_limit_ends_failed_naming_the_limit() {
    let Some(c) =
        corpus_if_sandboxed("forking_past_the_process_limit_ends_failed_naming_the_limit")
    else {
        return;
    };
    let limits = Limits {
        pids: 32,
        ..Limits::default()
    };
    let script = "n=0; for i in $(seq 1 100); do sh -c 'sleep 20; :' MARK 2>/dev/null & n=$((n+1)); done\necho started $n\nkill $(jobs -p) 2>/dev/null\nexit 0\n";
    let s = stopped_at_the_limit(&c, "fork", script, limits, "more than 32 processes");
    assert!(s.survivors.is_empty());
    let d = attack(&c, "fork", RuntimeKind::Direct, script, &[], limits);
    assert_ne!(
        d.record.outcome.state,
        State::Failed,
        "direct has no process limit"
    );
}

#[test]
fn filling_the_disk_ends_failed_naming_the_limit() {
    let Some(c) = corpus_if_sandboxed("filling_the_disk_ends_failed_naming_the_limit") else {
        return;
    };
    let limits = Limits {
        disk_mb: 64,
        ..Limits::default()
    };
    // Many files, each under the per-file cap, together over the limit; then one big file.
    let script = "for i in $(seq 1 8); do head -c 20000000 /dev/zero > f$i; done\nhead -c 200000000 /dev/zero > big && echo ESCAPED\nexit 0\n";
    let s = stopped_at_the_limit(&c, "disk", script, limits, "disk limit (disk_mb = 64)");
    assert!(!s.escaped());
    let d = attack(&c, "disk", RuntimeKind::Direct, script, &[], limits);
    assert!(d.escaped(), "direct enforces no disk limit");
}

/// Runs only when re-executed by [`a_worker_killed_with_kill_9_takes_its_agents_with_it`]:
/// starts a sandboxed attempt whose agent leaves a marked process and hangs.
#[test]
fn helper_hanging_attempt() {
    let Ok(dir) = std::env::var("AKBENCH_ESCAPE_HELPER") else {
        return;
    };
    let runtime = match std::env::var("AKBENCH_ESCAPE_RUNTIME").as_deref() {
        Ok("direct") => RuntimeKind::Direct,
        _ => common::in_container::isolated(),
    };
    let marker = std::env::var("AKBENCH_ESCAPE_MARK").unwrap();
    let c = corpus();
    c.add_agent(
        "hang",
        "adapter = \"scripted\"\nscript = \"hang.sh\"\n",
        Some(&format!(
            "setsid sh -c 'sleep 300; :' {marker} >/dev/null 2>&1 < /dev/null &\nsh -c 'sleep 300; :' {marker}\n"
        )),
    );
    let t = c.task("answer");
    let a = c.agent("hang");
    let mut req = c.request(&t, &a, "hang");
    req.options.runtime = runtime;
    fs::write(Path::new(&dir).join("started"), "").unwrap();
    let _ = c.orchestrator().run_trial(
        &req,
        &akbench_core::dispatch::Backoff::NONE,
        &Silent,
        &CancelToken::new(),
    );
}

fn wait_until(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let until = Instant::now() + limit;
    while Instant::now() < until {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    f()
}

/// Kills the re-executed worker with SIGKILL once its agent runs; returns the marked
/// processes still alive after a bounded wait.
fn kill_9_worker(runtime: &str) -> Vec<i32> {
    let dir = tempfile::tempdir().unwrap();
    let marker = format!("AKBMARK{}", uuid::Uuid::now_v7().simple());
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "helper_hanging_attempt", "--nocapture"])
        .env("AKBENCH_ESCAPE_HELPER", dir.path())
        .env("AKBENCH_ESCAPE_RUNTIME", runtime)
        .env("AKBENCH_ESCAPE_MARK", &marker)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let running = wait_until(Duration::from_secs(60), || marked(&marker).len() >= 2);
    assert!(running, "the helper's agent never started");
    child.kill().unwrap();
    let _ = child.wait();
    // Generous for a loaded machine; returns as soon as every marked process is gone.
    wait_until(Duration::from_secs(30), || marked(&marker).is_empty());
    let left = marked(&marker);
    kill_all(&left);
    left
}

#[test]
fn a_worker_killed_with_kill_9_takes_its_agents_with_it() {
    if !sandbox_works("a_worker_killed_with_kill_9_takes_its_agents_with_it") {
        return;
    }
    let left = kill_9_worker("sandbox");
    assert!(
        left.is_empty(),
        "sandboxed agents outlived the worker: {left:?}"
    );
    let direct = kill_9_worker("direct");
    eprintln!(
        "kill-9 under direct: {} marked process(es) outlived the worker",
        direct.len()
    );
    assert!(!direct.is_empty(), "direct agents outlive a killed worker");
}

#[test]
fn leaving_a_diff_over_diff_mb_ends_failed_naming_the_limit() {
    let Some(c) = corpus_if_sandboxed("leaving_a_diff_over_diff_mb_ends_failed_naming_the_limit")
    else {
        return;
    };
    let limits = Limits {
        diff_mb: 1,
        ..Limits::default()
    };
    // 20 MB of text in one new file: under the disk limit, twenty times the diff limit.
    let script = "yes 'a line of text the agent wrote, over and over' | head -c 20000000 > big.txt\necho wrote\nexit 0\n";
    // Enforced when the diff is collected, so under `direct` too.
    for runtime in [common::in_container::isolated(), RuntimeKind::Direct] {
        let o = attack(&c, "bigdiff", runtime, script, &[], limits);
        assert_eq!(o.record.outcome.state, State::Failed, "{}", o.summary());
        let a = &o.record.attempts[0];
        let cause = a.cause.clone().unwrap();
        assert!(
            cause.starts_with("diff_too_large:") && cause.contains("(diff_mb = 1)"),
            "{cause}"
        );
        // Failed from COLLECTING: the agent ran to its end, its work is over the limit.
        let states: Vec<State> = a.transitions.iter().map(|t| t.state).collect();
        assert_eq!(
            states[states.len() - 2..],
            [State::Collecting, State::Failed],
            "{states:?}"
        );
        // The multi-MB diff is not stored: no diff file, no diff in the record.
        assert_eq!(a.workspace.diff_path, None);
        assert_eq!(a.workspace.files_changed, Some(1));
        assert!(a.workspace.tree_after_agent.is_some());
        let diff = c
            .root()
            .join("out")
            .join(format!("bigdiff-{}", runtime.as_str()));
        assert!(!diff.join("a1/agent.diff").exists());
        let rt = a.agent_process.as_ref().unwrap().runtime.clone().unwrap();
        assert_eq!(rt.limit_hit.as_deref(), Some("diff_mb"));
    }
    // The same agent with the default limit (64 MiB) is not failed for its diff.
    let o = attack(
        &c,
        "bigdiffok",
        common::in_container::isolated(),
        script,
        &[],
        Limits::default(),
    );
    assert_ne!(o.record.outcome.state, State::Failed, "{}", o.summary());
    assert!(o.record.attempts[0].workspace.diff_path.is_some());
}

/// Every other test of this file again, with the worker process as an unprivileged user
/// (common::unprivileged).
#[test]
fn the_runtime_escape_suite_holds_with_an_unprivileged_worker() {
    common::unprivileged::rerun_suite(
        "the_runtime_escape_suite_holds_with_an_unprivileged_worker",
        &[],
    );
}

/// Every other test of this file again under the `container` runtime: each task in the
/// Debian test image, each attack against the container's root file system
/// (common::in_container); there, the unprivileged rerun runs them all again with the
/// worker as an unprivileged user (the container's overlay in its own user namespace).
#[test]
fn the_runtime_escape_suite_holds_in_a_container() {
    common::in_container::rerun_suite(
        "the_runtime_escape_suite_holds_in_a_container",
        &[(
            "helper_hanging_attempt",
            "a helper the kill -9 test starts itself",
        )],
    );
}
