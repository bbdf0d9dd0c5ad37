//! The worker daemon against the real coordinator (scheduler + `Workers` gRPC service on a
//! private PostgreSQL, over loopback TCP), with real git, real child processes and the
//! real `akbench-worker` binary for the signal test. No mocks, no sleeps as synchronisation:
//! every wait is a bounded poll on a condition.

mod common;
mod coord;

use akbench_core::digest::{canonical_json, digest_of};
use akbench_core::lifecycle::State;
use akbench_core::record::AttemptRecord;
use akbench_worker::daemon::{Exit, Handle, WorkerConfig};
use akbench_worker::process::is_gone;
use common::{corpus, Corpus};
use coord::{config, eventually, home_of, pids_in, spawn, work_items, AttemptRow, Coord};
use std::path::Path;
use std::time::Duration;
use tokio::task::JoinHandle;
use uuid::Uuid;

const TTL: Duration = Duration::from_secs(30);

const CHAIN: [&str; 11] = [
    "pending",
    "preparing",
    "validating",
    "configuring_runtime",
    "creating_workspace",
    "starting_agent",
    "executing",
    "collecting",
    "evaluating",
    "finalizing",
    "completed",
];

/// The corpus plus `hang` (the example corpus's script) and `gate` (waits for `<root>/gate`,
/// then exits 0 without changing anything).
fn full_corpus() -> Corpus {
    let c = corpus();
    let hang = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/agents/scripts/hang.sh"),
    )
    .unwrap();
    c.add_agent(
        "hang",
        "adapter = \"scripted\"\nscript = \"hang.sh\"\n",
        Some(&hang),
    );
    let gate = c.root().join("gate");
    c.add_agent(
        "gate",
        "adapter = \"scripted\"\nscript = \"gate.sh\"\n",
        Some(&format!(
            "echo $$ > \"$HOME/pids\"\nwhile [ ! -e '{}' ]; do sleep 0.02; done\nexit 0\n",
            gate.display()
        )),
    );
    c
}

fn open_gate(c: &Corpus) {
    std::fs::write(c.root().join("gate"), "").unwrap();
}

/// A coordinator with `n` trials of `agent` on `answer` (graded or not) enqueued, over a
/// fresh `full_corpus`; and the run and trials.
async fn enqueued(agent: &str, n: u32, grade: bool) -> (Coord, Corpus, Uuid, Vec<Uuid>) {
    let coord = Coord::start(TTL).await;
    let c = full_corpus();
    let items = work_items(&c, agent, n, grade);
    let (run, trials) = coord.enqueue_items(&items).await;
    (coord, c, run, trials)
}

/// The first attempt of `trial` once its agent runs (its 7th transition, `executing`).
async fn agent_running(coord: &Coord, trial: Uuid) -> AttemptRow {
    coord
        .wait_attempt(trial, "the agent to run", |a| a.last_seq >= 7)
        .await
}

/// The first attempt of `trial` once it ended (waiting for `what`), which must be `terminal`.
async fn ended(coord: &Coord, trial: Uuid, what: &str, terminal: &str) -> AttemptRow {
    let a = coord
        .wait_attempt(trial, what, |a| a.terminal.is_some())
        .await;
    assert_eq!(a.terminal.as_deref(), Some(terminal), "{what}: {a:?}");
    a
}

/// Attempt `n` of `trial` (from 0: the first) once it has ended, waited for as `what`.
async fn nth_ended(coord: &Coord, trial: Uuid, n: usize, what: &str) -> AttemptRow {
    eventually(120, what, || async {
        coord
            .attempts(trial)
            .await
            .into_iter()
            .nth(n)
            .filter(|a| a.terminal.is_some())
    })
    .await
}

/// The stored record of `attempt` (and its digest and JSON), once it arrived.
async fn record_of(coord: &Coord, attempt: Uuid) -> (AttemptRecord, String, serde_json::Value) {
    eventually(30, "the record", || async { coord.record(attempt).await }).await
}

/// Drains the daemon `h` and waits for its `run` to end drained.
async fn drained(h: &Handle, run: JoinHandle<Exit>) {
    h.drain("test over");
    assert_eq!(run.await.unwrap(), Exit::Drained);
}

/// Cuts the worker off the coordinator (and refuses it until `refuse(false)`); returns once
/// the worker noticed.
async fn cut_off(coord: &Coord, h: &Handle) {
    coord.proxy.refuse(true);
    coord.proxy.cut();
    tokio::time::timeout(Duration::from_secs(60), h.wait_for(|s| !s.connected))
        .await
        .expect("the worker to notice the cut");
}

/// The three pids the `hang` agent of `attempt` wrote, once it wrote them.
async fn hang_pids(c: &Corpus, attempt: Uuid) -> Vec<i32> {
    let pids_file = home_of(c, attempt).join("pids");
    eventually(30, "the hang agent's three pids", || async {
        let p = pids_in(&pids_file);
        (p.len() == 3).then_some(p)
    })
    .await
}

/// A one-slot daemon configuration with the artifact store `<root>/artifact-store`.
fn stored_config(c: &Corpus, coord: &Coord, id: &str) -> WorkerConfig {
    let mut cfg = config(c, coord, id, 1);
    cfg.artifacts = Some(c.root().join("artifact-store").display().to_string());
    cfg
}

fn states(ts: &[(i32, String)]) -> Vec<&str> {
    ts.iter().map(|(_, s)| s.as_str()).collect()
}

fn assert_contiguous(ts: &[(i32, String)]) {
    for (i, (seq, _)) in ts.iter().enumerate() {
        assert_eq!(
            *seq,
            i32::try_from(i).unwrap() + 1,
            "seqs from 1 without gaps: {ts:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_an_assignment_end_to_end_and_stores_its_artifacts() {
    let coord = Coord::start(TTL).await;
    let c = full_corpus();
    let items = work_items(&c, "oracle", 1, true);
    let (_, trials) = coord.enqueue_items(&items).await;
    let mut cfg = config(&c, &coord, "w-e2e", 1);
    let store = c.root().join("artifact-store");
    cfg.artifacts = Some(store.display().to_string());
    cfg.labels.insert("arch".into(), "test".into());
    let (h, run) = spawn(cfg);

    let a = ended(&coord, trials[0], "the attempt to finish", "completed").await;
    let ts = coord.transitions(a.id).await;
    assert_eq!(states(&ts), CHAIN.to_vec());
    assert_contiguous(&ts);
    // The record: a valid AttemptRecord, stored under the digest of its canonical JSON.
    let (record, digest, value) = record_of(&coord, a.id).await;
    assert_eq!(digest, digest_of(&value));
    assert_eq!(digest, digest_of(&record));
    assert_eq!(record.attempt.id, a.id);
    assert_eq!(record.attempt.key, format!("{}/a1", items[0].trial.key));
    assert_eq!(record.state, State::Completed);
    assert_eq!(record.grade.as_ref().map(|g| g.ok), Some(true));
    assert_eq!(record.transitions.len(), CHAIN.len());
    // Artifacts went to the store and left the local output folder.
    let dir = store.join(&items[0].trial.key).join("a1");
    for f in ["agent.stdout.log", "agent.diff", "attempt_record.json"] {
        assert!(dir.join(f).is_file(), "{f} in {}", dir.display());
    }
    let stored: akbench_core::record::AttemptRecord =
        serde_json::from_slice(&std::fs::read(dir.join("attempt_record.json")).unwrap()).unwrap();
    assert_eq!(canonical_json(&stored), canonical_json(&record));
    assert!(!c
        .root()
        .join("out")
        .join(&items[0].trial.key)
        .join("a1")
        .exists());
    // The lease is released once everything was acknowledged.
    let s = h.wait_for(|s| s.held.is_empty() && s.running == 0).await;
    assert_eq!(s.assignments, 1);
    assert_eq!(s.sessions, 1);

    coord.service.drain_all("test over");
    assert_eq!(run.await.unwrap(), Exit::Drained);
}

/// Names of the mirrors and built baselines under a worker's cache.
fn cached_entries(c: &Corpus) -> Vec<String> {
    let mirrors = c.root().join("cache/mirrors");
    [mirrors.clone(), mirrors.join("baselines")]
        .iter()
        .filter_map(|d| std::fs::read_dir(d).ok())
        .flat_map(|rd| rd.flatten())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".git") || (n.len() == 32 && !n.contains('.')))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_collects_its_caches_after_an_attempt_and_the_next_rebuilds_them() {
    let coord = Coord::start(TTL).await;
    let c = full_corpus();
    let mut cfg = config(&c, &coord, "w-gc", 1);
    // A bound of one byte: after an attempt nothing unused may stay.
    cfg.cache_max_bytes = Some(1);
    let (h, run) = spawn(cfg);
    for round in ["first", "second"] {
        let items = work_items(&c, "oracle", 1, true);
        let (_, trials) = coord.enqueue_items(&items).await;
        let a = coord
            .wait_attempt(trials[0], "the attempt to finish", |a| a.terminal.is_some())
            .await;
        assert_eq!(a.terminal.as_deref(), Some("completed"), "{round}: {a:?}");
        record_of(&coord, a.id).await;
        if round == "first" {
            // The collection runs once the record is on its way: wait for it to end.
            eventually(30, "the collection", || async {
                cached_entries(&c).is_empty().then_some(())
            })
            .await;
            assert_eq!(cached_entries(&c), Vec::<String>::new());
        }
    }
    h.wait_for(|s| s.held.is_empty() && s.running == 0).await;
    coord.service.drain_all("test over");
    assert_eq!(run.await.unwrap(), Exit::Drained);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_stops_a_hanging_agent_and_its_whole_process_tree() {
    let (coord, c, run_id, trials) = enqueued("hang", 1, true).await;
    let (h, run) = spawn(config(&c, &coord, "w-cancel", 1));

    let a = agent_running(&coord, trials[0]).await;
    let pids = hang_pids(&c, a.id).await;
    let report = coord.service.cancel_run(run_id).await.unwrap();
    assert_eq!(report.live.len(), 1);

    let a = ended(&coord, trials[0], "the attempt to end", "cancelled").await;
    for pid in pids {
        assert!(is_gone(pid), "pid {pid} survived the cancel");
    }
    let ts = coord.transitions(a.id).await;
    assert_eq!(ts.last().unwrap().1, "cancelled");
    assert_contiguous(&ts);
    let (record, _, _) = record_of(&coord, a.id).await;
    assert_eq!(record.state, State::Cancelled);
    assert!(record.agent_process.unwrap().cancelled);
    h.wait_for(|s| s.held.is_empty()).await;

    drained(&h, run).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_epoch_refusal_cancels_the_attempt_and_drops_what_it_owes() {
    // A long TTL: no heartbeat (every TTL / 3) comes between the epoch change and the
    // worker's next message, so the refusal alone must stop the attempt.
    let coord = Coord::start(Duration::from_secs(90)).await;
    let c = full_corpus();
    // The evaluation would hang: only a cancel ends this attempt.
    let eval_pids = c.root().join("eval-pids");
    std::fs::write(
        c.tasks().join("answer/tests/test.sh"),
        format!("echo $$ >> '{}'\nexec sleep 3600\n", eval_pids.display()),
    )
    .unwrap();
    let items = work_items(&c, "gate", 1, true);
    let (_, trials) = coord.enqueue_items(&items).await;
    let (h, run) = spawn(config(&c, &coord, "w-stale", 1));

    let a = agent_running(&coord, trials[0]).await;
    // Another lease replaces this one (as after a reap and a re-claim).
    coord
        .client()
        .await
        .execute(
            "UPDATE attempts SET epoch = epoch + 1 WHERE attempt_id = $1",
            &[&a.id],
        )
        .await
        .unwrap();
    // Cut the worker off so that its next messages (collecting, evaluating) cannot be
    // refused before the evaluator has started: the kill check below must have a process
    // to check. The attempt goes on while the worker is disconnected.
    cut_off(&coord, &h).await;
    open_gate(&c);
    let started = eventually(60, "the evaluator to start", || async {
        let p = pids_in(&eval_pids);
        (!p.is_empty()).then_some(p)
    })
    .await;
    // Reconnected, the worker sends what it owes with the old epoch: refused.
    coord.proxy.refuse(false);

    let s = tokio::time::timeout(
        Duration::from_secs(120),
        h.wait_for(|s| s.lost == 1 && s.running == 0 && s.held.is_empty()),
    )
    .await
    .expect("the refusal to end the attempt within 120 s");
    assert_eq!(s.assignments, 1);
    // Nothing after the refused message was stored: no record, no finish.
    let a = coord.attempts(trials[0]).await.remove(0);
    assert_eq!(a.last_seq, 7, "{a:?}");
    assert_eq!(a.terminal, None);
    assert!(coord.record(a.id).await.is_none());
    assert_eq!(pids_in(&eval_pids), started, "one evaluator ran");
    for pid in started {
        assert!(is_gone(pid), "evaluator pid {pid} survived");
    }

    drained(&h, run).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_work_item_ends_invalid_configuration_and_the_daemon_goes_on() {
    let coord = Coord::start(TTL).await;
    let c = full_corpus();
    let bad = Uuid::now_v7();
    let (_, bad_trials) = coord
        .enqueue(&[(
            bad,
            "noop".into(),
            serde_json::json!({"not": "a work item"}),
        )])
        .await;
    // A work item whose task changed since it was planned fails preparation.
    let mut changed = work_items(&c, "noop", 1, true).remove(0);
    changed.trial.task.digest = digest_of(&"something else");
    let (_, changed_trials) = coord.enqueue_items(&[changed]).await;
    let good = work_items(&c, "noop", 1, false);
    let (_, good_trials) = coord.enqueue_items(&good).await;
    let (h, run) = spawn(config(&c, &coord, "w-bad", 1));

    for trial in [bad_trials[0], changed_trials[0]] {
        let a = coord
            .wait_attempt(trial, "the attempt to end", |a| a.terminal.is_some())
            .await;
        assert_eq!(
            a.terminal.as_deref(),
            Some("invalid_configuration"),
            "{a:?}"
        );
        assert_eq!(
            states(&coord.transitions(a.id).await),
            vec!["pending", "invalid_configuration"]
        );
        let (record, _, _) = record_of(&coord, a.id).await;
        assert_eq!(record.state, State::InvalidConfiguration);
        assert!(!a.cause.clone().unwrap_or_default().is_empty(), "{a:?}");
    }
    let cause = coord.attempts(bad_trials[0]).await[0]
        .cause
        .clone()
        .unwrap();
    assert!(cause.contains("work item"), "{cause}");
    let cause = coord.attempts(changed_trials[0]).await[0]
        .cause
        .clone()
        .unwrap();
    assert!(
        cause.contains("changed since the run was planned"),
        "{cause}"
    );
    // The same daemon then runs a good one (ungraded: ends not_graded).
    ended(&coord, good_trials[0], "the good attempt", "not_graded").await;
    assert_eq!(h.status().sessions, 1);

    drained(&h, run).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconnects_presents_its_lease_and_delivers_the_rest() {
    let (coord, c, _, trials) = enqueued("gate", 1, true).await;
    let (h, run) = spawn(config(&c, &coord, "w-reconnect", 1));

    let a = agent_running(&coord, trials[0]).await;
    h.wait_for(|s| s.connected).await;
    // The network fails and stays down while the attempt finishes.
    cut_off(&coord, &h).await;
    open_gate(&c);
    let s = h.wait_for(|s| s.running == 0).await;
    assert_eq!(
        s.held,
        vec![(a.id.to_string(), a.epoch)],
        "the lease is still held"
    );
    assert_eq!(coord.attempts(trials[0]).await[0].terminal, None);
    // The network comes back: the daemon reconnects, presents its lease, re-sends.
    coord.proxy.refuse(false);
    let a2 = coord
        .wait_attempt(trials[0], "the rest to arrive", |a| a.terminal.is_some())
        .await;
    assert_eq!(a2.id, a.id);
    // "gate" changes nothing: graded, not solved, and the attempt is completed.
    assert_eq!(a2.terminal.as_deref(), Some("completed"));
    let ts = coord.transitions(a.id).await;
    assert_eq!(states(&ts), CHAIN.to_vec());
    assert_contiguous(&ts);
    let (record, digest, _) = record_of(&coord, a.id).await;
    assert_eq!(digest, digest_of(&record));
    let s = h.wait_for(|s| s.held.is_empty()).await;
    assert!(s.sessions >= 2, "{s:?}");
    assert_eq!(s.lost, 0);

    drained(&h, run).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn coordinator_drain_lets_the_running_attempt_finish_and_takes_nothing_new() {
    let (coord, c, _, trials) = enqueued("gate", 2, false).await;
    let (h, run) = spawn(config(&c, &coord, "w-drain", 1));

    agent_running(&coord, trials[0]).await;
    assert_eq!(coord.service.drain_all("maintenance"), 1);
    h.wait_for(|s| s.draining).await;
    open_gate(&c);
    assert_eq!(run.await.unwrap(), Exit::Drained);
    let a = coord.attempts(trials[0]).await.remove(0);
    assert_eq!(a.terminal.as_deref(), Some("not_graded"), "{a:?}");
    assert!(coord.record(a.id).await.is_some());
    assert!(
        coord.attempts(trials[1]).await.is_empty(),
        "nothing new was taken"
    );
    assert_eq!(h.status().assignments, 1);
}

/// Issue 28: an agent that outlives the drain's grace is stopped by its worker, not by a
/// user: the attempt, its record, the trial's outcome and its status bucket all say
/// `infrastructure_error` (docs/remote.md), never `cancelled`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drain_grace_expiry_interrupts_what_still_runs_as_an_infrastructure_error() {
    let (coord, c, _, trials) = enqueued("hang", 1, true).await;
    let mut cfg = config(&c, &coord, "w-grace", 1);
    cfg.grace = Duration::from_millis(200);
    let (h, run) = spawn(cfg);

    let a = agent_running(&coord, trials[0]).await;
    let pids = hang_pids(&c, a.id).await;
    h.drain("SIGTERM (test)");
    assert_eq!(run.await.unwrap(), Exit::Drained);
    let a = coord.attempts(trials[0]).await.remove(0);
    assert_eq!(a.terminal.as_deref(), Some("infrastructure_error"), "{a:?}");
    let cause = a.cause.clone().unwrap_or_default();
    assert!(
        cause.contains("interrupted by its worker") && cause.contains("w-grace"),
        "{a:?}"
    );
    let (record, _, _) = coord.record(a.id).await.expect("the record arrived");
    assert_eq!(record.state, State::InfrastructureError);
    let item = coord
        .client()
        .await
        .query_one(
            "SELECT outcome, bucket FROM work_items WHERE trial_id = $1",
            &[&trials[0]],
        )
        .await
        .unwrap();
    let (outcome, bucket): (Option<String>, Option<String>) = (item.get(0), item.get(1));
    assert_eq!(outcome.as_deref(), Some("infrastructure_error"));
    assert_eq!(
        bucket.as_deref(),
        Some("infrastructure_error"),
        "status agrees"
    );
    for pid in pids {
        assert!(is_gone(pid), "pid {pid} survived the drain");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_drains_on_sigterm_and_exits_zero() {
    let (coord, c, _, trials) = enqueued("gate", 2, false).await;
    let token = c.root().join("token");
    std::fs::write(&token, "t0ken\n").unwrap();
    let mut child = worker_binary(&c, coord.url().as_str(), "w-bin")
        .args(["--label", "kind=test"])
        .arg("--token-file")
        .arg(&token)
        .spawn()
        .unwrap();

    agent_running(&coord, trials[0]).await;
    // SAFETY: signals a child this test started.
    unsafe {
        libc::kill(i32::try_from(child.id()).unwrap(), libc::SIGTERM);
    }
    // Logs are collected as they come, to see the drain start before the gate opens.
    let log = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let stderr = child.stderr.take().unwrap();
    let log2 = log.clone();
    let reader = std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            let mut l = log2.lock().unwrap();
            l.push_str(&line);
            l.push('\n');
        }
    });
    eventually(30, "the worker to start draining", || async {
        log.lock().unwrap().contains("draining").then_some(())
    })
    .await;
    open_gate(&c);
    let waited = tokio::task::spawn_blocking(move || child.wait().unwrap());
    let status = tokio::time::timeout(Duration::from_secs(120), waited)
        .await
        .expect("the worker exits")
        .unwrap();
    reader.join().unwrap();
    let stderr = log.lock().unwrap().clone();
    assert_eq!(status.code(), Some(0), "stderr:\n{stderr}");
    assert!(stderr.contains("draining"), "{stderr}");
    assert!(stderr.contains("assignment finished"), "{stderr}");
    let a = coord.attempts(trials[0]).await.remove(0);
    assert_eq!(a.terminal.as_deref(), Some("not_graded"), "{a:?}");
    assert!(coord.record(a.id).await.is_some());
    // The second trial was never offered to the draining worker: its heartbeat said
    // `draining` before the first attempt finished, and the coordinator leases nothing more
    // to a draining worker.
    let second = coord.attempts(trials[1]).await;
    assert!(second.is_empty(), "{second:?}");
}

/// Executes `n` oracle trials of `answer` without grading on a daemon with an artifact store,
/// waits until each ended `not_graded`, and gives their work items documents (as `StartRun`
/// does) so that the coordinator can queue their grading. Returns the run, its trials and
/// the store.
async fn executed_not_graded(
    coord: &Coord,
    c: &Corpus,
    n: u32,
) -> (Uuid, Vec<Uuid>, std::path::PathBuf) {
    let items = work_items(c, "oracle", n, false);
    let (run, trials) = coord.enqueue_items(&items).await;
    coord
        .client()
        .await
        .execute(
            "UPDATE work_items w SET document = p.document::jsonb FROM planned_trials p \
             WHERE p.trial_id = w.trial_id AND w.run_id = $1",
            &[&run],
        )
        .await
        .unwrap();
    for t in &trials {
        let a = ended(coord, *t, "the executed attempt", "not_graded").await;
        record_of(coord, a.id).await;
    }
    (run, trials, c.root().join("artifact-store"))
}

/// The grading attempt (number 2) of `trial`, once it ended, and its record.
async fn graded(
    coord: &Coord,
    trial: Uuid,
) -> (coord::AttemptRow, akbench_core::record::AttemptRecord) {
    let a = nth_ended(coord, trial, 1, "the grading attempt to end").await;
    let (record, _, _) = record_of(coord, a.id).await;
    (a, record)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grade_assignment_rebuilds_from_the_stored_diff_and_refuses_a_tampered_one() {
    let coord = Coord::start(TTL).await;
    let c = full_corpus();
    let (h, run) = spawn(stored_config(&c, &coord, "w-grade"));
    let (run_id, trials, store) = executed_not_graded(&coord, &c, 2).await;
    // Trial 2's stored diff is changed after the fact.
    let first_of = |t: Uuid| {
        let coord = &coord;
        async move {
            let a = coord.attempts(t).await.remove(0);
            coord.record(a.id).await.unwrap().0
        }
    };
    let executed = first_of(trials[1]).await;
    let key = executed
        .attempt
        .key
        .strip_suffix("/a1")
        .unwrap()
        .to_string();
    let tampered = store.join(key).join("a1/agent.diff");
    let mut diff = std::fs::read(&tampered).unwrap();
    assert!(!diff.is_empty(), "the oracle changed files");
    diff.extend_from_slice(b"\n");
    std::fs::write(&tampered, diff).unwrap();

    // What the executed attempt stored (agent logs, diff, its record), to compare after.
    let first = first_of(trials[0]).await;
    let executed_dir = store.join(first.attempt.key.as_str());
    let snapshot = |dir: &Path| {
        let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap())
            .filter(|e| e.file_type().unwrap().is_file())
            .map(|e| {
                (
                    e.file_name().to_string_lossy().into_owned(),
                    std::fs::read(e.path()).unwrap(),
                )
            })
            .collect();
        files.sort();
        files
    };
    let before = snapshot(&executed_dir);
    assert!(
        before.iter().any(|(n, _)| n == "agent.stdout.log"),
        "{before:?}"
    );
    // One trial per transaction: two pages.
    let queued = akbench_coordinator::grade_work::queue_grading_paged(&coord.scheduler, run_id, 1)
        .await
        .unwrap();
    assert_eq!(queued.queued, 2, "{queued:?}");
    let (a, record) = graded(&coord, trials[0]).await;
    assert_eq!(a.terminal.as_deref(), Some("completed"), "{a:?}");
    assert_eq!(record.grade.as_ref().map(|g| g.ok), Some(true));
    assert_eq!(record.graded_from.as_ref(), Some(&first.attempt));
    // Grading wrote its own attempt folder and left the agent's run untouched.
    assert_eq!(
        snapshot(&executed_dir),
        before,
        "the executed attempt's artifacts"
    );
    let grading_dir = store.join(record.attempt.key.as_str());
    let names: Vec<String> = snapshot(&grading_dir).into_iter().map(|f| f.0).collect();
    assert!(names.iter().any(|n| n.starts_with("grade-1.")), "{names:?}");
    assert!(
        names.iter().any(|n| n == "attempt_record.json"),
        "{names:?}"
    );
    // The coordinator's log of the grading attempt is a valid path: the executed attempt's
    // log, then the grade.
    let ts = coord.transitions(a.id).await;
    assert_contiguous(&ts);
    // (The executed attempt went evaluating "grading not requested" -> finalizing ->
    // not_graded.)
    let mut want = CHAIN[..10].to_vec();
    want.extend(["not_graded", "evaluating", "finalizing", "completed"]);
    assert_eq!(states(&ts), want);

    let (a, record) = graded(&coord, trials[1]).await;
    assert_eq!(
        a.terminal.as_deref(),
        Some("invalid_configuration"),
        "{a:?}"
    );
    assert!(record.grade.is_none());
    let cause = a.cause.unwrap_or_default();
    assert!(cause.contains("does not match the digest"), "{cause}");
    // Nothing is owed any more: grading again queues nothing.
    let again = akbench_coordinator::grade_work::queue_grading(&coord.scheduler, run_id)
        .await
        .unwrap();
    assert_eq!(again.queued, 0);
    assert_eq!(h.status().sessions, 1);
    drained(&h, run).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grade_assignment_refuses_a_task_that_changed_since_the_run() {
    let coord = Coord::start(TTL).await;
    let c = full_corpus();
    let (h, run) = spawn(config(&c, &coord, "w-grade-changed", 1));
    let (run_id, trials, _) = executed_not_graded(&coord, &c, 1).await;
    // The reference solution is edited after the run: the release digest no longer matches.
    let solution = c.tasks().join("answer/solution/solve.sh");
    let mut s = std::fs::read_to_string(&solution).unwrap();
    s.push_str("\n# edited after the run\n");
    std::fs::write(&solution, s).unwrap();
    let queued = akbench_coordinator::grade_work::queue_grading(&coord.scheduler, run_id)
        .await
        .unwrap();
    assert_eq!(queued.queued, 1);
    let (a, record) = graded(&coord, trials[0]).await;
    assert_eq!(
        a.terminal.as_deref(),
        Some("invalid_configuration"),
        "{a:?}"
    );
    assert!(record.grade.is_none());
    let cause = a.cause.unwrap_or_default();
    assert!(
        cause.contains("changed since the run was planned"),
        "{cause}"
    );
    drained(&h, run).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grading_that_could_not_fetch_the_diff_is_retried_by_grading_again() {
    let coord = Coord::start(TTL).await;
    let c = full_corpus();
    let (h, run) = spawn(stored_config(&c, &coord, "w-grade-again"));
    let (run_id, trials, store) = executed_not_graded(&coord, &c, 1).await;
    let executed = coord.attempts(trials[0]).await.remove(0);
    let key = coord.record(executed.id).await.unwrap().0.attempt.key;
    let diff = store.join(&key).join("agent.diff");
    let aside = c.root().join("agent.diff.aside");
    std::fs::rename(&diff, &aside).unwrap();

    let queue = || akbench_coordinator::grade_work::queue_grading(&coord.scheduler, run_id);
    assert_eq!(queue().await.unwrap().queued, 1);
    let (a, _) = graded(&coord, trials[0]).await;
    assert_eq!(a.terminal.as_deref(), Some("infrastructure_error"), "{a:?}");
    let cause = a.cause.unwrap_or_default();
    assert!(
        cause.contains("cannot fetch the agent's stored diff"),
        "{cause}"
    );
    // The diff is back: grading again grades it (a third attempt, never the agent).
    std::fs::rename(&aside, &diff).unwrap();
    assert_eq!(queue().await.unwrap().queued, 1);
    let third = nth_ended(&coord, trials[0], 2, "the second grading attempt to end").await;
    assert_eq!(third.terminal.as_deref(), Some("completed"), "{third:?}");
    let (record, _, _) = record_of(&coord, third.id).await;
    assert_eq!(record.graded_from.map(|g| g.id), Some(executed.id));
    assert_eq!(
        queue().await.unwrap().queued,
        0,
        "a verdict is never graded again"
    );
    drained(&h, run).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn labelled_work_goes_to_the_labelled_worker_and_records_name_it() {
    let coord = Coord::start(TTL).await;
    let c = full_corpus();
    // A run that requires `gpu` (execution.worker_labels, stored with the run's caps), then
    // one open to any worker: in plan order the `gpu` run's items come first.
    let (gpu_run, gpu_trials) = coord.enqueue_items(&work_items(&c, "noop", 2, false)).await;
    coord
        .client()
        .await
        .execute(
            "UPDATE runs SET caps = '{\"worker_labels\": [\"gpu\"]}' WHERE run_id = $1",
            &[&gpu_run],
        )
        .await
        .unwrap();
    let (_, open_trials) = coord.enqueue_items(&work_items(&c, "noop", 1, false)).await;

    // An unlabelled worker with one slot takes the open run's trial, never a `gpu` one.
    let (plain, plain_run) = spawn(config(&c, &coord, "w-plain", 1));
    let a = ended(&coord, open_trials[0], "the open trial", "not_graded").await;
    for t in &gpu_trials {
        assert!(
            coord.attempts(*t).await.is_empty(),
            "the unlabelled worker took {t}"
        );
    }
    // A labelled worker takes the `gpu` run.
    let mut cfg = config(&c, &coord, "w-gpu", 2);
    cfg.labels.insert("gpu".into(), "a100".into());
    let (gpu, gpu_run_handle) = spawn(cfg);
    for t in &gpu_trials {
        let a = ended(&coord, *t, "the gpu trial", "not_graded").await;
        let (record, _, _) = record_of(&coord, a.id).await;
        let p = record.provenance.expect("the worker names itself");
        assert_eq!(p.worker_id, "w-gpu");
        assert!(!p.host.is_empty());
        assert_eq!(p.adapter.as_deref(), Some("scripted"));
    }
    let (record, _, _) = record_of(&coord, a.id).await;
    assert_eq!(record.provenance.unwrap().worker_id, "w-plain");
    assert_eq!(plain.status().assignments, 1, "only the open trial");
    assert_eq!(gpu.status().assignments, 2);

    plain.drain("test over");
    gpu.drain("test over");
    assert_eq!(plain_run.await.unwrap(), Exit::Drained);
    assert_eq!(gpu_run_handle.await.unwrap(), Exit::Drained);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prefetched_attempt_is_leased_while_the_slot_is_busy_and_starts_when_it_frees() {
    let (coord, c, _, trials) = enqueued("gate", 3, false).await;
    let mut cfg = config(&c, &coord, "w-prefetch", 1);
    cfg.prefetch = 1;
    let (h, run) = spawn(cfg);

    // One slot, one prefetched: two leases are taken at once; one agent runs (and waits at
    // its gate), the other attempt is leased (and renewed) but does not start; the third
    // trial is not taken.
    let all = |trials: Vec<Uuid>| {
        let coord = &coord;
        async move {
            let mut v = Vec::new();
            for t in &trials {
                v.extend(coord.attempts(*t).await);
            }
            v
        }
    };
    let leased = eventually(120, "one agent to run, one attempt to wait", || async {
        let v = all(trials.clone()).await;
        (v.len() == 2 && v.iter().any(|a| a.last_seq >= 7)).then_some(v)
    })
    .await;
    let s = h.status();
    assert_eq!(s.assignments, 2, "{s:?} {leased:?}");
    assert_eq!(s.held.len(), 2, "{s:?}");
    let waiting = leased.iter().find(|a| a.last_seq == 0);
    assert!(
        waiting.is_some(),
        "the prefetched attempt started while the only slot was busy: {leased:?}"
    );
    let waiting = waiting.unwrap().id;
    assert!(coord.transitions(waiting).await.is_empty());
    // The gate opens: every trial runs, one at a time, each with its whole lifecycle.
    open_gate(&c);
    for t in &trials {
        let a = ended(&coord, *t, "the attempt to end", "not_graded").await;
        let ts = coord.transitions(a.id).await;
        assert_eq!(states(&ts).len(), 11, "{ts:?}");
        assert_contiguous(&ts);
    }
    h.wait_for(|s| s.held.is_empty()).await;
    assert_eq!(h.status().assignments, 3);
    assert_eq!(h.status().lost, 0);
    drained(&h, run).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_hands_back_a_prefetched_attempt_at_once_without_starting_it() {
    let (coord, c, _, trials) = enqueued("gate", 2, false).await;
    let mut cfg = config(&c, &coord, "w-prefetch-drain", 1);
    cfg.prefetch = 1;
    let (h, run) = spawn(cfg);
    // (trial, its first attempt) once one agent runs (at its gate) and one attempt waits.
    let leased = eventually(120, "one agent to run, one attempt to wait", || async {
        let mut v = Vec::new();
        for t in &trials {
            if let Some(a) = coord.attempts(*t).await.into_iter().next() {
                v.push((*t, a));
            }
        }
        (v.len() == 2
            && v.iter().any(|(_, a)| a.last_seq >= 7)
            && v.iter().any(|(_, a)| a.last_seq == 0))
        .then_some(v)
    })
    .await;
    let (waiting_trial, waiting) = leased.iter().find(|(_, a)| a.last_seq == 0).unwrap();
    let (running_trial, _) = leased.iter().find(|(_, a)| a.last_seq >= 7).unwrap();
    let waiting = waiting.id;

    // Draining while the agent still waits at its gate: the prefetched attempt ends now,
    // never started, as the host's doing (retried elsewhere), not after the grace.
    h.drain("test drain");
    let ended = coord
        .wait_attempt(*waiting_trial, "the prefetched attempt to end", |a| {
            a.terminal.is_some()
        })
        .await;
    assert_eq!(ended.id, waiting);
    assert_eq!(
        ended.terminal.as_deref(),
        Some("infrastructure_error"),
        "{ended:?}"
    );
    assert!(
        ended.cause.as_deref().unwrap_or("").contains("not started"),
        "{ended:?}"
    );
    let ts = coord.transitions(waiting).await;
    assert!(
        !states(&ts).contains(&"executing"),
        "the prefetched attempt ran: {ts:?}"
    );
    // The running one is untouched by the drain and finishes inside the grace.
    open_gate(&c);
    let done = coord
        .wait_attempt(*running_trial, "the running attempt to end", |a| {
            a.terminal.is_some()
        })
        .await;
    assert_eq!(done.terminal.as_deref(), Some("not_graded"), "{done:?}");
    assert_eq!(run.await.unwrap(), Exit::Drained);
}

/// The real `akbench-worker` binary with one slot against `url` as `worker_id`, over the
/// corpus `c` (its stderr piped).
fn worker_binary(c: &Corpus, url: &str, worker_id: &str) -> std::process::Command {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_akbench-worker"));
    cmd.env("AKBENCH_COORDINATOR", url)
        .args(["--slots", "1", "--worker-id", worker_id])
        .arg("--cache")
        .arg(c.root().join("cache"))
        .arg("--out")
        .arg(c.root().join("out"))
        .arg("--tasks-root")
        .arg(c.tasks())
        .arg("--agents-root")
        .arg(c.agents())
        .stderr(std::process::Stdio::piped());
    cmd
}

/// Runs the real `akbench-worker` binary against `url` as `worker_id` with `token` until it
/// exits by itself (bounded wait: 180 s, far above the seconds it takes, so a loaded machine
/// never passes for a worker that retries for ever); its exit code and stderr.
async fn worker_binary_until_exit(
    c: &Corpus,
    url: &str,
    worker_id: &str,
    token: Option<&str>,
) -> (Option<i32>, String) {
    worker_binary_until_exit_with(c, url, worker_id, token, &[]).await
}

/// [`worker_binary_until_exit`] with `extra` arguments (TLS files).
async fn worker_binary_until_exit_with(
    c: &Corpus,
    url: &str,
    worker_id: &str,
    token: Option<&str>,
    extra: &[std::ffi::OsString],
) -> (Option<i32>, String) {
    let mut cmd = worker_binary(c, url, worker_id);
    cmd.args(extra)
        .env_remove("AKBENCH_WORKER_TOKEN")
        .stdout(std::process::Stdio::null());
    if let Some(t) = token {
        let file = c.root().join(format!("token-{worker_id}"));
        std::fs::write(&file, format!("{t}\n")).unwrap();
        cmd.arg("--token-file").arg(file);
    }
    let child = cmd.spawn().unwrap();
    let pid = child.id();
    let waited = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap());
    let out = match tokio::time::timeout(Duration::from_secs(180), waited).await {
        Ok(out) => out.unwrap(),
        Err(_) => {
            // SAFETY: signals a child this test started.
            unsafe {
                libc::kill(i32::try_from(pid).unwrap(), libc::SIGKILL);
            }
            panic!("the worker kept retrying instead of exiting");
        }
    };
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A worker whose credential the coordinator refuses (an unknown token, another role's
/// token) stops after a short bounded retry with exit code 4 and says why, instead of
/// retrying for ever; a good token keeps it running.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_credential_ends_the_worker_with_exit_code_4() {
    use akbench_coordinator::auth::{Role, Tokens};
    use akbench_coordinator::server::{serve_with, Config, Services};
    let db = akbench_coordinator::pgcluster::test_support::fresh_database().await;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let handle = serve_with(
        Config::local(db),
        Services {
            tokens: Some(Tokens::from_pairs([
                (Role::Worker, "worker-token-good"),
                (Role::Operator, "operator-token"),
            ])),
            ..Services::default()
        },
        async move {
            let _ = stopped.await;
        },
    )
    .await
    .unwrap();
    let url = format!("http://127.0.0.1:{}", handle.grpc_addr.port());
    let c = full_corpus();
    for (token, code) in [
        (Some("bogus-token"), "Unauthenticated"),
        (Some("operator-token"), "PermissionDenied"),
        (None, "Unauthenticated"),
    ] {
        let (exit, stderr) = worker_binary_until_exit(&c, &url, "w-refused", token).await;
        assert_eq!(exit, Some(4), "token {token:?}; stderr:\n{stderr}");
        assert!(
            stderr.contains(code) && stderr.contains("refused 3 times in a row"),
            "token {token:?}; stderr:\n{stderr}"
        );
    }
    let _ = stop.send(());
    handle.wait().await.unwrap();
}

/// A second worker process with the id of a live worker is refused and exits with code 5,
/// naming the id; the first keeps its session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_process_with_a_live_worker_id_exits_with_code_5() {
    let coord = Coord::start(TTL).await;
    let c = full_corpus();
    let (first, _task) = spawn(config(&c, &coord, "w-dup", 1));
    first.wait_for(|s| s.connected).await;
    let (exit, stderr) = worker_binary_until_exit(&c, coord.url().as_str(), "w-dup", None).await;
    assert_eq!(exit, Some(5), "stderr:\n{stderr}");
    assert!(
        stderr.contains("AlreadyExists") && stderr.contains("\"w-dup\""),
        "stderr:\n{stderr}"
    );
    let s = first.status();
    assert!(s.connected && s.sessions == 1, "{s:?}");
    assert_eq!(coord.service.sessions(), 1);
}

/// A worker whose TLS handshake fails over a certificate exits with code 6 naming the
/// reason and the fix, instead of retrying for ever (`Unknown: transport error` before):
/// its client certificate from another CA (the coordinator's alert), or the coordinator's
/// certificate not verified by its `--ca-file`. A worker without a certificate where one is
/// required exits 4, told the real command that issues one (`akbench certs --worker`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_certificate_ends_the_worker_with_exit_code_6() {
    use akbench_coordinator::devcerts::{Ca, Validity};
    use akbench_coordinator::server::{serve, Config};
    let tmp = tempfile::tempdir().unwrap();
    let day = Validity::days(1);
    let write = |name: &str, text: &str| {
        let p = tmp.path().join(name);
        std::fs::write(&p, text).unwrap();
        p
    };
    let ca = Ca::new("akbench test CA", day).unwrap();
    let other = Ca::new("another CA", day).unwrap();
    let server = ca.server(&["127.0.0.1".to_string()], day).unwrap();
    let ca_pem = write("ca.pem", &ca.pem().cert);
    let other_pem = write("other.pem", &other.pem().cert);
    let foreign = other.worker("w-cert", day).unwrap();
    let foreign_cert = write("foreign.pem", &foreign.cert);
    let foreign_key = write("foreign.key", &foreign.key);
    let db = akbench_coordinator::pgcluster::test_support::fresh_database().await;
    let mut config = Config::local(db);
    config.tls_cert = Some(write("server.pem", &server.cert));
    config.tls_key = Some(write("server.key", &server.key));
    config.client_ca = Some(ca_pem.clone());
    config.require_worker_certs = true;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let handle = serve(config, async move {
        let _ = stopped.await;
    })
    .await
    .unwrap();
    let url = format!("https://127.0.0.1:{}", handle.grpc_addr.port());
    let c = full_corpus();
    let os = |v: &[&std::path::Path]| -> Vec<std::ffi::OsString> {
        v.iter().map(|p| p.as_os_str().to_owned()).collect()
    };
    let flag = |f: &str| std::path::PathBuf::from(f);
    let (ca_flag, cert_flag, key_flag) = (flag("--ca-file"), flag("--tls-cert"), flag("--tls-key"));
    // Its certificate is from another CA: the coordinator's alert names why (the
    // coordinator drains the connection after its alert, so a reset never beats it).
    {
        let args = os(&[
            &ca_flag,
            &ca_pem,
            &cert_flag,
            &foreign_cert,
            &key_flag,
            &foreign_key,
        ]);
        let (exit, stderr) = worker_binary_until_exit_with(&c, &url, "w-cert", None, &args).await;
        assert_eq!(exit, Some(6), "stderr:\n{stderr}");
        assert!(
            stderr.contains("the TLS handshake failed")
                && stderr.contains("refused this worker's client certificate")
                && stderr.contains("--client-ca")
                && stderr.contains("refused 3 times in a row"),
            "stderr:\n{stderr}"
        );
    }
    // It does not trust the coordinator's certificate.
    let args = os(&[
        &ca_flag,
        &other_pem,
        &cert_flag,
        &foreign_cert,
        &key_flag,
        &foreign_key,
    ]);
    let (exit, stderr) = worker_binary_until_exit_with(&c, &url, "w-cert", None, &args).await;
    assert_eq!(exit, Some(6), "stderr:\n{stderr}");
    assert!(
        stderr.contains("invalid peer certificate")
            && stderr.contains("did not accept the coordinator's certificate"),
        "stderr:\n{stderr}"
    );
    // No certificate where one is required: refused (4), told the command that makes one.
    let args = os(&[&ca_flag, &ca_pem]);
    let (exit, stderr) = worker_binary_until_exit_with(&c, &url, "w-cert", None, &args).await;
    assert_eq!(exit, Some(4), "stderr:\n{stderr}");
    assert!(
        stderr.contains("akbench certs --out DIR --worker WORKER_ID")
            && !stderr.contains("certs worker)"),
        "stderr:\n{stderr}"
    );
    let _ = stop.send(());
    handle.wait().await.unwrap();
}
