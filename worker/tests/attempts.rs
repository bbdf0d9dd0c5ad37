//! The orchestrator on real git repositories and real child processes: every terminal state
//! reached for its real cause.

mod common;

use akbench_core::lifecycle::{State, CHAIN};
use akbench_core::record::{RunRecord, TestOutcome};
use akbench_worker::orchestrator::{Observer, Silent, TrialRequest};
use akbench_worker::process::{is_gone, CancelToken};
use common::{corpus, Corpus, TEST_SH};
use std::fs;

fn states(rec: &RunRecord, attempt: usize) -> Vec<State> {
    rec.attempts[attempt]
        .transitions
        .iter()
        .map(|t| t.state)
        .collect()
}

fn run(c: &Corpus, task: &str, agent: &str, name: &str) -> RunRecord {
    let t = c.task(task);
    let a = c.agent(agent);
    let out = c
        .orchestrator()
        .run_trial(
            &c.request(&t, &a, name),
            &akbench_core::dispatch::Backoff::NONE,
            &Silent,
            &CancelToken::new(),
        )
        .unwrap();
    // What was written is what was returned, and it validates.
    let on_disk: RunRecord = serde_json::from_slice(&fs::read(&out.record_path).unwrap()).unwrap();
    assert_eq!(on_disk, out.record);
    on_disk.validate().unwrap();
    out.record
}

/// The cause of the first attempt (which must have one).
fn cause_of(rec: &RunRecord) -> &str {
    rec.attempts[0].cause.as_deref().unwrap()
}

/// A trial of `agent` on `task` named `name`, its request changed by `edit` first.
fn run_with(
    c: &Corpus,
    task: &str,
    agent: &str,
    name: &str,
    edit: impl FnOnce(&mut TrialRequest<'_>),
) -> RunRecord {
    let t = c.task(task);
    let a = c.agent(agent);
    let mut req = c.request(&t, &a, name);
    edit(&mut req);
    c.orchestrator()
        .run_trial(
            &req,
            &akbench_core::dispatch::Backoff::NONE,
            &Silent,
            &CancelToken::new(),
        )
        .unwrap()
        .record
}

/// Adds the scripted agent `name` running `script`; `toml` goes at the end of its descriptor.
fn add_scripted(c: &Corpus, name: &str, toml: &str, script: &str) {
    c.add_agent(
        name,
        &format!("adapter = \"scripted\"\nscript = \"{name}.sh\"\n{toml}"),
        Some(script),
    );
}

#[test]
fn oracle_completes_solved_with_all_eleven_steps() {
    let c = corpus();
    let rec = run(&c, "answer", "oracle", "oracle");
    assert_eq!(states(&rec, 0), CHAIN.to_vec());
    assert_eq!(rec.outcome.state, State::Completed);
    assert_eq!(rec.outcome.ok, Some(true));
    assert_eq!(rec.outcome.score, Some(1.0));
    let a = &rec.attempts[0];
    let g = a.grade.as_ref().unwrap();
    assert_eq!(g.source, "reward_txt");
    assert_eq!(g.tests.len(), 1);
    assert_eq!(g.tests[0].outcome, TestOutcome::Passed);
    assert!(g.report.contains("graded: reward 1"));
    assert!(a.transitions[3]
        .note
        .as_deref()
        .unwrap()
        .starts_with("sandbox: bubblewrap"));
    let rt = a.agent_process.as_ref().unwrap().runtime.as_ref().unwrap();
    assert_eq!((rt.name.as_str(), rt.isolated), ("sandbox", true));
    assert_eq!(rec.options.runtime, "sandbox");
    assert_eq!(a.workspace.files_changed, Some(1));
    let diff = fs::read_to_string(c.root().join("out/oracle/a1/agent.diff")).unwrap();
    assert!(diff.contains("-41") && diff.contains("+42"), "{diff}");
    assert_eq!(a.workspace.base_commit.as_deref(), Some(c.commit.as_str()));
    // The workspace is gone and the mirror's worktree list is pruned.
    assert!(a.workspace.path.is_none() && !a.workspace.kept);
    let work = c.root().join("cache/work");
    assert_eq!(
        fs::read_dir(&work).unwrap().count(),
        0,
        "attempt folders are removed"
    );
}

#[test]
fn an_agent_that_changes_nothing_completes_unsolved() {
    let c = corpus();
    let rec = run(&c, "answer", "noop", "noop");
    assert_eq!(states(&rec, 0), CHAIN.to_vec());
    assert_eq!(rec.outcome.state, State::Completed);
    assert_eq!(rec.outcome.ok, Some(false));
    assert_eq!(rec.outcome.score, Some(0.0));
    let g = rec.attempts[0].grade.as_ref().unwrap();
    assert_eq!(g.tests[0].outcome, TestOutcome::Failed);
    assert_eq!(g.tests[0].message.as_deref(), Some("wrong answer"));
    assert_eq!(rec.attempts[0].workspace.files_changed, Some(0));
    // Nothing changed: the fingerprint is the baseline's tree and the diff is empty.
    let w = &rec.attempts[0].workspace;
    assert_eq!(w.tree_after_agent, w.tree_after_mutation);
    let diff = fs::read(c.root().join("out/noop/a1/agent.diff")).unwrap();
    assert!(diff.is_empty());
    // The work root spreads attempt folders over block groups where the file system can.
    let can = akbench_worker::spread::spread_children(&c.root().join("probe"));
    match std::process::Command::new("lsattr")
        .arg("-d")
        .arg(c.root().join("cache/work"))
        .output()
    {
        Ok(o) if o.status.success() => {
            let attrs = String::from_utf8_lossy(&o.stdout);
            let attrs = attrs.split_whitespace().next().unwrap_or("").to_string();
            assert_eq!(attrs.contains('T'), can, "{attrs}");
        }
        _ => println!("skipped: lsattr is not available to read the work root's flags"),
    }
}

/// COLLECTING skips `write-tree` and `diff-tree` when the index's entries are the baseline's:
/// every kind of change (content with the same size, mode only, a new empty file, a file
/// removed, a file replaced by a symlink (a removal and an addition in git's diff), a new file in a new folder, an ignored file) is
/// still seen, with the tree git itself computes for the worktree.
#[test]
fn every_kind_of_change_is_collected_and_an_ignored_file_is_not() {
    let c = corpus();
    let cases = [
        ("same-size", "echo 40 > value.txt", 1),
        ("mode-only", "chmod +x README", 1),
        ("new-empty", ": > empty.txt", 1),
        ("removed", "rm README", 1),
        ("symlink", "rm README && ln -s value.txt README", 2),
        ("new-folder", "mkdir -p a/b && echo x > a/b/c.txt", 1),
        ("ignored-only", "mkdir -p ignored && echo x > ignored/f", 0),
        ("touched-only", "touch value.txt README", 0),
    ];
    for (name, script, files) in cases {
        add_scripted(&c, name, "", &format!("{script}\n"));
        let rec = run(&c, "answer", name, name);
        let w = &rec.attempts[0].workspace;
        assert_eq!(w.files_changed, Some(files), "{name}");
        let diff = fs::read_to_string(c.root().join(format!("out/{name}/a1/agent.diff"))).unwrap();
        if files == 0 {
            assert_eq!(w.tree_after_agent, w.tree_after_mutation, "{name}");
            assert!(diff.is_empty(), "{name}: {diff}");
            continue;
        }
        assert_ne!(w.tree_after_agent, w.tree_after_mutation, "{name}");
        assert!(diff.starts_with("diff --git "), "{name}: {diff}");
        // The recorded tree is git's own for that worktree: rebuild it from the baseline
        // checkout plus the agent's script in a scratch repository.
        let scratch = c.root().join(format!("check-{name}"));
        let git = |args: &[&str]| {
            let o = std::process::Command::new("git")
                .args(args)
                .current_dir(&scratch)
                .env("GIT_CONFIG_GLOBAL", "/dev/null")
                .output()
                .unwrap();
            assert!(o.status.success(), "{args:?}: {o:?}");
            String::from_utf8(o.stdout).unwrap().trim().to_string()
        };
        fs::create_dir_all(&scratch).unwrap();
        git(&["init", "-q"]);
        git(&[
            "fetch",
            "-q",
            c.root().join("repo").to_str().unwrap(),
            &c.commit,
        ]);
        git(&["checkout", "-q", "FETCH_HEAD"]);
        fs::write(scratch.join("value.txt"), "41\n").unwrap();
        let o = std::process::Command::new("sh")
            .args(["-c", script])
            .current_dir(&scratch)
            .status()
            .unwrap();
        assert!(o.success());
        git(&["add", "-A"]);
        assert_eq!(
            w.tree_after_agent.as_deref(),
            Some(git(&["write-tree"]).as_str()),
            "{name}"
        );
    }
}

#[test]
fn agent_failure_is_failed_and_never_retried() {
    let c = corpus();
    add_scripted(
        &c,
        "crash",
        "",
        "echo broken >&2; echo 7 > value.txt; exit 3\n",
    );
    let rec = run_with(&c, "answer", "crash", "crash", |req| {
        req.infrastructure_retries = 3
    });
    assert_eq!(rec.attempts.len(), 1, "an agent failure is never retried");
    assert_eq!(rec.outcome.state, State::Failed);
    assert_eq!(rec.outcome.ok, None);
    assert_eq!(rec.outcome.score, None);
    assert_eq!(*states(&rec, 0).last().unwrap(), State::Failed);
    assert!(cause_of(&rec).contains("code 3"));
    // Its diff is still on record.
    assert_eq!(rec.attempts[0].workspace.files_changed, Some(1));
    let stderr = fs::read_to_string(c.root().join("out/crash/a1/agent.stderr.log")).unwrap();
    assert_eq!(stderr, "broken\n");
}

#[test]
fn infrastructure_errors_are_retried_up_to_the_budget() {
    let c = corpus();
    c.add_task("ghost", &"ab".repeat(20), TEST_SH, "");
    let rec = run_with(&c, "ghost", "oracle", "ghost", |req| {
        req.infrastructure_retries = 2
    });
    assert_eq!(rec.attempts.len(), 3, "N retries give N+1 attempts");
    for (i, att) in rec.attempts.iter().enumerate() {
        assert_eq!(att.number as usize, i + 1);
        assert_eq!(att.state, State::InfrastructureError);
        assert_eq!(*states(&rec, i).last().unwrap(), State::InfrastructureError);
        assert!(
            att.cause
                .as_deref()
                .unwrap()
                .contains("failed to find commit"),
            "{:?}",
            att.cause
        );
    }
    let ids: std::collections::BTreeSet<_> = rec.attempts.iter().map(|a| a.attempt.id).collect();
    assert_eq!(ids.len(), 3, "each retry has its own id");
    assert_eq!(rec.outcome.state, State::InfrastructureError);
    assert_eq!(rec.outcome.attempts, 3);
}

#[test]
fn timeout_stops_the_agent_and_leaves_no_process_behind() {
    let c = corpus();
    add_scripted(
        &c,
        "hang",
        "",
            "trap '' TERM\nsleep 300 & echo $! >> \"$HOME/pids\"\n\
             (sleep 300 & echo $! >> \"$HOME/pids\"; wait) &\n\
             setsid sleep 300 & echo $! >> \"$HOME/pids\"\n\
             echo $$ >> \"$HOME/pids\"\n\
             while [ \"$(wc -l < \"$HOME/pids\")\" -lt 4 ]; do sleep 0.01; done\n\
             cp \"$HOME/pids\" /tmp/akbench-hang-$AKBENCH_ATTEMPT_TAG.part\n\
             mv /tmp/akbench-hang-$AKBENCH_ATTEMPT_TAG.part /tmp/akbench-hang-$AKBENCH_ATTEMPT_TAG\nsleep 300\n",
    );
    let rec = run_with(&c, "answer", "hang", "hang", |req| {
        // The subshell writes its child's pid asynchronously: the script waits for all four
        // lines before publishing the file (CI once saw 3), and the timeout leaves room for
        // that on a loaded machine.
        req.options.agent_timeout_sec = Some(3.0);
        // The direct runtime's own guarantee (tag sweep); the sandbox's is in
        // escape_runtime.rs.
        req.options.runtime = akbench_worker::runtime::RuntimeKind::Direct;
    });
    assert_eq!(rec.outcome.state, State::Timeout);
    let p = rec.attempts[0].agent_process.as_ref().unwrap();
    assert!(p.timed_out);
    assert_eq!(
        p.stragglers_killed, 1,
        "the setsid process is found by the sweep"
    );
    let tag = rec.attempts[0].attempt.id;
    let pids_file = format!("/tmp/akbench-hang-{tag}");
    let pids: Vec<i32> = fs::read_to_string(&pids_file)
        .unwrap()
        .split_whitespace()
        .map(|s| s.parse().unwrap())
        .collect();
    let _ = fs::remove_file(&pids_file);
    assert_eq!(pids.len(), 4);
    for pid in pids {
        assert!(is_gone(pid), "pid {pid} survived the timeout");
    }
}

#[test]
fn cancel_while_the_agent_runs_ends_cancelled() {
    struct CancelOnExecuting(CancelToken);
    impl Observer for CancelOnExecuting {
        fn transition(
            &self,
            _: &akbench_core::record::Identity,
            _: u32,
            t: &akbench_core::record::Transition,
        ) {
            if t.state == State::Executing {
                self.0.cancel();
            }
        }
    }
    let c = corpus();
    add_scripted(&c, "sleepy", "", "sleep 300\n");
    let t = c.task("answer");
    let a = c.agent("sleepy");
    let token = CancelToken::new();
    let rec = c
        .orchestrator()
        .run_trial(
            &c.request(&t, &a, "sleepy"),
            &akbench_core::dispatch::Backoff::NONE,
            &CancelOnExecuting(token.clone()),
            &token,
        )
        .unwrap()
        .record;
    assert_eq!(rec.outcome.state, State::Cancelled);
    assert!(rec.attempts[0].agent_process.as_ref().unwrap().cancelled);
}

#[test]
fn missing_credential_is_invalid_configuration_before_the_agent_starts() {
    let c = corpus();
    add_scripted(
        &c,
        "needs-key",
        "credentials = [\"AKBENCH_TEST_MISSING_KEY_XYZ\"]\n",
        "touch started\n",
    );
    let rec = run(&c, "answer", "needs-key", "needs-key");
    assert_eq!(rec.outcome.state, State::InvalidConfiguration);
    assert!(
        rec.attempts[0].agent_process.is_none(),
        "the agent never started"
    );
    assert!(!states(&rec, 0).contains(&State::Executing));
    assert!(cause_of(&rec).contains("AKBENCH_TEST_MISSING_KEY_XYZ"));
}

#[test]
fn credential_values_never_reach_the_record_or_the_logs() {
    let c = corpus();
    let secret = "sk-test-very-secret-value-123";
    std::env::set_var("AKBENCH_TEST_PRESENT_KEY", secret);
    add_scripted(
        &c,
        "leaky",
        "credentials = [\"AKBENCH_TEST_PRESENT_KEY\"]\n",
        "echo \"key is $AKBENCH_TEST_PRESENT_KEY\"; echo \"$AKBENCH_TEST_PRESENT_KEY\" >&2\n",
    );
    let rec = run(&c, "answer", "leaky", "leaky");
    assert_eq!(rec.outcome.state, State::Completed);
    let out = c.root().join("out/leaky");
    let mut seen = 0;
    for f in [
        "run_record.json",
        "a1/agent.stdout.log",
        "a1/agent.stderr.log",
        "a1/trajectory.json",
    ] {
        let text = fs::read_to_string(out.join(f)).unwrap();
        assert!(!text.contains(secret), "{f} leaks the secret");
        seen += usize::from(text.contains("[REDACTED:AKBENCH_TEST_PRESENT_KEY]"));
    }
    assert_eq!(
        seen, 3,
        "both logs and the trajectory show the redaction marker"
    );
    let t: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(out.join("a1/trajectory.json")).unwrap()).unwrap();
    akbench_core::trajectory::validate(&t).unwrap();
    assert_eq!(t["agent"]["name"], "scripted");
}

#[test]
fn mutation_that_does_not_apply_and_unexecutable_family_are_invalid_configuration() {
    let c = corpus();
    c.add_task(
        "badpatch",
        &c.commit,
        TEST_SH,
        "[mutation]\npatch = \"mutation.patch\"\n",
    );
    fs::write(
        c.tasks().join("badpatch/mutation.patch"),
        "--- a/value.txt\n+++ b/value.txt\n@@ -1 +1 @@\n-99\n+41\n",
    )
    .unwrap();
    let rec = run(&c, "badpatch", "oracle", "badpatch");
    assert_eq!(rec.outcome.state, State::InvalidConfiguration);
    assert!(cause_of(&rec).contains("mutation"));

    c.add_task("world", &c.commit, TEST_SH, "family = \"interactive\"\n");
    let rec = run(&c, "world", "oracle", "world");
    assert_eq!(rec.outcome.state, State::InvalidConfiguration);
    assert!(cause_of(&rec).contains("interactive"));
}

#[test]
fn a_broken_or_slow_evaluator_is_an_evaluation_error_not_an_agent_failure() {
    let c = corpus();
    c.add_task("crashy-eval", &c.commit, "exit 127\n", "");
    let rec = run(&c, "crashy-eval", "oracle", "crashy-eval");
    assert_eq!(rec.outcome.state, State::EvaluationError);
    assert_eq!(rec.outcome.ok, None);
    assert!(states(&rec, 0).contains(&State::Evaluating));

    c.add_task("slow-eval", &c.commit, "sleep 300\n", "");
    fs::write(
        c.tasks().join("slow-eval/task.toml"),
        fs::read_to_string(c.tasks().join("slow-eval/task.toml"))
            .unwrap()
            .replace("timeout_sec = 30", "timeout_sec = 0.5"),
    )
    .unwrap();
    let rec = run(&c, "slow-eval", "oracle", "slow-eval");
    assert_eq!(rec.outcome.state, State::EvaluationError);
    assert!(cause_of(&rec).contains("timed out"));

    c.add_task(
        "garbage-reward",
        &c.commit,
        "echo maybe > \"$AKBENCH_VERIFIER_DIR/reward.txt\"\n",
        "",
    );
    let rec = run(&c, "garbage-reward", "oracle", "garbage-reward");
    assert_eq!(rec.outcome.state, State::EvaluationError);
}

/// A test script that exits non-zero without writing a reward gives no verdict by itself:
/// its reference solution, graded the same way, writes one, so the missing reward on the
/// agent's run is the agent's doing (core::grading::verdict): graded not solved, the record
/// saying that no reward was written, never evaluation_error.
#[test]
fn a_test_script_that_exits_without_a_reward_is_the_agents_failure_when_the_reference_writes_one() {
    let c = corpus();
    c.add_task(
        "crash-unless-solved",
        &c.commit,
        &format!(
            "cd \"$AKBENCH_WORKSPACE\"\n[ \"$(cat value.txt)\" = 42 ] || {{ echo 'crashing'; exit 1; }}\n{TEST_SH}"
        ),
        "[mutation]\npatch = \"mutation.patch\"\n",
    );
    fs::copy(
        c.tasks().join("answer/mutation.patch"),
        c.tasks().join("crash-unless-solved/mutation.patch"),
    )
    .unwrap();
    let rec = run(&c, "crash-unless-solved", "noop", "crash-unless-solved");
    assert_eq!(
        rec.outcome.state,
        State::Completed,
        "{:?}",
        rec.attempts[0].cause
    );
    assert_eq!(rec.outcome.ok, Some(false));
    let g = rec.attempts[0].grade.as_ref().unwrap();
    assert_eq!(g.source, "no_verdict", "the exit code is not a verdict");
    assert!(!g.tampered);
    let cause = g.cause.as_deref().unwrap_or_default();
    assert!(
        cause.contains("exited 1 without writing a reward")
            && cause.contains("the same grader solves the task's reference solution")
            && cause.contains("the agent's failure"),
        "{cause}"
    );
    assert_eq!(rec.attempts[0].cause.as_deref(), Some(cause));
    // The oracle on the same task: the reward decides, solved.
    let rec = run(
        &c,
        "crash-unless-solved",
        "oracle",
        "crash-unless-solved-oracle",
    );
    assert_eq!(
        (rec.outcome.state, rec.outcome.ok),
        (State::Completed, Some(true))
    );
}

/// Tests that never write a reward (an exit code is all they give) never give a verdict: not
/// on the agent's work, not on the reference solution, so the task is broken, and every
/// trial of it is evaluation_error naming the task, counted against no agent.
#[test]
fn tests_that_never_write_a_reward_are_an_evaluation_error_naming_the_task() {
    let c = corpus();
    c.add_task(
        "exit-code-only",
        &c.commit,
        "cd \"$AKBENCH_WORKSPACE\"\n[ \"$(cat value.txt)\" = 42 ]\n",
        "[mutation]\npatch = \"mutation.patch\"\n",
    );
    fs::copy(
        c.tasks().join("answer/mutation.patch"),
        c.tasks().join("exit-code-only/mutation.patch"),
    )
    .unwrap();
    for (agent, exit) in [("oracle", 0), ("noop", 1)] {
        let rec = run(
            &c,
            "exit-code-only",
            agent,
            &format!("exit-code-only-{agent}"),
        );
        assert_eq!(rec.outcome.state, State::EvaluationError, "{agent}");
        assert_eq!(rec.outcome.ok, None, "{agent}");
        assert!(rec.attempts[0].grade.is_none(), "{agent}");
        let cause = rec.attempts[0].cause.as_deref().unwrap_or_default();
        assert!(
            cause.starts_with("task exit-code-only (version 1.0) is broken: ")
                && cause.contains(&format!("exited {exit} without writing a reward"))
                && cause.contains("wrote no reward for the reference solution either"),
            "{agent}: {cause}"
        );
    }
}

#[test]
fn not_graded_when_grading_is_not_requested() {
    let c = corpus();
    let rec = run_with(&c, "answer", "oracle", "ungraded", |req| {
        req.options.grade = false
    });
    assert_eq!(rec.outcome.state, State::NotGraded);
    assert_eq!(
        rec.outcome.score, None,
        "an ungraded score is absent, never 0"
    );
    let s = states(&rec, 0);
    assert_eq!(&s[..10], &CHAIN[..10]);
    assert_eq!(s[10], State::NotGraded);
    assert_eq!(
        rec.attempts[0].transitions[8].note.as_deref(),
        Some("grading not requested")
    );
}

#[test]
fn no_mutation_gives_the_pinned_commits_tree() {
    let c = corpus();
    let rec = run_with(&c, "answer", "noop", "pristine", |req| {
        req.options.apply_mutation = false
    });
    let repo = c.root().join("repo");
    let pinned_tree = akbench_worker::workspace::tree_of(&repo, &c.commit).unwrap();
    assert_eq!(
        rec.attempts[0].workspace.tree_after_mutation.as_deref(),
        Some(pinned_tree.as_str())
    );
    assert_eq!(
        rec.outcome.ok,
        Some(true),
        "the pristine repository passes its tests"
    );
    assert!(!rec.task.mutation_applied);

    let rec = run(&c, "answer", "noop", "mutated");
    assert_ne!(
        rec.attempts[0].workspace.tree_after_mutation.as_deref(),
        Some(pinned_tree.as_str())
    );
}

#[test]
fn the_agent_cannot_see_the_tests() {
    let c = corpus();
    // The peek agent looks everywhere it can reach from what it is given.
    add_scripted(
        &c,
        "peek",
        "",
            "found=0\n\
             for d in \"$PWD\" \"$HOME\" \"$(dirname \"$PWD\")\" \"$(dirname \"$HOME\")\"; do\n\
               if grep -rqs 'graded: reward' \"$d\"; then echo \"PEEK: found in $d\"; found=1; fi\n\
             done\n\
             env | grep -qs 'tests' && { echo 'PEEK: env mentions tests'; env | grep tests; found=1; }\n\
             [ $found = 0 ] && echo 'PEEK: nothing found'\n\
             exit 0\n",
    );
    let rec = run(&c, "answer", "peek", "peek");
    let out = fs::read_to_string(c.root().join("out/peek/a1/agent.stdout.log")).unwrap();
    assert_eq!(out.trim(), "PEEK: nothing found", "{out}");
    assert_eq!(rec.outcome.state, State::Completed);
}

#[test]
fn eight_parallel_attempts_share_one_mirror_cache() {
    let c = corpus();
    let t = c.task("answer");
    let a = c.agent("oracle");
    let orch = c.orchestrator();
    let records: Vec<RunRecord> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|i| {
                let req = c.request(&t, &a, &format!("par{i}"));
                let orch = &orch;
                s.spawn(move || {
                    orch.run_trial(
                        &req,
                        &akbench_core::dispatch::Backoff::NONE,
                        &Silent,
                        &CancelToken::new(),
                    )
                    .unwrap()
                    .record
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for r in &records {
        assert_eq!(
            r.outcome.state,
            State::Completed,
            "{:?}",
            r.attempts[0].cause
        );
        assert_eq!(r.outcome.ok, Some(true));
    }
    let mirrors = fs::read_dir(c.root().join("cache/mirrors"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "git")
        })
        .count();
    assert_eq!(mirrors, 1);
}

#[test]
fn keep_workspace_keeps_it() {
    let c = corpus();
    let rec = run_with(&c, "answer", "oracle", "kept", |req| {
        req.options.keep_workspace = true
    });
    let ws = rec.attempts[0].workspace.path.clone().unwrap();
    assert_eq!(
        ws, "a1/workspace",
        "a kept workspace travels with its record"
    );
    assert!(rec.attempts[0].workspace.kept);
    let dir = c.root().join("out/kept");
    assert_eq!(
        fs::read_to_string(dir.join(&ws).join("value.txt")).unwrap(),
        "42\n"
    );
    // It is still a working git worktree.
    let st = std::process::Command::new("git")
        .args(["status", "--porcelain"])
        .current_dir(dir.join(&ws))
        .output()
        .unwrap();
    assert!(st.status.success());
}

#[test]
fn a_kept_workspace_holds_no_credential_value() {
    let c = corpus();
    let secret = "sk-test-kept-workspace-secret-456";
    std::env::set_var("AKBENCH_TEST_KEPT_KEY", secret);
    // The value goes into a file, a commit message and a committed blob (stored compressed
    // in the agent's repository, where a byte search would not see it).
    add_scripted(
        &c,
        "keeper",
        "credentials = [\"AKBENCH_TEST_KEPT_KEY\"]\n",
            "echo \"key=$AKBENCH_TEST_KEPT_KEY\" > leak.txt\n\
             git add -A && git -c user.name=a -c user.email=a@example.com commit -q -m \"$AKBENCH_TEST_KEPT_KEY\"\n\
             echo \"again $AKBENCH_TEST_KEPT_KEY\" > leak.txt\n",
    );
    let rec = run_with(&c, "answer", "keeper", "keeper", |req| {
        req.options.keep_workspace = true
    });
    assert!(
        rec.attempts[0].workspace.kept,
        "{:?}",
        rec.attempts[0].cause
    );
    assert!(rec.attempts[0]
        .redacted
        .contains(&"AKBENCH_TEST_KEPT_KEY".to_string()));
    let ws = c
        .root()
        .join("out/keeper")
        .join(rec.attempts[0].workspace.path.clone().unwrap());
    // Every stored byte, and every object git can still read there.
    let mut stack = vec![c.root().join("out/keeper")];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if e.file_type().unwrap().is_dir() {
                stack.push(p);
            } else if let Ok(bytes) = fs::read(&p) {
                assert!(
                    !String::from_utf8_lossy(&bytes).contains(secret),
                    "{} holds the credential",
                    p.display()
                );
            }
        }
    }
    let objects = std::process::Command::new("git")
        .args(["cat-file", "--batch-all-objects", "--batch"])
        .current_dir(&ws)
        .output()
        .unwrap();
    assert!(objects.status.success());
    assert!(!String::from_utf8_lossy(&objects.stdout).contains(secret));
    // The agent's file is kept, scrubbed; the repository still shows it against the baseline.
    assert_eq!(
        fs::read_to_string(ws.join("leak.txt")).unwrap(),
        "again [REDACTED:AKBENCH_TEST_KEPT_KEY]\n"
    );
    let st = std::process::Command::new("git")
        .args(["status", "--porcelain"])
        .current_dir(&ws)
        .output()
        .unwrap();
    assert!(st.status.success());
    assert!(String::from_utf8_lossy(&st.stdout).contains("leak.txt"));
}

#[test]
fn cli_agent_adapters_turn_their_event_streams_into_observations() {
    let c = corpus();
    let fixtures =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../core/tests/fixtures/agents");
    for (adapter, fixture) in [
        ("claude-code", "claude-code/success_multi_turn.jsonl"),
        ("codex", "codex/success.jsonl"),
    ] {
        let fake = c.agents().join(format!("fake-{adapter}"));
        fs::write(
            &fake,
            format!(
                // The fixture is inlined: the sandbox exposes the program, not its folder.
                "#!/bin/bash\necho \"$@\" > \"$HOME/argv\"\ncat <<'AKBENCH_EOF'\n{}AKBENCH_EOF\necho 42 > value.txt\n",
                fs::read_to_string(fixtures.join(fixture)).unwrap()
            ),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&fake, fs::Permissions::from_mode(0o755)).unwrap();
        c.add_agent(
            adapter,
            &format!(
                "adapter = \"{adapter}\"\nmodel = \"m-1\"\nprogram = \"{}\"\n",
                fake.display()
            ),
            None,
        );
        let rec = run(&c, "answer", adapter, adapter);
        assert_eq!(
            rec.outcome.state,
            State::Completed,
            "{:?}",
            rec.attempts[0].cause
        );
        assert_eq!(rec.outcome.ok, Some(true));
        let o = &rec.attempts[0].observations;
        assert!(o.turns.unwrap() >= 1, "{o:?}");
        assert!(o.output_tokens.unwrap() > 0, "{o:?}");
        assert!(o.final_message.is_some(), "{o:?}");
        let argv = &rec.attempts[0].agent_process.as_ref().unwrap().argv;
        assert!(
            argv.contains(&"--json".to_string()) || argv.contains(&"stream-json".to_string()),
            "{argv:?}"
        );
        assert!(argv.contains(&"m-1".to_string()));
    }
}
