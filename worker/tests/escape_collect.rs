//! What the agent leaves in its worktree never takes its trial out of the rate (issue 47,
//! item 4): each test is a scripted agent that writes the correct fix (value.txt = 42) and,
//! next to it, something git cannot record as it is: a nested repository (committed, or an
//! empty `git init`), files and folders made unreadable (the worktree itself too), special
//! files (a FIFO, a unix socket, a FIFO in place of a tracked file), a folder tree 1,500
//! deep and one too long for git to open, files with odd names (a newline, invalid UTF-8, a
//! backslash, names git refuses such as `.GIT` or `git~1`) and a huge file.
//!
//! A kept workspace holds everything the agent left (what was set aside is put back) and
//! grades in place.
//!
//! Each must end graded with the fix kept (`completed`, solved), or, for a diff over the
//! plan's limit, as the agent's failure naming the cause: never `evaluation_error` or
//! `infrastructure_error`; what is not collected is named in the record
//! (`workspace.not_collected`), never dropped silently. The suite runs again with the worker
//! as an unprivileged user (common::unprivileged), where an unreadable file is a real
//! obstacle (a root worker reads through any mode).

mod common;

use akbench_core::lifecycle::State;
use akbench_core::record::RunRecord;
use akbench_worker::orchestrator::Silent;
use akbench_worker::process::CancelToken;
use common::corpus;
use std::fs;
use std::os::unix::fs::FileTypeExt;

/// Runs `script` (then the fix) as the agent of a trial named `name` of the corpus task.
fn run_with(c: &common::Corpus, name: &str, script: &str, diff_mb: Option<u64>) -> RunRecord {
    run_keeping(c, name, script, diff_mb, false)
}

/// [`run_with`], keeping the workspace when `keep`.
fn run_keeping(
    c: &common::Corpus,
    name: &str,
    script: &str,
    diff_mb: Option<u64>,
    keep: bool,
) -> RunRecord {
    c.add_agent(
        name,
        &format!("adapter = \"scripted\"\nscript = \"{name}.sh\"\n"),
        Some(&format!("set -eu\necho 42 > value.txt\n{script}\nexit 0\n")),
    );
    let t = c.task("answer");
    let a = c.agent(name);
    let mut req = c.request(&t, &a, name);
    req.options.runtime = common::in_container::isolated();
    req.options.agent_timeout_sec = Some(300.0);
    if let Some(mb) = diff_mb {
        req.options.limits.diff_mb = mb;
    }
    req.options.keep_workspace = keep;
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

/// The trial was graded and the fix was kept.
fn assert_solved(rec: &RunRecord, name: &str) {
    assert_eq!(
        (rec.outcome.state, rec.outcome.ok),
        (State::Completed, Some(true)),
        "{name}: {:?} {:?}",
        rec.outcome,
        rec.attempts.last().map(|a| &a.cause)
    );
}

/// The record's `workspace.not_collected` entries as (path, why) pairs.
fn not_collected(c: &common::Corpus, name: &str) -> Vec<(String, String)> {
    let bytes = fs::read(c.root().join(format!("out/{name}/run_record.json"))).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    v["attempts"][0]["workspace"]["not_collected"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|e| {
                    (
                        e["path"].as_str().unwrap_or_default().to_string(),
                        e["why"].as_str().unwrap_or_default().to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// `path` is named in the record as not collected, for a reason starting with `why`.
fn assert_named(c: &common::Corpus, name: &str, path: &str, why: &str) {
    let nc = not_collected(c, name);
    assert!(
        nc.iter().any(|(p, w)| p == path && w.starts_with(why)),
        "{name}: {path} ({why}) is not named in workspace.not_collected: {nc:?}"
    );
}

fn diff(c: &common::Corpus, name: &str) -> String {
    String::from_utf8_lossy(&fs::read(c.root().join(format!("out/{name}/a1/agent.diff"))).unwrap())
        .into_owned()
}

#[test]
fn a_nested_repository_is_collected_as_plain_files() {
    let c = corpus();
    let name = "nested";
    let rec = run_with(
        &c,
        name,
        "mkdir -p lib/vendored && cd lib/vendored && git init -q && echo fixed > fix.py\n\
         git add fix.py && git -c user.name=a -c user.email=a@a commit -qm vendored && cd ../..\n\
         mkdir -p scratch && cd scratch && git init -q && echo kept > notes.txt && cd ..\n\
         mkdir -p linked && echo 'gitdir: /nowhere' > linked/.git && echo kept > linked/a.txt",
        None,
    );
    assert_solved(&rec, name);
    let d = diff(&c, name);
    for f in ["lib/vendored/fix.py", "scratch/notes.txt", "linked/a.txt"] {
        assert!(
            d.contains(&format!("diff --git a/{f} b/{f}\nnew file mode 100644")),
            "{f} is not in the diff as a plain file:\n{d}"
        );
    }
    assert!(!d.contains("Subproject commit"), "{d}");
    for p in ["lib/vendored/.git", "scratch/.git", "linked/.git"] {
        assert_named(&c, name, p, "nested repository");
    }
    // value.txt and the three plain files.
    assert_eq!(rec.attempts[0].workspace.files_changed, Some(4));
}

#[test]
fn unreadable_files_and_folders_are_collected() {
    let c = corpus();
    let name = "unreadable";
    let rec = run_with(
        &c,
        name,
        "echo hidden > locked.txt && chmod 000 locked.txt\n\
         mkdir -p shut/inner && echo deep > shut/inner/f.txt && chmod 000 shut/inner/f.txt\n\
         chmod 000 shut/inner && chmod 000 shut\n\
         mkdir -p blind && echo x > blind/g.txt && chmod 300 blind\n\
         chmod 000 .",
        None,
    );
    assert_solved(&rec, name);
    let d = diff(&c, name);
    for f in ["locked.txt", "shut/inner/f.txt", "blind/g.txt"] {
        assert!(
            d.contains(&format!("diff --git a/{f} b/{f}")),
            "{f} is missing from the diff:\n{d}"
        );
    }
    assert_eq!(rec.attempts[0].workspace.files_changed, Some(4));
}

#[test]
fn special_files_are_skipped_and_named() {
    let c = corpus();
    let name = "special";
    let rec = run_with(
        &c,
        name,
        "mkfifo pipe\n\
         rm README && mkfifo README\n\
         python3 -c 'import socket; s = socket.socket(socket.AF_UNIX); s.bind(\"sock\")'\n\
         mkdir -p sub && mkfifo sub/p2",
        None,
    );
    assert_solved(&rec, name);
    for (p, why) in [
        ("pipe", "special file"),
        ("README", "special file"),
        ("sock", "special file"),
        ("sub/p2", "special file"),
    ] {
        assert_named(&c, name, p, why);
    }
    // A tracked file replaced by a FIFO is recorded as removed.
    assert!(
        diff(&c, name).contains("diff --git a/README b/README\ndeleted file"),
        "{}",
        diff(&c, name)
    );
}

/// Makes folder trees through folder descriptors (no path grows past the system's limit).
const DEEP: &str = r#"python3 - <<'EOF'
import os
def deep(name, levels):
    fd = os.open('.', os.O_RDONLY)
    for _ in range(levels):
        os.mkdir(name, dir_fd=fd)
        below = os.open(name, os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = below
    f = os.open('f.txt', os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
    os.write(f, b'bottom\n')
deep('d', 1500)
deep('long', 1500)
EOF"#;

#[test]
fn a_deep_tree_is_collected_and_a_too_long_one_is_named() {
    let c = corpus();
    let name = "deep";
    // 1,500 folders of one letter (3,000 bytes of path): git can record it. 1,500 of four
    // letters (7,500 bytes): the part past git's limit is named, the rest collected.
    let rec = run_with(&c, name, DEEP, None);
    assert_solved(&rec, name);
    let deep = format!("{}f.txt", "d/".repeat(1500));
    assert!(
        diff(&c, name).contains(&format!("diff --git a/{deep} b/{deep}")),
        "the 1,500-deep file is missing from the diff"
    );
    let nc = not_collected(&c, name);
    assert!(
        nc.iter()
            .any(|(p, w)| p.starts_with("long/long/") && w.starts_with("path too long")),
        "the too-long tree is not named: {nc:?}"
    );
}

#[test]
fn odd_names_are_collected_and_names_git_refuses_are_named() {
    let c = corpus();
    let name = "names";
    let rec = run_with(
        &c,
        name,
        "printf 'n\\n' > \"$(printf 'new\\nline')\"\n\
         printf 'u\\n' > \"$(printf 'bad\\377utf8')\"\n\
         printf 'b\\n' > 'back\\slash'\n\
         mkdir -p sub/.GIT && echo x > sub/.GIT/config\n\
         echo x > 'GIT~1'\n\
         echo x > '.git '\n\
         ln -s value.txt .gitmodules",
        None,
    );
    assert_solved(&rec, name);
    let d = diff(&c, name);
    for quoted in ["\"b/new\\nline\"", "\"b/bad\\377utf8\"", "b/back\\\\slash"] {
        assert!(
            d.contains(quoted),
            "{quoted} is missing from the diff:\n{d}"
        );
    }
    for p in ["sub/.GIT", "GIT~1", ".git ", ".gitmodules"] {
        assert_named(&c, name, p, "name git refuses");
    }
}

#[test]
fn a_huge_diff_is_the_agents_failure_and_a_huge_sparse_file_is_collected() {
    let c = corpus();
    // Over the plan's diff limit: the agent's failure, named.
    let name = "huge";
    let rec = run_with(
        &c,
        name,
        "head -c 3000000 /dev/urandom > noise.bin",
        Some(1),
    );
    assert_eq!(rec.outcome.state, State::Failed, "{:?}", rec.outcome);
    let cause = rec.attempts[0].cause.clone().unwrap_or_default();
    assert!(cause.starts_with("diff_too_large"), "{cause}");
    // A 600 MB file of zeros (over git's big-file threshold) under the limit: collected,
    // rebuilt for grading and graded.
    let name = "sparse";
    let rec = run_with(&c, name, "truncate -s 600M zeros.bin", None);
    assert_solved(&rec, name);
}

#[test]
fn a_kept_workspace_holds_all_the_agent_left_and_grades_in_place() {
    let c = corpus();
    let name = "kept";
    let rec = run_keeping(
        &c,
        name,
        "mkdir -p lib && cd lib && git init -q && echo fixed > fix.py && cd ..\n\
         mkfifo pipe\n\
         mkdir -p sub/.GIT && echo x > sub/.GIT/config",
        None,
        true,
    );
    assert_solved(&rec, name);
    let run_dir = c.root().join(format!("out/{name}"));
    let ws = run_dir.join(rec.attempts[0].workspace.path.as_deref().unwrap());
    // What was set aside while git read the worktree is back.
    assert!(ws.join("lib/.git/HEAD").is_file());
    assert!(ws.join("lib/fix.py").is_file());
    assert!(fs::symlink_metadata(ws.join("pipe"))
        .unwrap()
        .file_type()
        .is_fifo());
    assert!(ws.join("sub/.GIT/config").is_file());
    // Its fingerprint, taken again by the same rule, is the recorded one: it grades in place.
    let graded = akbench_worker::regrade::regrade(
        &c.orchestrator(),
        &run_dir,
        &c.tasks(),
        akbench_worker::regrade::WorkspaceMode::InPlace,
        &CancelToken::new(),
    )
    .unwrap();
    assert_eq!(graded.workspace_used, "in_place");
    assert_eq!(
        graded.record.outcome.ok,
        Some(true),
        "{:?}",
        graded.record.outcome
    );
    assert!(ws.join("lib/.git/HEAD").is_file() && ws.join("pipe").exists());
}

/// Every other test of this file again, with the worker process as an unprivileged user
/// (common::unprivileged).
#[test]
fn the_collect_suite_holds_with_an_unprivileged_worker() {
    common::unprivileged::rerun_suite("the_collect_suite_holds_with_an_unprivileged_worker", &[]);
}

/// Every other test of this file again under the `container` runtime: each agent in the
/// Debian test image, what it leaves in the container's working folder (common::in_container).
#[test]
fn the_collect_suite_holds_in_a_container() {
    common::in_container::rerun_suite("the_collect_suite_holds_in_a_container", &[]);
}
