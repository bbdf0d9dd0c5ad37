//! A credential written into source by an agent run through the worker daemon against a real
//! coordinator (private PostgreSQL): nothing stored holds it: not the artifact store, not the
//! local output folder, not a `pg_dump` of the coordinator's database.

mod common;
mod coord;

use common::corpus;
use coord::{config, spawn, work_items, Coord};
use std::path::{Path, PathBuf};
use std::time::Duration;

fn pg_dump() -> Option<PathBuf> {
    let mut candidates: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join("pg_dump"))
                .collect()
        })
        .unwrap_or_default();
    if let Ok(rd) = std::fs::read_dir("/usr/lib/postgresql") {
        let mut versions: Vec<PathBuf> = rd.flatten().map(|e| e.path()).collect();
        versions.sort();
        candidates.extend(versions.into_iter().rev().map(|v| v.join("bin/pg_dump")));
    }
    candidates.into_iter().find(|p| p.is_file())
}

fn grep_tree(dir: &Path, needle: &str) -> Vec<PathBuf> {
    let mut hits = Vec::new();
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                hits.extend(grep_tree(&p, needle));
            } else if String::from_utf8_lossy(&std::fs::read(&p).unwrap_or_default())
                .contains(needle)
            {
                hits.push(p);
            }
        }
    }
    hits
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_credential_in_source_reaches_no_store_and_no_database() {
    let Some(pg_dump) = pg_dump() else {
        return akbench_core::testkit::skip(
            "a_credential_in_source_reaches_no_store_and_no_database",
            "pg_dump is not installed (apt-get install postgresql-client)",
        );
    };
    let secret = "sk-daemon-escape-credential-71c0de";
    let name = "AKBENCH_ESCAPE_DB_KEY";
    std::env::set_var(name, secret);
    let coord = Coord::start(Duration::from_secs(10)).await;
    let c = corpus();
    c.add_agent(
        "leaker",
        &format!("adapter = \"scripted\"\nscript = \"leaker.sh\"\ncredentials = [\"{name}\"]\n"),
        Some(&format!(
            "echo \"${name}\" > value.txt\necho \"token ${name}\"\necho \"${name}\" >&2\n\
             # The same credential encoded: base64 (inside a longer blob, and URL-safe), hex,\n\
             # reversed; in the diff, the logs and the tests' report.\n\
             {{ printf 'xx%s' \"${name}\" | base64 -w0; echo; printf %s \"${name}\" | base64 -w0 | tr '+/' '-_'; echo;\n\
             printf %s \"${name}\" | od -An -tx1 | tr -d ' \\n'; echo; printf %s \"${name}\" | rev; echo; }} > encoded.txt\n\
             cat encoded.txt; cat encoded.txt >&2\n"
        )),
    );
    // Tests that put what they read into their report (and so into the grade).
    std::fs::write(
        c.tasks().join("answer/tests/test.sh"),
        r#"cd "$AKBENCH_WORKSPACE"
v=$(cat value.txt)
echo "read $v"
cat encoded.txt
echo 0 > "$AKBENCH_VERIFIER_DIR/reward.txt"
echo "<testsuite><testcase name=\"answer\"><failure message=\"got $v\">value was $v</failure></testcase></testsuite>" > "$AKBENCH_VERIFIER_DIR/junit.xml"
"#,
    )
    .unwrap();
    let items = work_items(&c, "leaker", 1, true);
    let (_, trials) = coord.enqueue_items(&items).await;
    let mut cfg = config(&c, &coord, "w-secrets", 1);
    let store = c.root().join("artifact-store");
    cfg.artifacts = Some(store.display().to_string());
    let (h, run) = spawn(cfg);
    let a = coord
        .wait_attempt(trials[0], "the attempt to finish", |a| a.terminal.is_some())
        .await;
    assert_eq!(a.terminal.as_deref(), Some("completed"), "{a:?}");
    let (record, _, _) =
        coord::eventually(30, "the record", || async { coord.record(a.id).await }).await;
    assert_eq!(record.redacted, vec![name.to_string()]);
    h.wait_for(|s| s.held.is_empty() && s.running == 0).await;
    coord.service.drain_all("test over");
    run.await.unwrap();

    let stored = grep_tree(&store, &format!("[REDACTED:{name}]"));
    assert!(
        stored.len() >= 3,
        "logs and diff are stored, scrubbed: {stored:?}"
    );
    assert_eq!(grep_tree(&store, secret), Vec::<PathBuf>::new());
    assert_eq!(
        grep_tree(&c.root().join("out"), secret),
        Vec::<PathBuf>::new()
    );
    let dump = std::process::Command::new(&pg_dump)
        .arg("--no-owner")
        .arg("-d")
        .arg(&coord.db_url)
        .output()
        .unwrap();
    assert!(
        dump.status.success(),
        "pg_dump: {}",
        String::from_utf8_lossy(&dump.stderr)
    );
    let text = String::from_utf8_lossy(&dump.stdout);
    assert!(text.contains(&a.id.to_string()), "the dump holds the run");
    assert!(
        text.contains(&format!("got [REDACTED:{name}]")),
        "and the scrubbed grade"
    );
    assert!(!text.contains(secret), "the database holds the credential");
    // Encoded, too: no stored file, record or database row holds any form of it.
    assert!(
        !grep_tree(&store, "b/encoded.txt").is_empty(),
        "the encoded forms were in the agent's diff"
    );
    let forms = akbench_core::redact::encoded_forms(secret);
    assert!(forms.len() >= 5, "{forms:?}");
    for form in &forms {
        assert_eq!(grep_tree(&store, form), Vec::<PathBuf>::new(), "{form}");
        assert_eq!(
            grep_tree(&c.root().join("out"), form),
            Vec::<PathBuf>::new(),
            "{form}"
        );
        assert!(!text.contains(form.as_str()), "the database holds {form}");
    }
}
