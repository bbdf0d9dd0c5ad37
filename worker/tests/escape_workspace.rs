//! Escape attempts on the workspace, each by a scripted agent under the `direct` runtime:
//! the attacks are about git and files, so they must fail without a sandbox too.
//!
//! - take the answer from git: history, refs, reflogs, every object git lists, unreachable
//!   objects, the objects in the pack files, borrowed objects, the pinned commit by hash;
//! - poison the mirror (replace ref, smudge filter + `info/attributes`, hooks, fsmonitor)
//!   and compare a later trial's starting tree, and check that nothing planted ran;
//! - grow the mirror with a large file;
//! - write a credential into source and look for it in everything stored.

mod common;

use akbench_core::lifecycle::State;
use akbench_core::record::RunRecord;
use akbench_worker::orchestrator::Silent;
use akbench_worker::process::CancelToken;
use akbench_worker::runtime::RuntimeKind;
use common::corpus;
use std::fs;
use std::path::Path;

fn run(c: &common::Corpus, task: &str, agent: &str, name: &str) -> RunRecord {
    run_in(c, task, agent, name, common::in_container::isolated())
}

/// One trial under `runtime` (the mirror attacks need `direct`, where the mirror is reachable).
fn run_in(
    c: &common::Corpus,
    task: &str,
    agent: &str,
    name: &str,
    runtime: RuntimeKind,
) -> RunRecord {
    let t = c.task(task);
    let a = c.agent(agent);
    let mut req = c.request(&t, &a, name);
    req.options.runtime = runtime;
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

fn read(p: &Path) -> String {
    fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Every way an agent can ask git for history. Each finding is printed as `FOUND <how>`
/// and, when it holds the answer, written to value.txt (which is what the tests grade).
const GIT_THIEF: &str = r#"set -u
pinned=__PINNED__
try() { # $1 = how, $2 = a commit-ish or blob; takes value.txt from it when it holds 42
    v=$(git show "$2:value.txt" 2>/dev/null || git cat-file -p "$2" 2>/dev/null)
    if [ "$v" = 42 ]; then echo "FOUND $1 $2"; echo 42 > value.txt; fi
}
echo "COMMITS $(git rev-list --all | wc -l)"
echo "LOG $(git log --all --reflog --format=%H | sort -u | wc -l)"
echo "REFS $(git for-each-ref | wc -l)"
echo "OBJECTS $(git cat-file --batch-all-objects --batch-check | wc -l)"
for c in $(git rev-list --all --reflog); do try history "$c"; done
for r in $(git for-each-ref --format='%(objectname)'); do try ref "$r"; done
for o in $(git cat-file --batch-all-objects --batch-check='%(objectname)'); do try object "$o"; done
for o in $(git fsck --lost-found --unreachable --no-reflogs 2>/dev/null | awk '{print $3}'); do try unreachable "$o"; done
for idx in .git/objects/pack/*.idx; do
    for o in $(git show-index < "$idx" | awk '{print $2}'); do try pack "$o"; done
done
try pinned "$pinned"
git fetch -q "$(git config --get remote.origin.url 2>/dev/null || echo none)" "$pinned" 2>/dev/null && try fetched FETCH_HEAD
if [ -e .git/objects/info/alternates ]; then echo "FOUND alternates"; fi
if [ -f .git ]; then echo "FOUND gitfile $(cat .git)"; fi
echo "HEAD_PARENTS $(git rev-list --count HEAD)"
exit 0
"#;

#[test]
fn the_answer_cannot_be_taken_from_git() {
    let c = corpus();
    c.add_agent(
        "git-thief",
        "adapter = \"scripted\"\nscript = \"git-thief.sh\"\n",
        Some(&GIT_THIEF.replace("__PINNED__", &c.commit)),
    );
    // The repository itself holds no answer: the attack fails under both runtimes.
    for (name, runtime) in [
        ("thief", common::in_container::isolated()),
        ("direct-thief", RuntimeKind::Direct),
    ] {
        let rec = run_in(&c, "answer", "git-thief", name, runtime);
        let log = read(&c.root().join(format!("out/{name}/a1/agent.stdout.log")));
        assert_eq!(rec.outcome.state, State::Completed, "{name}: {log}");
        assert!(
            !log.contains("FOUND"),
            "{name}: the agent found the answer:\n{log}"
        );
        assert_eq!(rec.outcome.ok, Some(false), "{name}: {log}");
        // Exactly the baseline: one commit, reachable from HEAD only, and its tree and blobs
        // (value.txt, .gitignore, README: 3 blobs, 1 tree, 1 commit).
        for expected in [
            "COMMITS 1\n",
            "LOG 1\n",
            "REFS 0\n",
            "OBJECTS 5\n",
            "HEAD_PARENTS 1\n",
        ] {
            assert!(
                log.contains(expected),
                "{name}: expected {expected:?} in:\n{log}"
            );
        }
    }
}

/// Plants everything git could execute or be misled by in the mirror of the task's repository.
const MIRROR_POISONER: &str = r#"set -eu
m=__MIRROR__
marks=__MARKS__
first=__FIRST__
pinned=__PINNED__
g() { git --git-dir="$m" "$@"; }
# A replace ref: the pinned commit now reads as the first commit.
g replace -f "$pinned" "$first"
# A smudge filter applied to every file, and a clean filter.
g config filter.evil.smudge "sh -c 'touch $marks/smudge; cat'"
g config filter.evil.clean "sh -c 'touch $marks/clean; cat'"
mkdir -p "$m/info"
echo '* filter=evil' > "$m/info/attributes"
# Hooks and an fsmonitor.
for h in post-checkout reference-transaction pre-auto-gc post-index-change; do
    printf '#!/bin/sh\ntouch %s/hook-%s\n' "$marks" "$h" > "$m/hooks/$h"
    chmod +x "$m/hooks/$h"
done
g config core.fsmonitor "$marks/fsmonitor.sh"
printf '#!/bin/sh\ntouch %s/fsmonitor\n' "$marks" > "$marks/fsmonitor.sh"
chmod +x "$marks/fsmonitor.sh"
g config core.hooksPath "$m/hooks"
echo planted
"#;

#[test]
fn a_poisoned_mirror_changes_no_later_tree_and_runs_nothing() {
    let c = corpus();
    let first = run(&c, "answer", "noop", "first");
    let tree = first.attempts[0].workspace.tree_after_mutation.clone();
    assert!(tree.is_some());
    let mirrors = c.root().join("cache/mirrors");
    let mirror = fs::read_dir(&mirrors)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "git"))
        .expect("the first trial made a mirror");
    let marks = c.root().join("marks");
    fs::create_dir_all(&marks).unwrap();
    let script = MIRROR_POISONER
        .replace("__MIRROR__", &mirror.display().to_string())
        .replace("__MARKS__", &marks.display().to_string())
        .replace("__FIRST__", &c.first_commit)
        .replace("__PINNED__", &c.commit);
    c.add_agent(
        "poisoner",
        "adapter = \"scripted\"\nscript = \"poisoner.sh\"\n",
        Some(&script),
    );
    // Under the sandbox the mirror is out of reach: the poisoning itself fails.
    run(&c, "answer", "poisoner", "sandboxed-poisoner");
    let log = read(&c.root().join("out/sandboxed-poisoner/a1/agent.stdout.log"));
    assert!(
        !log.contains("planted"),
        "the sandbox let the agent write the mirror: {log}"
    );
    // Under `direct` it is reachable and planted; the git hardening must make it harmless.
    let rec = run_in(&c, "answer", "poisoner", "poisoner", RuntimeKind::Direct);
    let log = read(&c.root().join("out/poisoner/a1/agent.stdout.log"));
    assert!(log.contains("planted"), "the attack ran: {log}");
    assert_eq!(rec.outcome.state, State::Completed);

    // A later trial made from the cached baseline, and one that rebuilds it from the
    // poisoned mirror (the cache emptied, as on a new host sharing the mirror).
    let cached = run(&c, "answer", "noop", "cached");
    let _ = fs::remove_dir_all(mirrors.join("baselines"));
    let rebuilt = run(&c, "answer", "noop", "rebuilt");
    for (name, r) in [("cached", &cached), ("rebuilt", &rebuilt)] {
        assert_eq!(r.outcome.state, State::Completed, "{name}: {:?}", r.outcome);
        assert_eq!(
            r.attempts[0].workspace.tree_after_mutation, tree,
            "{name}: the starting tree changed"
        );
        assert_eq!(r.outcome.ok, Some(false), "{name}: a noop stays unsolved");
    }
    let ran: Vec<_> = fs::read_dir(&marks)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n != "fsmonitor.sh")
        .collect();
    assert!(ran.is_empty(), "planted code ran in the worker: {ran:?}");
    // The poisoned mirror really would mislead plain git (the attack is not a dud).
    let out = std::process::Command::new("git")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .arg("--git-dir")
        .arg(&mirror)
        .args(["rev-parse", &format!("{}^{{tree}}", c.commit)])
        .output()
        .unwrap();
    let plain = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let honest = akbench_worker::workspace::tree_of(&c.root().join("repo"), &c.commit).unwrap();
    assert_ne!(plain, honest, "plain git follows the replace ref");
}

fn du(dir: &Path) -> u64 {
    let mut total = 0;
    if let Ok(rd) = fs::read_dir(dir) {
        for e in rd.flatten() {
            let Ok(m) = e.path().symlink_metadata() else {
                continue;
            };
            total += if m.is_dir() { du(&e.path()) } else { m.len() };
        }
    }
    total
}

#[test]
fn a_large_file_written_by_the_agent_grows_no_cache() {
    let c = corpus();
    // Warm the cache (mirror and baseline) first.
    run(&c, "answer", "noop", "warm");
    let cache = c.root().join("cache/mirrors");
    let before = du(&cache);
    c.add_agent(
        "big",
        "adapter = \"scripted\"\nscript = \"big.sh\"\n",
        Some("head -c 300000000 /dev/zero > big.bin && git add big.bin && git -c user.name=a -c user.email=a@a commit -qm big && git gc -q\nexit 0\n"),
    );
    // Writing, committing and repacking 300 MB takes a minute on a loaded 2-core machine: the
    // test is about the cache, not the agent's deadline, so the deadline is generous.
    let t = c.task("answer");
    let a = c.agent("big");
    let mut req = c.request(&t, &a, "big");
    req.options.runtime = common::in_container::isolated();
    req.options.agent_timeout_sec = Some(600.0);
    let rec = c
        .orchestrator()
        .run_trial(
            &req,
            &akbench_core::dispatch::Backoff::NONE,
            &Silent,
            &CancelToken::new(),
        )
        .unwrap()
        .record;
    assert_eq!(rec.outcome.state, State::Completed, "{:?}", rec.outcome);
    assert_eq!(
        rec.attempts[0].workspace.files_changed.unwrap_or_default(),
        1
    );
    let after = du(&cache);
    assert_eq!(before, after, "the cache grew by {} bytes", after - before);
    let work = c.root().join("cache/work");
    assert_eq!(du(&work), 0, "the attempt folder is gone");
}

/// Every file under `dir`, recursively.
fn files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    if let Ok(rd) = fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(files(&p));
            } else {
                out.push(p);
            }
        }
    }
    out
}

#[test]
fn a_credential_written_into_source_is_in_nothing_stored() {
    let c = corpus();
    let secret = "sk-escape-test-credential-9f3b2a";
    let name = "AKBENCH_ESCAPE_TEST_KEY";
    std::env::set_var(name, secret);
    // The agent writes the credential into source, a new file, its logs and a commit message.
    c.add_agent(
        "leaker",
        &format!("adapter = \"scripted\"\nscript = \"leaker.sh\"\ncredentials = [\"{name}\"]\n"),
        Some(
            "echo \"$AKBENCH_ESCAPE_TEST_KEY\" > value.txt\n\
             printf 'KEY = \"%s\"\\n' \"$AKBENCH_ESCAPE_TEST_KEY\" > settings.py\n\
             echo \"using $AKBENCH_ESCAPE_TEST_KEY\"; echo \"$AKBENCH_ESCAPE_TEST_KEY\" >&2\n\
             git add -A && git -c user.name=a -c user.email=a@a commit -qm \"key $AKBENCH_ESCAPE_TEST_KEY\"\n"
        ),
    );
    // Tests that print the workspace's files and put them in their report.
    c.add_task(
        "echoing",
        &c.commit,
        r#"cd "$AKBENCH_WORKSPACE"
cat value.txt settings.py
echo "stderr: $(cat value.txt)" >&2
v=$(cat value.txt)
echo 0 > "$AKBENCH_VERIFIER_DIR/reward.txt"
echo "<testsuite><testcase name=\"answer\"><failure message=\"got $v\">value was $v</failure></testcase></testsuite>" > "$AKBENCH_VERIFIER_DIR/junit.xml"
"#,
        "",
    );
    let rec = run(&c, "echoing", "leaker", "leaker");
    assert_eq!(rec.outcome.state, State::Completed, "{:?}", rec.outcome);
    let a = &rec.attempts[0];
    assert_eq!(a.redacted, vec![name.to_string()], "the record flags it");
    let out = c.root().join("out/leaker");
    let all = files(&out);
    assert!(all.len() >= 6, "{all:?}");
    let mut markers = 0;
    for f in &all {
        let bytes = fs::read(f).unwrap();
        let text = String::from_utf8_lossy(&bytes);
        assert!(
            !text.contains(secret),
            "{} holds the credential",
            f.display()
        );
        markers += usize::from(text.contains(&format!("[REDACTED:{name}]")));
    }
    // Agent stdout, stderr, diff, evaluator stdout, stderr, junit, record: each shows it.
    assert!(markers >= 5, "{markers} files show the marker");
    let diff = fs::read(out.join("a1/agent.diff")).unwrap();
    assert_eq!(
        a.workspace.diff_digest.as_deref(),
        Some(akbench_core::digest::digest_bytes(&diff).as_str()),
        "the digest is the stored diff's"
    );
    let json = serde_json::to_string(&rec).unwrap();
    assert!(!json.contains(secret));
    assert!(json.contains("\"redacted\""));
    // Nothing left in the cache either.
    for f in files(&c.root().join("cache")) {
        let bytes = fs::read(&f).unwrap_or_default();
        assert!(
            !String::from_utf8_lossy(&bytes).contains(secret),
            "{} holds the credential",
            f.display()
        );
    }
}

/// Every other test of this file again, with the worker process as an unprivileged user
/// (common::unprivileged).
#[test]
fn the_workspace_escape_suite_holds_with_an_unprivileged_worker() {
    common::unprivileged::rerun_suite(
        "the_workspace_escape_suite_holds_with_an_unprivileged_worker",
        &[],
    );
}

/// Every other test of this file again under the `container` runtime: each task in the
/// Debian test image, each attack against the container's root file system
/// (common::in_container).
#[test]
fn the_workspace_escape_suite_holds_in_a_container() {
    common::in_container::rerun_suite("the_workspace_escape_suite_holds_in_a_container", &[]);
}
