//! Remote mode end to end: a real coordinator served in-process on a fresh database of a
//! private PostgreSQL cluster, and the real `akbench` binary talking to it.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Arc;

use akbench_coordinator::auth::{Role, Tokens};
use akbench_coordinator::pgcluster::test_support;
use akbench_coordinator::server::{serve_with, Config, ServeHandle, Services};
use akbench_coordinator::store::Store;
use akbench_coordinator::work_control::{NoScheduler, WorkControl};
use akbench_core::evidence::EvidenceStore;
use akbench_core::plan::RunPlan;
use tokio::sync::oneshot;
use uuid::Uuid;

const OPERATOR: &str = "operator-token-0123";
const VIEWER: &str = "viewer-token-4567";

struct Coordinator {
    handle: Option<ServeHandle>,
    stop: Option<oneshot::Sender<()>>,
    url: String,
    dir: tempfile::TempDir,
}

impl Coordinator {
    /// `work: None` runs the coordinator's own scheduler.
    async fn start(work: Option<Arc<dyn WorkControl>>, tokens: Tokens) -> Coordinator {
        let db = test_support::fresh_database().await;
        let (stop, stopped) = oneshot::channel::<()>();
        let handle = serve_with(
            Config::local(db),
            Services {
                work,
                tokens: Some(tokens),
                ..Services::default()
            },
            async move {
                let _ = stopped.await;
            },
        )
        .await
        .expect("serves");
        Coordinator {
            url: format!("http://{}", handle.grpc_addr),
            handle: Some(handle),
            stop: Some(stop),
            dir: tempfile::tempdir().unwrap(),
        }
    }

    async fn open() -> Coordinator {
        Coordinator::start(Some(Arc::new(NoScheduler)), Tokens::default()).await
    }

    fn store(&self) -> &Store {
        &self.handle.as_ref().unwrap().store
    }

    /// One value of the coordinator's database (the query names one row).
    async fn scalar<T: for<'a> tokio_postgres::types::FromSql<'a>>(&self, sql: &str) -> T {
        let c = self.store().client().await.unwrap();
        c.query_one(sql, &[]).await.unwrap().get(0)
    }

    fn store_root(&self) -> PathBuf {
        self.dir.path().join("runs")
    }

    /// `akbench --coordinator URL <args>` in the coordinator's temporary folder.
    fn akbench(&self, args: &[&str]) -> Output {
        self.akbench_env(args, &[])
    }

    fn akbench_env(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        let mut c = command(self.dir.path());
        c.arg("--coordinator").arg(&self.url).args(args);
        for (k, v) in env {
            c.env(k, v);
        }
        c.output().expect("run akbench")
    }

    /// Plans and submits `manifest` (default: the example corpus); returns the run key.
    fn plan(&self, manifest: Option<&Path>) -> String {
        let args = self.plan_args(manifest, &[]);
        let o = self.akbench(&args.iter().map(String::as_str).collect::<Vec<_>>());
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(v["created"], true, "{v}");
        assert_eq!(v["state"], "planned");
        v["run_key"].as_str().unwrap().to_string()
    }

    /// `EXTRA... run plan` of `manifest` (default: the example corpus) over the example
    /// tasks and agents into this coordinator's store folder, `--json`.
    fn plan_args(&self, manifest: Option<&Path>, extra: &[&str]) -> Vec<String> {
        let root = repo();
        let config = manifest
            .map(Path::to_path_buf)
            .unwrap_or_else(|| root.join("examples/experiment.yaml"));
        let mut v: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        for a in [
            "run",
            "plan",
            "--config",
            config.to_str().unwrap(),
            "--tasks-root",
            root.join("examples/tasks").to_str().unwrap(),
            "--agents-root",
            root.join("examples/agents").to_str().unwrap(),
            "--store-root",
            self.store_root().to_str().unwrap(),
            "--json",
        ] {
            v.push(a.to_string());
        }
        v
    }

    /// `run records KEY --out OUT EXTRA...`.
    fn records(&self, key: &str, out: &Path, extra: &[&str]) -> Output {
        let args = ["run", "records", key, "--out", out.to_str().unwrap()];
        self.akbench(&[&args[..], extra].concat())
    }

    /// A copy of the example experiment with each `(from, to)` replaced, in this
    /// coordinator's folder as `name`.
    fn manifest_with(&self, name: &str, changes: &[(&str, &str)]) -> PathBuf {
        let mut manifest =
            std::fs::read_to_string(repo().join("examples/experiment.yaml")).unwrap();
        for (from, to) in changes {
            manifest = manifest.replace(from, to);
        }
        let path = self.dir.path().join(name);
        std::fs::write(&path, manifest).unwrap();
        path
    }

    /// The ready plan of a run planned here.
    fn ready(&self, key: &str) -> RunPlan {
        EvidenceStore::new(self.store_root())
            .find(key)
            .unwrap()
            .ready
            .unwrap()
    }

    async fn stop(mut self) {
        let _ = self.stop.take().unwrap().send(());
        self.handle.take().unwrap().wait().await.expect("stops");
    }
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn command(cwd: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_akbench"));
    c.current_dir(cwd);
    for v in [
        "AKBENCH_COORDINATOR",
        "AKBENCH_TOKEN",
        "AKBENCH_STORE_ROOT",
        "AKBENCH_TASKS_ROOT",
        "AKBENCH_AGENTS_ROOT",
    ] {
        c.env_remove(v);
    }
    c
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).to_string()
}

fn json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(o)))
}

async fn sql(store: &Store, statement: &str, run_id: Uuid) {
    store
        .client()
        .await
        .unwrap()
        .execute(statement, &[&run_id])
        .await
        .unwrap();
}

/// Creates the work items of a run by hand (what the scheduler's start does).
async fn start_by_hand(store: &Store, run_id: Uuid) {
    sql(
        store,
        akbench_coordinator::scheduler::test_support::INSERT_ITEMS_BY_HAND_SQL,
        run_id,
    )
    .await;
    sql(
        store,
        "UPDATE runs SET state = 'running', started_at = now() WHERE run_id = $1",
        run_id,
    )
    .await;
}

/// Finishes trial `ordinal` with one attempt and an accepted record.
async fn finish_trial(store: &Store, plan: &RunPlan, ordinal: usize, ok: bool) {
    let trial = &plan.trials[ordinal];
    akbench_coordinator::scheduler::test_support::finish_trial(
        store,
        trial.trial_id,
        &trial.key,
        1,
        akbench_core::lifecycle::State::Completed,
        Some(ok),
        serde_json::json!({}),
    )
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_submit_resubmit_inspect_and_diff() {
    let c = Coordinator::open().await;
    let key = c.plan(None);
    let ready = c.ready(&key);
    assert_eq!(ready.trials.len(), 32, "8 tasks x 2 agents x 2 repetitions");

    // The same documents again: idempotent, said so.
    let o = c.akbench(&[
        "run",
        "submit",
        &key,
        "--store-root",
        c.store_root().to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(
        stdout(&o).contains("identical resubmission"),
        "{}",
        text(&o)
    );

    // Inspect by key and by UUID: the local command's shape, the coordinator's state.
    for name in [key.clone(), ready.run_id.to_string()] {
        let o = c.akbench(&["run", "inspect", &name]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        let out = stdout(&o);
        assert!(out.contains(&format!("run          {key}")), "{out}");
        assert!(out.contains("state        planned"), "{out}");
        assert!(out.contains("plan         ready (32 trials"), "{out}");
    }
    let o = c.akbench(&["run", "inspect", &key, "--json"]);
    let v = json(&o);
    assert_eq!(v["plan_digest"], ready.digest.as_str());
    assert_eq!(v["summary"]["trials"], 32);

    let o = c.akbench(&["run", "inspect", "nope-20260101-0000"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("failed to find run"), "{}", text(&o));

    // A second plan of the same manifest: identical conditions (exit 0); one with fewer
    // repetitions differs (exit 1).
    let same = c.plan(None);
    let o = c.akbench(&["run", "diff", &key, &same]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(stdout(&o).contains("identical conditions"), "{}", text(&o));
    let path = c.manifest_with("one-rep.yaml", &[("repetitions: 2", "repetitions: 1")]);
    let other = c.plan(Some(&path));
    let o = c.akbench(&["run", "diff", &key, &other]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(stdout(&o).contains("repetitions"), "{}", text(&o));
    let v = json(&c.akbench(&["run", "diff", &key, &other, "--json"]));
    assert_eq!(v["identical"], false);
    assert_eq!(v["left"]["run_key"], key.as_str());
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_reconcile_and_records() {
    let c = Coordinator::open().await;
    let key = c.plan(None);
    let ready = c.ready(&key);

    // Nothing graded: null in JSON, "n/a" for people, never 0%.
    let v = json(&c.akbench(&["run", "status", &key, "--json"]));
    assert!(v["rates"]["pass_rate"].is_null(), "{v}");
    assert_eq!(v["planned"], 32);
    assert_eq!(v["run"]["state"], "planned");
    let o = c.akbench(&["run", "status", &key]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(
        stdout(&o).contains("pass rate n/a (0 graded)"),
        "{}",
        text(&o)
    );

    let store = c.store();
    start_by_hand(store, ready.run_id).await;
    finish_trial(store, &ready, 0, true).await;
    finish_trial(store, &ready, 3, false).await;
    let v = json(&c.akbench(&["run", "status", &key, "--json"]));
    assert_eq!(v["rates"]["pass_rate"], 0.5, "{v}");
    assert_eq!(v["finished"], 2);

    // Reconcile the coordinator's own records: valid, 30 missing.
    let o = c.akbench(&["run", "reconcile", &key]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(stdout(&o).contains("accounting valid"), "{}", text(&o));
    let v = json(&c.akbench(&["run", "reconcile", &key, "--json"]));
    assert_eq!(v["counts"]["missing"], 30, "{v}");
    assert_eq!(v["rates"]["pass_rate"], 0.5);

    // A file of observations with a conflicting duplicate: invalid, exit 1.
    let t = &ready.trials;
    let line = |id: Uuid, ok: bool| {
        serde_json::json!({"trial_id": id, "state": "completed", "ok": ok, "score": null, "attempt_id": null, "source": "file"})
            .to_string()
    };
    let file = c.dir.path().join("observations.jsonl");
    let reconcile = |file: &Path| {
        c.akbench(&[
            "run",
            "reconcile",
            &key,
            "--observations",
            file.to_str().unwrap(),
        ])
    };
    // The first line carries what the trial spent: shown as the local command shows it.
    let spent = line(t[0].trial_id, true).replace(
        "}",
        r#","spend":{"input_tokens":100,"cached_input_tokens":null,"output_tokens":7,"cost_usd":0.25}}"#,
    );
    std::fs::write(&file, [spent, line(t[0].trial_id, false)].join("\n")).unwrap();
    let o = reconcile(&file);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(stdout(&o).contains("accounting INVALID"), "{}", text(&o));
    assert!(stdout(&o).contains("1 conflicting"), "{}", text(&o));
    assert!(
        stdout(&o).contains(
            "spend      tokens: input 100 (cached n/a), output 7; cost $0.2500 \
             (1 of 2 observations without spend)"
        ),
        "{}",
        text(&o)
    );
    // A malformed file is bad input: exit 2, nothing sent.
    std::fs::write(&file, "{not json").unwrap();
    let o = reconcile(&file);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));

    // Records: every accepted record in plan order, one folder per trial key.
    let out = c.dir.path().join("records");
    let o = c.records(&key, &out, &["--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let v = json(&o);
    assert_eq!(v["records"], 2, "{v}");
    assert_eq!(v["trials"][0]["ordinal"], 0);
    assert_eq!(v["trials"][1]["ordinal"], 3);
    for i in [0, 3] {
        let path = out.join(&t[i].key).join("run_record.json");
        let bytes = std::fs::read(&path).unwrap();
        let record: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(record["trial"]["key"], t[i].key.as_str());
        assert_eq!(
            akbench_core::digest::digest_bytes(&bytes),
            v["trials"][if i == 0 { 0 } else { 1 }]["digest"]
                .as_str()
                .unwrap()
        );
    }
    let o = c.records(&key, &out, &[]);
    assert!(stdout(&o).starts_with("wrote 2 records"), "{}", text(&o));
    let o = c.records(&key, &out, &["--trial", "not-a-trial"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_follows_the_run_until_it_ends() {
    let c = Coordinator::open().await;
    let key = c.plan(None);
    let ready = c.ready(&key);
    let store = c.store().clone();
    start_by_hand(&store, ready.run_id).await;

    // Not a terminal: one line per update.
    let mut child = command(c.dir.path())
        .args(["--coordinator", &c.url, "run", "status", &key, "--watch"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    assert!(
        first.contains(&key) && first.contains("0/32 finished"),
        "{first}"
    );
    assert!(first.contains("pass rate n/a"), "{first}");
    finish_trial(&store, &ready, 1, true).await;
    let next = lines.next().unwrap().unwrap();
    assert!(next.contains("1/32 finished"), "{next}");
    assert!(next.contains("pass rate 100.0% (1 graded)"), "{next}");
    sql(
        &store,
        "UPDATE runs SET state = 'finished' WHERE run_id = $1",
        ready.run_id,
    )
    .await;
    let rest: Vec<String> = lines.map(Result::unwrap).collect();
    assert!(rest.last().unwrap().contains("finished:"), "{rest:?}");
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("accounting valid"), "{}", text(&o));

    // JSON Lines; a cancelled run ends the watch too.
    let other = c.plan(None);
    let other_id = c.ready(&other).run_id;
    let mut child = command(c.dir.path())
        .args([
            "--coordinator",
            &c.url,
            "run",
            "status",
            &other,
            "--watch",
            "--json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first: serde_json::Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert_eq!(first["run"]["state"], "planned");
    assert!(first["rates"]["pass_rate"].is_null());
    sql(
        &store,
        "UPDATE runs SET state = 'cancelled' WHERE run_id = $1",
        other_id,
    )
    .await;
    let rest: Vec<serde_json::Value> = lines
        .map(|l| serde_json::from_str(&l.unwrap()).unwrap())
        .collect();
    assert_eq!(rest.last().unwrap()["run"]["state"], "cancelled");
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_resume_cancel_and_tokens() {
    // The coordinator's own scheduler on its private PostgreSQL: no double.
    let tokens = Tokens::from_pairs([(Role::Operator, OPERATOR), (Role::Viewer, VIEWER)]);
    let c = Coordinator::start(None, tokens).await;
    let token_file = c.dir.path().join("token");
    std::fs::write(&token_file, format!("{OPERATOR}\n")).unwrap();
    let tf = token_file.to_str().unwrap().to_string();

    // Planning needs an operator token; without one: exit 2 with a hint about the token.
    let plan_args = |extra: &[&str]| c.plan_args(None, extra);
    let args = plan_args(&[]);
    let o = c.akbench(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("no token was sent"), "{}", text(&o));
    let args = plan_args(&["--token-file", &tf]);
    let o = c.akbench(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let key = json(&o)["run_key"].as_str().unwrap().to_string();

    // A wrong token: exit 2, with a hint about the token.
    let o = c.akbench(&["--token", "wrong-token", "run", "status", &key]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("AKBENCH_TOKEN"), "{}", text(&o));
    assert!(text(&o).contains("refused"), "{}", text(&o));
    // A viewer reads (the token from the environment) but may not start.
    let viewer = [("AKBENCH_TOKEN", VIEWER)];
    let o = c.akbench_env(&["run", "status", &key], &viewer);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = c.akbench_env(&["run", "start", &key], &viewer);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("operator token"), "{}", text(&o));
    let work_items = "SELECT count(*) FROM work_items";
    assert_eq!(
        c.scalar::<i64>(work_items).await,
        0,
        "a refused start changed nothing"
    );
    let trials = c.ready(&key).trials.len();

    // The operator starts: one work item per planned trial.
    let o = c.akbench(&["--token-file", &tf, "run", "start", &key]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(
        stdout(&o).contains(&format!("{trials} trials queued")),
        "{}",
        text(&o)
    );
    assert_eq!(c.scalar::<i64>(work_items).await, trials as i64);
    // Cancels: no worker runs anything, so nothing is live and every item is cancelled.
    let o = c.akbench(&[
        "--token", OPERATOR, "run", "cancel", &key, "--reason", "enough",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(stdout(&o).contains("0 live attempts"), "{}", text(&o));
    assert_eq!(
        c.scalar::<String>("SELECT state::text FROM runs").await,
        "cancelled"
    );
    // Grading a cancelled run: FAILED_PRECONDITION, exit 2 with the scheduler's message,
    // and nothing changes.
    let o = c.akbench(&["--token-file", &tf, "run", "resume", &key, "--grade"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("was cancelled"), "{}", text(&o));
    assert_eq!(
        c.scalar::<String>("SELECT state::text FROM runs").await,
        "cancelled"
    );
    // Resuming re-queues every trial without an accepted outcome: all of them.
    let o = c.akbench(&["--token-file", &tf, "run", "resume", &key, "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(json(&o)["requeued"], trials, "{}", text(&o));
    assert!(json(&o)["grading"].is_null(), "no grading asked");
    assert_eq!(
        c.scalar::<String>("SELECT state::text FROM runs").await,
        "running"
    );
    assert_eq!(
        c.scalar::<i64>("SELECT count(*) FROM work_items WHERE state = 'ready'")
            .await,
        trials as i64
    );
    // Again: nothing left to re-queue.
    let o = c.akbench(&["--token-file", &tf, "run", "resume", &key, "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(json(&o)["requeued"], 0, "{}", text(&o));
    // A paused provider route is lifted by hand through the CLI; an unknown route is named.
    c.store()
        .client()
        .await
        .unwrap()
        .execute(
            "INSERT INTO route_pauses (route, consecutive_failures, paused_until, last_error) \
             VALUES ('anthropic', 2, now() + interval '1 hour', 'provider: down')",
            &[],
        )
        .await
        .unwrap();
    let o = c.akbench(&[
        "--token-file",
        &tf,
        "run",
        "resume-route",
        "anthropic",
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(json(&o)["was_paused"], true, "{}", text(&o));
    assert_eq!(json(&o)["last_error"], "provider: down", "{}", text(&o));
    assert_eq!(
        c.scalar::<i64>("SELECT count(*) FROM route_pauses WHERE paused_until > now()")
            .await,
        0
    );
    let o = c.akbench(&["--token-file", &tf, "run", "resume-route", "antropic"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("antropic"), "{}", text(&o));
    // An unknown run: NOT_FOUND, exit 2 with the server's message.
    let o = c.akbench(&["--token-file", &tf, "run", "start", "nope-20260101-0000"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("failed to find run"), "{}", text(&o));
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unavailable_scheduler_and_coordinator_down_exit_3() {
    // No scheduler wired in: UNAVAILABLE, exit 3 naming the coordinator.
    let c = Coordinator::open().await;
    let key = c.plan(None);
    for args in [
        vec!["run", "start", key.as_str()],
        vec!["run", "resume", key.as_str()],
        vec!["run", "cancel", key.as_str()],
    ] {
        let o = c.akbench(&args);
        assert_eq!(o.status.code(), Some(3), "{args:?}: {}", text(&o));
        assert!(text(&o).contains(&c.url), "{}", text(&o));
        assert!(text(&o).contains("no scheduler"), "{}", text(&o));
    }
    let url = c.url.clone();
    c.stop().await;

    // The coordinator is gone: connection refused, exit 3 naming the URL.
    let dir = tempfile::tempdir().unwrap();
    let o = command(dir.path())
        .args(["run", "status", &key])
        .env("AKBENCH_COORDINATOR", &url)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert!(text(&o).contains(&url), "{}", text(&o));
    assert!(text(&o).contains("unavailable"), "{}", text(&o));

    // Remote-only commands without a coordinator: exit 2, saying what is missing.
    for args in [
        vec!["run", "start", "x"],
        vec!["run", "status", "x", "--watch"],
        vec!["run", "records", "x", "--out", "o"],
    ] {
        let o = command(dir.path()).args(&args).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
        assert!(text(&o).contains("--coordinator"), "{}", text(&o));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_whose_labels_no_connected_worker_has_says_so_in_status() {
    let c = Coordinator::start(None, Tokens::default()).await;
    let manifest = c.dir.path().join("labels.yaml");
    std::fs::write(
        &manifest,
        "experiment: lab\ntasks:\n  ids: [pyslug-001]\nagents:\n  conditions:\n    - descriptor: oracle\nrepetitions: 2\nexecution:\n  worker_labels: [gpu, arch=arm64]\n",
    )
    .unwrap();
    let key = c.plan(Some(&manifest));
    let o = c.akbench(&["run", "start", &key]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let status = |c: &Coordinator| {
        let o = c.akbench(&["run", "status", &key, "--json"]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        json(&o)
    };
    let v = status(&c);
    assert_eq!(
        v["worker_labels"],
        serde_json::json!(["arch=arm64", "gpu"]),
        "{v}"
    );
    let line = v["placement"].as_str().unwrap_or_default().to_string();
    assert!(
        line.contains("no connected worker has labels arch=arm64, gpu: 2 trials wait"),
        "{v}"
    );
    let o = c.akbench(&["run", "status", &key]);
    assert!(
        stdout(&o).contains(&format!("waiting    {line}")),
        "{}",
        text(&o)
    );
    // A worker with one of the two labels is not enough; one with both is.
    let s = akbench_coordinator::scheduler::Scheduler::new(c.store().clone());
    let gpu: std::collections::BTreeMap<String, String> = [("gpu".into(), "a100".into())].into();
    s.register_worker("gpu-only", 1, &gpu, "test")
        .await
        .unwrap();
    assert!(status(&c)["placement"].is_string(), "{}", status(&c));
    let mut both = gpu.clone();
    both.insert("arch".into(), "arm64".into());
    s.register_worker("gpu-arm", 1, &both, "test")
        .await
        .unwrap();
    let v = status(&c);
    assert!(v["placement"].is_null(), "{v}");
    assert_eq!(v["workers"], 2, "{v}");
    c.stop().await;
}

/// Plans `manifest` locally (no coordinator) into the coordinator's store folder; returns
/// the run key.
fn plan_locally(c: &Coordinator, manifest: &Path) -> String {
    let root = repo();
    let o = command(c.dir.path())
        .args(["run", "plan", "--config"])
        .arg(manifest)
        .arg("--tasks-root")
        .arg(root.join("examples/tasks"))
        .arg("--agents-root")
        .arg(root.join("examples/agents"))
        .arg("--store-root")
        .arg(c.store_root())
        .arg("--json")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    json(&o)["run_key"].as_str().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_of_many_chunks_is_submitted_whole_and_a_damaged_one_is_refused_storing_nothing() {
    let c = Coordinator::open().await;
    // 8 tasks x 2 agents x 80 repetitions: 1,280 trials, about 1.1 MB of JSON (several chunks).
    let tasks = format!("root: {} ", repo().join("examples/tasks").display());
    let agents = format!("root: {} ", repo().join("examples/agents").display());
    let path = c.manifest_with(
        "many.yaml",
        &[
            ("repetitions: 2", "repetitions: 80"),
            ("root: tasks ", &tasks),
            ("root: agents ", &agents),
        ],
    );
    let key = plan_locally(&c, &path);
    let ready = c.ready(&key);
    assert_eq!(ready.trials.len(), 1280);
    let file = c.store_root().join(&key).join("plan.ready.json");
    // More than four chunks' worth (256 KiB each).
    assert!(std::fs::metadata(&file).unwrap().len() > 1 << 20);
    let store_root = c.store_root();
    let submit = |key: &str| {
        c.akbench(&[
            "run",
            "submit",
            key,
            "--store-root",
            store_root.to_str().unwrap(),
            "--json",
        ])
    };
    let v = json(&submit(&key));
    assert_eq!(
        (v["created"].as_bool(), v["state"].as_str()),
        (Some(true), Some("planned"))
    );
    assert_eq!(v["plan_digest"], ready.digest.as_str());
    let sql = format!("SELECT count(*) FROM planned_trials p JOIN run_catalog c USING (run_id) WHERE c.run_key = '{key}'");
    assert_eq!(c.scalar::<i64>(&sql).await, 1280);
    let v = json(&c.akbench(&["run", "inspect", &key, "--json"]));
    assert_eq!(v["plan_digest"], ready.digest.as_str());

    // Another run whose stored plan was altered after planning: the client's one pass finds
    // the damage at the end (the stream ends early) and reports it; the coordinator holds
    // nothing of it.
    let damaged = plan_locally(&c, &path);
    let file = c.store_root().join(&damaged).join("plan.ready.json");
    let altered = std::fs::read_to_string(&file).unwrap().replacen(
        "\"repetition\":7,",
        "\"repetition\":8,",
        1,
    );
    std::fs::write(&file, altered).unwrap();
    let o = submit(&damaged);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert!(text(&o).contains("digest does not match"), "{}", text(&o));
    let sql = format!("SELECT count(*) FROM run_specs WHERE run_key = '{damaged}'");
    assert_eq!(c.scalar::<i64>(&sql).await, 0);
    c.stop().await;
}

/// A transition batch from seq 1 for `states`, as a worker sends it.
fn batch(
    states: &[akbench_core::lifecycle::State],
) -> Vec<akbench_coordinator::scheduler::TransitionIn> {
    states
        .iter()
        .enumerate()
        .map(|(i, s)| akbench_coordinator::scheduler::TransitionIn {
            seq: u32::try_from(i + 1).unwrap(),
            state: *s,
            at: chrono::Utc::now(),
            note: String::new(),
        })
        .collect()
}

/// One attempt leased to `worker` (for ten minutes), its whole chain reported.
async fn claimed_through_the_chain(
    s: &akbench_coordinator::scheduler::Scheduler,
    worker: &str,
) -> akbench_coordinator::scheduler::Assignment {
    let ttl = std::time::Duration::from_secs(600);
    let a = s.claim(worker, 1, ttl).await.unwrap().remove(0);
    s.record_transitions(
        a.attempt_id,
        a.epoch,
        &batch(&akbench_core::lifecycle::CHAIN),
    )
    .await
    .unwrap();
    a
}

/// Issue 28: a worker reports `completed` and is lost before its record arrives; the reaper
/// takes the lease back and the retry is graded. `run records` exports that trial with both
/// attempts and agrees with reconcile. A trial the coordinator counts as ended but cannot
/// export (a `completed` attempt whose record never arrived) makes `run records` fail (exit 1)
/// naming it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trial_lost_after_its_completed_report_is_exported_with_every_attempt() {
    use akbench_coordinator::scheduler::{Disposition, Scheduler};
    use akbench_core::lifecycle::State;
    let c = Coordinator::start(None, Tokens::default()).await;
    let path = c.manifest_with(
        "retry-once.yaml",
        &[("infrastructure_retries: 0", "infrastructure_retries: 1")],
    );
    let key = c.plan(Some(&path));
    let o = c.akbench(&["run", "start", &key]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let ready = c.ready(&key);
    let key_of = |trial: Uuid| {
        ready
            .trials
            .iter()
            .find(|t| t.trial_id == trial)
            .unwrap()
            .key
            .clone()
    };

    // The real scheduler's statements on the coordinator's database, as its sessions and
    // reaper run them, on a clock of the test's (leases expire, and re-queued trials are
    // ready, by it); no worker is connected, so nothing else claims.
    let clock = Arc::new(akbench_core::clock::ManualClock::new(chrono::Utc::now()));
    let s = Scheduler::with_clock(c.store().clone(), clock.clone());
    for w in ["w-lost", "w-ok"] {
        s.register_worker(w, 1, &Default::default(), "test")
            .await
            .unwrap();
    }
    let lost = claimed_through_the_chain(&s, "w-lost").await;
    // Killed before its record: the lease expires and is reaped.
    clock.advance(chrono::Duration::minutes(30));
    let reaped = s.reap(s.now()).await.unwrap();
    assert_eq!(reaped.len(), 1, "{reaped:?}");
    assert_eq!(reaped[0].disposition, Disposition::Requeued);
    let retry = claimed_through_the_chain(&s, "w-ok").await;
    assert_eq!((retry.trial_id, retry.number), (lost.trial_id, 2));
    let trial_key = key_of(retry.trial_id);
    let record = akbench_core::testkit::attempt_record(
        retry.attempt_id,
        &trial_key,
        2,
        State::Completed,
        Some(true),
    );
    let json_text = akbench_core::digest::canonical_json(&record);
    let digest = akbench_core::digest::digest_bytes(json_text.as_bytes());
    assert!(s
        .upload_record(retry.attempt_id, retry.epoch, &json_text, &digest)
        .await
        .unwrap());
    s.finish(retry.attempt_id, retry.epoch, State::Completed, "")
        .await
        .unwrap();

    // Exported with every attempt; the first one's history says what happened.
    let out = c.dir.path().join("records");
    let o = c.records(&key, &out, &["--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let v = json(&o);
    assert_eq!(v["records"], 1, "{v}");
    let file = out.join(&trial_key).join("run_record.json");
    let r: akbench_core::record::RunRecord =
        serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    r.validate().unwrap();
    let states: Vec<State> = r.attempts.iter().map(|a| a.state).collect();
    assert_eq!(states, [State::InfrastructureError, State::Completed]);
    let first: Vec<State> = r.attempts[0].transitions.iter().map(|t| t.state).collect();
    assert_eq!(
        &first[first.len() - 2..],
        [State::Completed, State::InfrastructureError]
    );
    assert_eq!(r.outcome.ok, Some(true));
    // Reconcile counts what was exported: one succeeded, the rest missing.
    let rec = json(&c.akbench(&["run", "reconcile", &key, "--json"]));
    assert_eq!(rec["counts"]["succeeded"], 1, "{rec}");
    assert_eq!(rec["counts"]["missing"], ready.trials.len() - 1, "{rec}");
    assert_eq!(v["covered"], 1, "{v}");

    // A trial that ends `completed` without its record: counted, not exportable.
    let bare = claimed_through_the_chain(&s, "w-ok").await;
    s.finish(bare.attempt_id, bare.epoch, State::Completed, "")
        .await
        .unwrap();
    let bare_key = key_of(bare.trial_id);
    let o = c.records(&key, &out, &[]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains(&bare_key), "{}", text(&o));
    assert!(text(&o).contains("has not arrived"), "{}", text(&o));
    let o = c.records(&key, &out, &["--trial", &bare_key]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    c.stop().await;
}
