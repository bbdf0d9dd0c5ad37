//! Typed rows ([`akbench_coordinator::rows`]): the coordinator reads every row by column name,
//! and a bad row is an error naming the query and the column, never a default. A guard keeps
//! positional reads (`row.get(0)`, `row.try_get(1)`) out of `coordinator/src`; table tests
//! decode malformed rows that a real PostgreSQL returns; a corrupt stored row refuses a claim
//! and changes nothing.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use akbench_coordinator::rows::{self, col, count, count32, count_opt, json, parsed, RowError};
use akbench_coordinator::scheduler::{Caps, SchedulerError};
use akbench_coordinator::store::StoreError;
use akbench_core::dispatch::RunCaps;
use akbench_core::lifecycle::State;
use common::{counts, enqueued, scheduler};
use tokio_postgres::Row;

/// Where `text` reads a column by position: `get(<integer>)` or `try_get(<integer>)`, with
/// or without a turbofish. Returns the byte offsets of the calls.
fn positional_reads(text: &str) -> Vec<usize> {
    let mut found = Vec::new();
    for needle in [".get(", ".try_get(", ".get::<", ".try_get::<"] {
        let mut from = 0;
        while let Some(at) = text[from..].find(needle) {
            let start = from + at;
            let mut rest = &text[start + needle.len()..];
            if needle.ends_with('<') {
                // Skip the turbofish's type arguments up to the call's parenthesis.
                let mut depth = 1;
                let mut end = None;
                for (i, c) in rest.char_indices() {
                    match c {
                        '<' => depth += 1,
                        '>' => {
                            depth -= 1;
                            if depth == 0 {
                                end = Some(i);
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                rest = match end.map(|e| &rest[e + 1..]) {
                    Some(r) if r.starts_with('(') => &r[1..],
                    _ => "",
                };
            }
            let arg = rest.trim_start();
            let digits = arg.chars().take_while(char::is_ascii_digit).count();
            if digits > 0 && arg[digits..].trim_start().starts_with(')') {
                found.push(start);
            }
            from = start + needle.len();
        }
    }
    found.sort_unstable();
    found
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("reads coordinator/src") {
        let path = entry.expect("lists coordinator/src").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn the_guard_finds_positional_reads() {
    let cases: &[(&str, usize)] = &[
        ("let a: Uuid = row.get(0);", 1),
        ("r.try_get(12)?", 1),
        ("r.get::<_, Option<i64>>(7)", 1),
        ("r.try_get::<_, Vec<Option<String>>>( 3 )", 1),
        ("r.get( 1 ) + r.get(2)", 2),
        ("col(r, \"n\")?", 0),
        ("r.try_get(\"run_id\")", 0),
        ("v.get(i)", 0),
        ("m.get(&key)", 0),
        ("s.get(1..)", 0),
        ("r.get::<_, i64>(\"n\")", 0),
    ];
    for (text, want) in cases {
        assert_eq!(positional_reads(text).len(), *want, "{text}");
    }
}

#[test]
fn no_positional_row_reads_in_coordinator_src() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    assert!(
        files.len() > 20,
        "found the sources ({} files)",
        files.len()
    );
    let mut offenders = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("reads a source file");
        for at in positional_reads(&text) {
            let line = text[..at].lines().count().max(1);
            let shown = text.lines().nth(line - 1).unwrap_or("").trim();
            offenders.push(format!("{}:{line}: {shown}", file.display()));
        }
    }
    assert!(
        offenders.is_empty(),
        "positional row reads in coordinator/src (read columns by name with \
         akbench_coordinator::rows::col and friends; a slice's first item is `.first()`):\n{}",
        offenders.join("\n")
    );
}

/// One row of `sql` from a real PostgreSQL.
async fn one_row(client: &tokio_postgres::Client, sql: &str) -> Row {
    client.query_one(sql, &[]).await.expect("the query runs")
}

type Decode = fn(&Row) -> Result<String, RowError>;

#[tokio::test]
async fn malformed_rows_are_errors_naming_the_query_and_column() {
    let s = scheduler().await;
    let client = s.store().client().await.expect("connects");
    // (what, SQL of one row, decoder, Ok(decoded) or Err(text the error must contain))
    let cases: Vec<(&str, &str, Decode, Result<&str, &str>)> = vec![
        (
            "a value",
            "SELECT 'ab'::text AS name",
            |r| col::<String>(r, "name"),
            Ok("ab"),
        ),
        (
            "NULL where none belongs",
            "SELECT NULL::text AS name",
            |r| col::<String>(r, "name"),
            Err("column `name`"),
        ),
        (
            "NULL into an Option",
            "SELECT NULL::text AS name",
            |r| col::<Option<String>>(r, "name").map(|v| format!("{v:?}")),
            Ok("None"),
        ),
        (
            "a missing column",
            "SELECT 1::bigint AS other",
            |r| count(r, "n").map(|n| n.to_string()),
            Err("column `n`"),
        ),
        (
            "a column of another type",
            "SELECT 'x'::text AS n",
            |r| count(r, "n").map(|n| n.to_string()),
            Err("column `n`"),
        ),
        (
            "a negative count",
            "SELECT (-1)::bigint AS n",
            |r| count(r, "n").map(|n| n.to_string()),
            Err("-1 is not a count"),
        ),
        (
            "a negative seq",
            "SELECT (-3)::integer AS last_seq",
            |r| count32(r, "last_seq").map(|n| n.to_string()),
            Err("column `last_seq`: -3 is not a count"),
        ),
        (
            "a NULL token count",
            "SELECT NULL::bigint AS input_tokens",
            |r| count_opt(r, "input_tokens").map(|n| format!("{n:?}")),
            Ok("None"),
        ),
        (
            "a negative token count",
            "SELECT (-5)::bigint AS input_tokens",
            |r| count_opt(r, "input_tokens").map(|n| format!("{n:?}")),
            Err("-5 is not a count"),
        ),
        (
            "a known state",
            "SELECT 'executing'::text AS state",
            |r| parsed(r, "state", State::parse).map(|s| s.to_string()),
            Ok("executing"),
        ),
        (
            "an unknown state",
            "SELECT 'sleeping'::text AS state",
            |r| parsed(r, "state", State::parse).map(|s| s.to_string()),
            Err("column `state`: `sleeping` is not a known value"),
        ),
        (
            "caps that decode",
            "SELECT '{\"max_trials\": 2}'::jsonb AS caps",
            |r| json::<Caps>(r, "caps").map(|c| format!("{:?}", c.limits.max_trials)),
            Ok("Some(2)"),
        ),
        (
            "caps that do not decode",
            "SELECT '{\"max_trials\": \"many\"}'::jsonb AS caps",
            |r| json::<Caps>(r, "caps").map(|c| format!("{c:?}")),
            Err("column `caps`: invalid type: string \"many\""),
        ),
    ];
    for (what, sql, decode, want) in cases {
        let row = one_row(&client, sql).await;
        let got = rows::one("case.sql", &row, decode).map_err(|e| e.to_string());
        match (want, got) {
            (Ok(want), Ok(got)) => assert_eq!(got, want, "{what}"),
            (Err(want), Err(got)) => {
                assert!(got.contains(want), "{what}: {got:?} lacks {want:?}");
                assert!(
                    got.starts_with("failed to decode a row of `case.sql`: "),
                    "{what}: {got:?} names the query"
                );
            }
            (want, got) => panic!("{what}: wanted {want:?}, got {got:?}"),
        }
    }
    // Over many rows, the first bad one is the error, naming the query.
    let rows_ = client
        .query(
            "SELECT n::bigint AS n FROM (VALUES (1), (2), (-1), (-2)) v (n)",
            &[],
        )
        .await
        .unwrap();
    let err = rows::all("many.sql", &rows_, |r| count(r, "n")).unwrap_err();
    assert_eq!(
        err.to_string(),
        "failed to decode a row of `many.sql`: failed to decode column `n`: -1 is not a count"
    );
}

#[tokio::test]
async fn a_claim_refuses_caps_that_do_not_decode_and_changes_nothing() {
    let s = scheduler().await;
    let caps = Caps {
        limits: RunCaps {
            max_trials: Some(1),
            ..RunCaps::default()
        },
        ..Caps::default()
    };
    let run = enqueued(&s, 3, 0, &caps).await;
    s.register_worker("w1", 4, &Default::default(), "test")
        .await
        .unwrap();
    // Damaged stored caps (the database was altered): read as "no caps" they would let the
    // claim lease all three trials past the run's cap of one.
    s.store()
        .client()
        .await
        .unwrap()
        .execute(
            "UPDATE runs SET caps = '{\"max_trials\": \"many\"}' WHERE run_id = $1",
            &[&run.run_id],
        )
        .await
        .unwrap();
    let before = counts(&s).await;
    let err = s
        .claim("w1", 3, Duration::from_secs(30))
        .await
        .expect_err("a claim over damaged caps is refused");
    assert!(
        matches!(err, SchedulerError::Store(StoreError::BadRow(_))),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(
        text.contains("`claim_contenders.sql`") && text.contains("column `caps`"),
        "{text}"
    );
    assert_eq!(counts(&s).await, before, "a refused claim changes nothing");

    // Repaired, the cap holds again.
    s.store()
        .client()
        .await
        .unwrap()
        .execute(
            "UPDATE runs SET caps = '{\"max_trials\": 1}' WHERE run_id = $1",
            &[&run.run_id],
        )
        .await
        .unwrap();
    let got = s.claim("w1", 3, Duration::from_secs(30)).await.unwrap();
    assert_eq!(got.len(), 1);
}
