//! Every statement that writes the `state` of a run or a work item is a guarded apply of a
//! transition core decided (`akbench_core::dispatch::machine`), or the insert of a fresh row.
//!
//! The checker reads every `.sql` file under `coordinator/sql/` and every string literal of
//! the Rust under `coordinator/src/` and `ctl/src/` (test code left out: items behind
//! `#[cfg(test)]`, files named `tests.rs`, folders named `tests`, and the files compiled for
//! tests only, [`TEST_ONLY`]), with `--` comments blanked. In that text it finds each
//! `UPDATE runs` / `UPDATE work_items` whose `SET` assigns `state`, and each
//! `INSERT INTO runs` / `INSERT INTO work_items`. An update passes when
//! - the state it sets is decided in Rust: a parameter (`$4::text::item_state`) or a column of
//!   the rows it joins (`m.to_state`, an `unnest` of parameters), never a literal; and
//! - its `WHERE` pins the row's state to the one the move was decided on: `state = $N`,
//!   `state = ANY ($N)`, or `w.state = m.from_state` (the row's own state, unqualified or
//!   through the statement's alias, equal to a parameter or to a joined column).
//!
//! An insert passes when it makes a fresh row (no `ON CONFLICT … DO UPDATE`).
//!
//! Every statement found must be listed in [`APPLIES`] with the core decision it applies; an
//! unlisted statement, an entry no statement matches, a decision core does not have, or a
//! statement that fails the checks fails the test naming the file and line.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// What a statement writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Writes {
    UpdateRuns,
    UpdateItems,
    InsertRuns,
    InsertItems,
}

/// The decision a statement applies.
enum Decision {
    /// A function of `akbench_core::dispatch::machine` (by name) over these events (variants
    /// of its `RunEvent` or `ItemEvent`).
    Core {
        function: &'static str,
        events: &'static [&'static str],
    },
    /// A new row in its first state (the column's default, or the state it names).
    Fresh { first: &'static str },
}

/// One listed statement: the file it is in (from the workspace root), what it writes and the
/// decision it applies.
struct Apply {
    file: &'static str,
    writes: Writes,
    decision: Decision,
}

/// Every statement that writes a run's or an item's state, with what decides it.
const APPLIES: &[Apply] = &[
    Apply {
        file: "coordinator/sql/scheduler/start_run.sql",
        writes: Writes::UpdateRuns,
        decision: Decision::Core {
            function: "run_on",
            events: &["RunEvent::Start"],
        },
    },
    Apply {
        // `scheduler::machine::decide_run` with `apply`: the cancel, the resume and the
        // grade's reopen.
        file: "coordinator/sql/scheduler/move_run.sql",
        writes: Writes::UpdateRuns,
        decision: Decision::Core {
            function: "run_on",
            events: &["RunEvent::Cancel", "RunEvent::Resume", "RunEvent::Grade"],
        },
    },
    Apply {
        file: "coordinator/sql/scheduler/end_runs.sql",
        writes: Writes::UpdateRuns,
        decision: Decision::Core {
            function: "run_on",
            events: &["RunEvent::Idle"],
        },
    },
    Apply {
        file: "coordinator/sql/scheduler/claim_create.sql",
        writes: Writes::UpdateItems,
        decision: Decision::Core {
            function: "live_move",
            events: &["ItemEvent::Claim"],
        },
    },
    Apply {
        file: "coordinator/sql/scheduler/requeue_revoked.sql",
        writes: Writes::UpdateItems,
        decision: Decision::Core {
            function: "live_move",
            events: &["ItemEvent::Revoke"],
        },
    },
    Apply {
        // `scheduler::apply` over `dispatch::settle`'s retried-or-done.
        file: "coordinator/sql/scheduler/apply_effects.sql",
        writes: Writes::UpdateItems,
        decision: Decision::Core {
            function: "item_on",
            events: &["ItemEvent::Settle"],
        },
    },
    Apply {
        file: "coordinator/sql/scheduler/cancel_run.sql",
        writes: Writes::UpdateItems,
        decision: Decision::Core {
            function: "item_moves",
            events: &["ItemEvent::Cancel"],
        },
    },
    Apply {
        file: "coordinator/sql/scheduler/budget_cancel.sql",
        writes: Writes::UpdateItems,
        decision: Decision::Core {
            function: "item_moves",
            events: &["ItemEvent::BudgetStop"],
        },
    },
    Apply {
        file: "coordinator/sql/scheduler/resume_items.sql",
        writes: Writes::UpdateItems,
        decision: Decision::Core {
            function: "item_moves",
            events: &["ItemEvent::Resume"],
        },
    },
    Apply {
        file: "coordinator/sql/grading/requeue.sql",
        writes: Writes::UpdateItems,
        decision: Decision::Core {
            function: "item_moves",
            events: &["ItemEvent::GradeRequeue"],
        },
    },
    Apply {
        // The submit: the run row with its plan, `planned` by the column's default.
        file: "coordinator/sql/control/insert_plan_headers.sql",
        writes: Writes::InsertRuns,
        decision: Decision::Fresh { first: "planned" },
    },
    Apply {
        // The start's items, `ready` by the column's default.
        file: "coordinator/sql/scheduler/start_items.sql",
        writes: Writes::InsertItems,
        decision: Decision::Fresh { first: "ready" },
    },
    Apply {
        // Items enqueued by `Scheduler::enqueue`, `ready` by the column's default.
        file: "coordinator/sql/scheduler/enqueue.sql",
        writes: Writes::InsertItems,
        decision: Decision::Fresh { first: "ready" },
    },
];

/// Files compiled for tests only (`#[cfg(any(test, feature = "test-support"))]`): they put
/// rows in the states a test starts from, and decide nothing for the coordinator.
const TEST_ONLY: &[&str] = &["coordinator/src/scheduler/test_support.rs"];

/// A token of SQL: a lower-cased word (`$3` and numbers too), a quoted literal (`'x'`), `::`
/// or one punctuation, with its line.
#[derive(Debug, Clone, PartialEq)]
struct Tok {
    text: String,
    line: usize,
}

/// The tokens of SQL `text` whose first line is `line`; `--` comments are left out, and so is
/// a backslash (a Rust string's line continuation).
fn sql_tokens(text: &str, mut line: usize) -> Vec<Tok> {
    let c: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < c.len() {
        let ch = c[i];
        if ch == '\n' {
            line += 1;
            i += 1;
        } else if ch.is_whitespace() || ch == '\\' {
            i += 1;
        } else if ch == '-' && c.get(i + 1) == Some(&'-') {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if ch == '\'' {
            let start = i;
            i += 1;
            while i < c.len() && c[i] != '\'' {
                if c[i] == '\n' {
                    line += 1;
                }
                i += 1;
            }
            i += 1;
            out.push(Tok {
                text: c[start..i.min(c.len())].iter().collect(),
                line,
            });
        } else if ch.is_alphanumeric() || ch == '_' || ch == '$' {
            let start = i;
            i += 1;
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            out.push(Tok {
                text: c[start..i].iter().collect::<String>().to_lowercase(),
                line,
            });
        } else if ch == ':' && c.get(i + 1) == Some(&':') {
            out.push(Tok {
                text: "::".into(),
                line,
            });
            i += 2;
        } else {
            out.push(Tok {
                text: ch.to_string(),
                line,
            });
            i += 1;
        }
    }
    out
}

/// One statement found: what it writes, its first line, and why it is not a guarded apply
/// (`None`: it is one).
#[derive(Debug, Clone, PartialEq)]
struct Found {
    writes: Writes,
    line: usize,
    problem: Option<String>,
}

fn is_word(t: &str) -> bool {
    t.chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_')
}

/// The end of the statement starting at `start`: the closing parenthesis of the CTE it is in,
/// a `;`, or the end.
fn statement_end(toks: &[Tok], start: usize) -> usize {
    let mut depth = 0i32;
    for (k, t) in toks.iter().enumerate().skip(start) {
        match t.text.as_str() {
            "(" => depth += 1,
            ")" if depth == 0 => return k,
            ")" => depth -= 1,
            ";" if depth == 0 => return k,
            _ => {}
        }
    }
    toks.len()
}

/// Whether `toks` (a value) is decided in Rust: a parameter with its casts, or a column of a
/// joined row (`m.to_state`); never a literal.
fn decided(toks: &[Tok]) -> bool {
    let text: Vec<&str> = toks
        .iter()
        .map(|t| t.text.as_str())
        .filter(|t| !matches!(*t, "[" | "]"))
        .collect();
    let param = text.first().is_some_and(|t| t.starts_with('$'))
        && text[1..]
            .chunks(2)
            .all(|c| c[0] == "::" && c.get(1).is_some_and(|t| is_word(t)));
    let column = text.len() == 3 && is_word(text[0]) && text[1] == "." && is_word(text[2]);
    param || column
}

/// The split of `toks` at the commas outside parentheses.
fn top_level_commas(toks: &[Tok]) -> Vec<&[Tok]> {
    let (mut out, mut depth, mut from) = (Vec::new(), 0i32, 0);
    for (k, t) in toks.iter().enumerate() {
        match t.text.as_str() {
            "(" => depth += 1,
            ")" => depth -= 1,
            "," if depth == 0 => {
                out.push(&toks[from..k]);
                from = k + 1;
            }
            _ => {}
        }
    }
    out.push(&toks[from..]);
    out
}

/// The index of the first token of `toks` outside parentheses that `is` holds for.
fn depth_zero(toks: &[Tok], is: impl Fn(&str) -> bool) -> Option<usize> {
    let mut depth = 0i32;
    for (k, t) in toks.iter().enumerate() {
        match t.text.as_str() {
            "(" => depth += 1,
            ")" => depth -= 1,
            w if depth == 0 && is(w) => return Some(k),
            _ => {}
        }
    }
    None
}

/// Whether one pair of parentheses wraps all of `toks`: the first opens it and closes only at
/// the last.
fn wrapped(toks: &[Tok]) -> bool {
    let mut depth = 0i32;
    toks.len() >= 2
        && toks[0].text == "("
        && toks[toks.len() - 1].text == ")"
        && toks[..toks.len() - 1].iter().all(|t| {
            match t.text.as_str() {
                "(" => depth += 1,
                ")" => depth -= 1,
                _ => {}
            }
            depth > 0
        })
}

/// `toks` without parentheses wrapping all of it (`((a AND b))` is `a AND b`).
fn unwrapped(mut toks: &[Tok]) -> &[Tok] {
    while wrapped(toks) {
        toks = &toks[1..toks.len() - 1];
    }
    toks
}

/// Whether the condition `cond` pins the row's own state (`state`, `alias.state` or
/// `table.state`) to a state decided in Rust: one of its top-level conjuncts is
/// `state = $N`, `state = ANY ($N)` or `state = joined.column`. A pin under an `OR` or a
/// `NOT`, or inside a function, holds for no row in particular (`state = $2 OR true` writes
/// every row) and is not one.
fn pins_state(cond: &[Tok], alias: Option<&str>, table: &str) -> bool {
    let cond = unwrapped(cond);
    if depth_zero(cond, |t| t == "or").is_some() {
        return false;
    }
    // The conjuncts: split at each top-level AND (a BETWEEN's AND is its own).
    let mut parts = Vec::new();
    let (mut from, mut depth, mut between) = (0, 0i32, false);
    for (k, t) in cond.iter().enumerate() {
        match t.text.as_str() {
            "(" => depth += 1,
            ")" => depth -= 1,
            "between" if depth == 0 => between = true,
            "and" if depth == 0 && between => between = false,
            "and" if depth == 0 => {
                parts.push(&cond[from..k]);
                from = k + 1;
            }
            _ => {}
        }
    }
    parts.push(&cond[from..]);
    if parts.len() > 1 {
        return parts.iter().any(|p| pins_state(p, alias, table));
    }
    // One conjunct: `[q.]state = value`, q the statement's alias or table.
    let (column, rest) = match cond {
        [q, dot, s, rest @ ..] if dot.text == "." && s.text == "state" => {
            (Some(q.text.as_str()) == alias || q.text == table, rest)
        }
        [s, rest @ ..] if s.text == "state" => (true, rest),
        _ => return false,
    };
    let Some(("=", value)) = rest.split_first().map(|(e, v)| (e.text.as_str(), v)) else {
        return false;
    };
    let any = value.len() > 3
        && value[0].text == "any"
        && value[1].text == "("
        && value[value.len() - 1].text == ")"
        && decided(&value[2..value.len() - 1]);
    column && (decided(value) || any)
}

/// Why the update `toks` (from `UPDATE` to its end) is not a guarded apply, or `None` when it
/// does not assign `state` at all (`Some(None)`: it is one).
fn check_update(toks: &[Tok], table: &str) -> Option<Option<String>> {
    let alias = toks
        .get(2)
        .filter(|t| is_word(&t.text) && t.text != "set")
        .map(|t| {
            if t.text == "as" {
                toks[3].text.clone()
            } else {
                t.text.clone()
            }
        });
    let set = toks.iter().position(|t| t.text == "set")?;
    let mut depth = 0i32;
    let mut set_end = toks.len();
    for (k, t) in toks.iter().enumerate().skip(set + 1) {
        match t.text.as_str() {
            "(" => depth += 1,
            ")" => depth -= 1,
            "from" | "where" | "returning" if depth == 0 => {
                set_end = k;
                break;
            }
            _ => {}
        }
    }
    let assigned: Vec<&[Tok]> = top_level_commas(&toks[set + 1..set_end])
        .into_iter()
        .filter(|a| a.len() > 2 && a[0].text == "state" && a[1].text == "=")
        .map(|a| &a[2..])
        .collect();
    let value = assigned.first()?;
    if !decided(value) {
        let v: Vec<&str> = value.iter().map(|t| t.text.as_str()).collect();
        return Some(Some(format!(
            "sets state = {}, not a state decided in Rust (a parameter or a joined column)",
            v.join("")
        )));
    }
    let Some(w) = toks[set_end..].iter().position(|t| t.text == "where") else {
        return Some(Some(
            "writes state with no WHERE: nothing pins the state it was decided on".into(),
        ));
    };
    let guard = &toks[set_end + w + 1..];
    let guard = &guard[..depth_zero(guard, |t| t == "returning").unwrap_or(guard.len())];
    if pins_state(guard, alias.as_deref(), table) {
        return Some(None);
    }
    Some(Some(
        "writes state, but its WHERE does not pin the row's state to the one the move was \
         decided on (`state = $N`, `state = ANY ($N)` or `alias.state = joined.from_state`)"
            .into(),
    ))
}

/// The statements of SQL `text` (first line `line`) that write a run's or an item's state.
fn statements(text: &str, line: usize) -> Vec<Found> {
    let toks = sql_tokens(text, line);
    let mut out = Vec::new();
    for i in 0..toks.len() {
        let at = |k: usize| toks.get(i + k).map(|t| t.text.as_str());
        let (writes, table) = match (at(0), at(1), at(2)) {
            (Some("update"), Some("runs"), _) => (Writes::UpdateRuns, "runs"),
            (Some("update"), Some("work_items"), _) => (Writes::UpdateItems, "work_items"),
            (Some("insert"), Some("into"), Some("runs")) => (Writes::InsertRuns, "runs"),
            (Some("insert"), Some("into"), Some("work_items")) => {
                (Writes::InsertItems, "work_items")
            }
            _ => continue,
        };
        let end = statement_end(&toks, i + 1);
        let stmt = &toks[i..end];
        let problem = if matches!(writes, Writes::UpdateRuns | Writes::UpdateItems) {
            match check_update(stmt, table) {
                None => continue,
                Some(p) => p,
            }
        } else {
            let words: Vec<&str> = stmt.iter().map(|t| t.text.as_str()).collect();
            let upsert = words.windows(2).any(|w| w == ["on", "conflict"])
                && words.windows(2).any(|w| w == ["do", "update"]);
            upsert.then(|| {
                "an upsert (ON CONFLICT … DO UPDATE) may rewrite the state of a row that \
                 exists: insert fresh rows only, and move states with a guarded update"
                    .to_string()
            })
        };
        out.push(Found {
            writes,
            line: toks[i].line,
            problem,
        });
    }
    out
}

/// The string literals of Rust `text` outside `#[cfg(test)]` items, each with its first
/// line; a raw string's content as written, an ordinary one's with its escapes left in.
fn rust_strings(text: &str) -> Vec<(String, usize)> {
    let c: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let (mut i, mut line) = (0, 1);
    // Brace depth, and the depth at which a `#[cfg(test)]` item's block ends (while skipping).
    let mut depth = 0i32;
    let mut pending_test = false;
    let mut skip_until: Option<i32> = None;
    while i < c.len() {
        let ch = c[i];
        let next = c.get(i + 1).copied();
        if ch == '\n' {
            line += 1;
            i += 1;
        } else if ch == '/' && next == Some('/') {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if ch == '/' && next == Some('*') {
            i += 2;
            while i < c.len() && !(c[i] == '*' && c.get(i + 1) == Some(&'/')) {
                if c[i] == '\n' {
                    line += 1;
                }
                i += 1;
            }
            i += 2;
        } else if ch == '#' && c[i..].starts_with(&"#[cfg(test)]".chars().collect::<Vec<_>>()) {
            pending_test = true;
            i += "#[cfg(test)]".len();
        } else if ch == ';' && pending_test && skip_until.is_none() {
            // A `#[cfg(test)]` item without a block (`use …;`, `mod tests;`).
            pending_test = false;
            i += 1;
        } else if ch == '{' {
            if pending_test && skip_until.is_none() {
                skip_until = Some(depth);
                pending_test = false;
            }
            depth += 1;
            i += 1;
        } else if ch == '}' {
            depth -= 1;
            if skip_until == Some(depth) {
                skip_until = None;
            }
            i += 1;
        } else if (ch == 'r'
            && matches!(next, Some('"') | Some('#'))
            && (i == 0 || !(c[i - 1].is_alphanumeric() || c[i - 1] == '_')))
            || ch == '"'
        {
            let raw = ch == 'r';
            let mut hashes = 0;
            if raw {
                i += 1;
                while c.get(i) == Some(&'#') {
                    hashes += 1;
                    i += 1;
                }
                if c.get(i) != Some(&'"') {
                    continue;
                }
            }
            i += 1;
            let (start, first) = (i, line);
            loop {
                match c.get(i) {
                    None => break,
                    Some('\\') if !raw => {
                        if c.get(i + 1) == Some(&'\n') {
                            line += 1;
                        }
                        i += 2;
                    }
                    Some('"') if (0..hashes).all(|k| c.get(i + 1 + k) == Some(&'#')) => break,
                    Some(ch) => {
                        if *ch == '\n' {
                            line += 1;
                        }
                        i += 1;
                    }
                }
            }
            if skip_until.is_none() {
                out.push((c[start..i.min(c.len())].iter().collect(), first));
            }
            i += 1 + hashes;
        } else if ch == '\'' && next == Some('\\') {
            i += 2;
            while i < c.len() && c[i] != '\'' {
                i += 1;
            }
            i += 1;
        } else if ch == '\'' && c.get(i + 2) == Some(&'\'') {
            i += 3;
        } else {
            i += 1;
        }
    }
    out
}

fn files(dir: &Path, ext: &str, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        let name = e.file_name().to_string_lossy().into_owned();
        if p.is_dir() {
            if name != "tests" {
                files(&p, ext, out);
            }
        } else if p.extension().is_some_and(|x| x == ext) && name != "tests.rs" {
            out.push(p);
        }
    }
}

/// Every statement of the workspace that writes a run's or an item's state: its file (from
/// the workspace root) and what was found.
fn found_in_workspace() -> Vec<(String, Found)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let rel = |p: &Path| p.strip_prefix(root).unwrap().display().to_string();
    let mut out = Vec::new();
    let mut sql = Vec::new();
    files(&root.join("coordinator/sql"), "sql", &mut sql);
    sql.sort();
    assert!(sql.len() > 50, "found the coordinator's SQL: {}", sql.len());
    for f in &sql {
        let text = std::fs::read_to_string(f).unwrap();
        out.extend(statements(&text, 1).into_iter().map(|s| (rel(f), s)));
    }
    let mut rs = Vec::new();
    files(&root.join("coordinator/src"), "rs", &mut rs);
    files(&root.join("ctl/src"), "rs", &mut rs);
    rs.sort();
    assert!(rs.len() > 100, "found the Rust sources: {}", rs.len());
    for f in &rs {
        if TEST_ONLY.contains(&rel(f).as_str()) {
            continue;
        }
        let text = std::fs::read_to_string(f).unwrap();
        for (s, line) in rust_strings(&text) {
            out.extend(statements(&s, line).into_iter().map(|s| (rel(f), s)));
        }
    }
    out
}

/// Whether core's machine has `function` and each of `events` (`Enum::Variant`).
fn in_core(machine: &str, function: &str, events: &[&str]) -> Vec<String> {
    let mut missing = Vec::new();
    if !machine.contains(&format!("pub fn {function}(")) {
        missing.push(format!("fn {function}"));
    }
    for e in events {
        let (name, variant) = e.split_once("::").unwrap();
        let Some(at) = machine.find(&format!("pub enum {name} {{")) else {
            missing.push(e.to_string());
            continue;
        };
        let body = machine[at..].split("\n}").next().unwrap_or("");
        let has = body.lines().any(|l| {
            let l = l.trim_start();
            l.strip_prefix(variant)
                .is_some_and(|r| r.starts_with([',', ' ', '(']) || r.is_empty())
        });
        if !has {
            missing.push(e.to_string());
        }
    }
    missing
}

/// The report of what was found against the table: problems, unlisted statements and stale
/// entries, each naming its file (and line).
fn report(found: &[(String, Found)], applies: &[Apply], machine: &str) -> String {
    let mut out = String::new();
    for (file, f) in found {
        if let Some(p) = &f.problem {
            out.push_str(&format!("{file}:{}: {:?}: {p}\n", f.line, f.writes));
        }
        if !applies
            .iter()
            .any(|a| a.file == file && a.writes == f.writes)
        {
            out.push_str(&format!(
                "{file}:{}: {:?} is not in APPLIES: list it with the core decision it applies\n",
                f.line, f.writes
            ));
        }
    }
    for a in applies {
        if !found
            .iter()
            .any(|(file, f)| a.file == file && a.writes == f.writes)
        {
            out.push_str(&format!(
                "{}: APPLIES lists a {:?} that is not there any more: remove the entry\n",
                a.file, a.writes
            ));
        }
        if let Decision::Core { function, events } = &a.decision {
            for m in in_core(machine, function, events) {
                out.push_str(&format!(
                    "{}: APPLIES names `{m}`, which akbench_core::dispatch::machine does not have\n",
                    a.file
                ));
            }
        }
        if let Decision::Fresh { first } = &a.decision {
            let fresh = ["planned", "ready"];
            if !fresh.contains(first) {
                out.push_str(&format!(
                    "{}: a fresh row starts `planned` (a run) or `ready` (an item), not `{first}`\n",
                    a.file
                ));
            }
        }
    }
    out
}

fn problems(sql: &str) -> Vec<(Writes, usize, Option<String>)> {
    statements(sql, 1)
        .into_iter()
        .map(|f| (f.writes, f.line, f.problem))
        .collect()
}

#[test]
fn guarded_applies_pass() {
    let cases = [
        "UPDATE runs SET state = $3::text::run_state, updated_at = now()\n\
         WHERE run_id = $1 AND state = $2::text::run_state RETURNING run_id",
        "UPDATE work_items SET state = $4::text::item_state, ready_at = $2\n\
         WHERE trial_id = ANY ($1::uuid[]) AND state = ANY ($3::text[]::item_state[])",
        "WITH x AS (\n  UPDATE work_items w SET state = m.to_state, outcome = m.to_outcome\n  \
         FROM unnest($2::text[]) AS m (from_state, to_state)\n  \
         WHERE w.run_id = $1 AND w.state = m.from_state\n  RETURNING w.run_id\n) SELECT 1",
        "UPDATE runs r SET state = d.to_state FROM unnest($1::uuid[]) AS d (run_id)\n\
         WHERE r.run_id = d.run_id AND r.state = d.from_state",
    ];
    for sql in cases {
        let found = problems(sql);
        assert_eq!(found.len(), 1, "{sql}");
        assert_eq!(found[0].2, None, "{sql}");
    }
    assert_eq!(
        problems("INSERT INTO runs (run_id) VALUES ($1)"),
        [(Writes::InsertRuns, 1, None)]
    );
    // Statements that write no state are not listed.
    assert!(
        problems("UPDATE work_items w SET lost_by = u.worker_id FROM unnest($1) AS u (w)")
            .is_empty()
    );
    assert!(problems("SELECT state FROM runs_counts WHERE state = 'x'").is_empty());
    assert!(problems("UPDATE attempts SET state = 'done' WHERE attempt_id = $1").is_empty());
}

#[test]
fn unguarded_or_undecided_writes_are_named_with_their_line() {
    let cases: [(&str, usize, &str); 6] = [
        (
            "-- a comment\nUPDATE runs SET state = 'cancelled', updated_at = now()\n\
             WHERE run_id = $1 AND state = $2",
            2,
            "sets state = 'cancelled', not a state decided in Rust",
        ),
        (
            "UPDATE runs SET state = $2 WHERE run_id = $1",
            1,
            "its WHERE does not pin the row's state",
        ),
        ("UPDATE work_items SET state = $2", 1, "with no WHERE"),
        (
            "UPDATE work_items w SET state = $3 FROM runs r\n\
             WHERE w.run_id = r.run_id AND r.state = $2",
            1,
            "its WHERE does not pin the row's state",
        ),
        (
            "UPDATE work_items SET state = $2 WHERE trial_id = $1 AND state <> 'done'",
            1,
            "its WHERE does not pin the row's state",
        ),
        (
            "\n\nINSERT INTO work_items (trial_id, state) VALUES ($1, 'ready')\n\
             ON CONFLICT (trial_id) DO UPDATE SET state = 'ready'",
            3,
            "an upsert",
        ),
    ];
    for (sql, line, why) in cases {
        let found = problems(sql);
        assert_eq!(found.len(), 1, "{sql}: {found:?}");
        assert_eq!(found[0].1, line, "{sql}");
        let problem = found[0].2.as_deref().unwrap_or("");
        assert!(problem.contains(why), "{sql}: {problem}");
    }
}

/// The guard check as it was before pins had to be top-level conjuncts: a `state = <decided>`
/// (or `= ANY (<decided>)`) of the row anywhere in the WHERE, here to show what it let pass.
fn pinned_anywhere(sql: &str, alias: Option<&str>) -> bool {
    let toks = sql_tokens(sql, 1);
    let table = toks[1].text.as_str();
    let w = toks.iter().position(|t| t.text == "where").unwrap();
    let guard = &toks[w + 1..];
    (0..guard.len()).any(|k| {
        let own = guard[k].text == "state"
            && match k.checked_sub(2) {
                Some(q) if guard[k - 1].text == "." => {
                    Some(guard[q].text.as_str()) == alias || guard[q].text == table
                }
                _ => k == 0 || guard[k - 1].text != ".",
            };
        if !own || guard.get(k + 1).is_none_or(|t| t.text != "=") {
            return false;
        }
        let rest = &guard[k + 2..];
        let end = rest
            .iter()
            .position(|t| matches!(t.text.as_str(), "and" | "or" | ")" | "returning"))
            .unwrap_or(rest.len());
        let any = rest.first().is_some_and(|t| t.text == "any")
            && rest.get(1).is_some_and(|t| t.text == "(")
            && {
                let close = rest
                    .iter()
                    .position(|t| t.text == ")")
                    .unwrap_or(rest.len());
                decided(&rest[2..close])
            };
        decided(&rest[..end]) || any
    })
}

#[test]
fn a_state_pin_that_is_not_a_top_level_conjunct_is_refused() {
    let refused = [
        (
            "UPDATE runs SET state = $3 WHERE run_id = $1 AND state = $2 OR true",
            None,
        ),
        (
            "UPDATE runs SET state = $3 WHERE state = $2::text::run_state OR run_id = $1",
            None,
        ),
        (
            "UPDATE work_items w SET state = m.to_state FROM unnest($2) AS m (from_state, to_state)\n\
             WHERE w.run_id = $1 AND (w.state = m.from_state OR w.lost_by IS NOT NULL)",
            Some("w"),
        ),
        (
            "UPDATE work_items SET state = $3 WHERE run_id = $1 AND (true OR state = ANY ($2))",
            None,
        ),
        (
            "UPDATE runs SET state = $3 WHERE run_id = $1 AND NOT (state = $2)",
            None,
        ),
    ];
    for (sql, alias) in refused {
        assert!(
            pinned_anywhere(sql, alias),
            "the old check let it pass: {sql}"
        );
        let found = problems(sql);
        assert_eq!(found.len(), 1, "{sql}");
        let problem = found[0].2.as_deref().unwrap_or("");
        assert!(
            problem.contains("its WHERE does not pin the row's state"),
            "{sql}: {problem:?}"
        );
    }
    // A pin stays one in parentheses, beside a BETWEEN, or before RETURNING.
    let kept = [
        "UPDATE runs SET state = $3 WHERE (run_id = $1 AND (state = $2)) RETURNING run_id",
        "UPDATE work_items SET state = $3 WHERE ready_at BETWEEN $4 AND $5 AND state = ANY ($2)",
        "UPDATE work_items w SET state = $3 WHERE (w.lost_by IS NULL OR w.run_id = $1) AND w.state = $2",
    ];
    for sql in kept {
        let found = problems(sql);
        assert_eq!(found.len(), 1, "{sql}");
        assert_eq!(found[0].2, None, "{sql}");
    }
}

#[test]
fn inline_sql_in_rust_is_read_with_its_line_and_test_code_is_not() {
    let rust = "fn a() {\n    let x = 1;\n    q(\"UPDATE runs SET state = 'cancelled' \\\n       WHERE run_id = $1\");\n}\n\
                // \"UPDATE runs SET state = 'x'\"\n\
                const S: &str = r#\"INSERT INTO work_items (trial_id) VALUES ($1)\"#;\n\
                #[cfg(test)]\nmod tests {\n    fn t() { q(\"UPDATE runs SET state = 'x'\") }\n}\n\
                fn b() { let c = '{'; q(\"UPDATE work_items SET state = $2 WHERE state = $1\") }\n";
    let strings = rust_strings(rust);
    let found: Vec<(usize, Writes, bool)> = strings
        .iter()
        .flat_map(|(s, line)| statements(s, *line))
        .map(|f| (f.line, f.writes, f.problem.is_some()))
        .collect();
    assert_eq!(
        found,
        [
            (3, Writes::UpdateRuns, true),
            (7, Writes::InsertItems, false),
            (12, Writes::UpdateItems, false),
        ]
    );
}

#[test]
fn the_table_names_unlisted_statements_stale_entries_and_unknown_decisions() {
    let machine = "pub enum RunEvent {\n    Start,\n    Idle { all: bool },\n}\npub fn run_on(\n";
    let found = vec![
        (
            "a.sql".to_string(),
            Found {
                writes: Writes::UpdateRuns,
                line: 4,
                problem: None,
            },
        ),
        (
            "b.sql".to_string(),
            Found {
                writes: Writes::UpdateItems,
                line: 2,
                problem: None,
            },
        ),
    ];
    let applies = [
        Apply {
            file: "a.sql",
            writes: Writes::UpdateRuns,
            decision: Decision::Core {
                function: "run_on",
                events: &["RunEvent::Start", "RunEvent::Idle"],
            },
        },
        Apply {
            file: "c.sql",
            writes: Writes::InsertRuns,
            decision: Decision::Fresh { first: "running" },
        },
        Apply {
            file: "a.sql",
            writes: Writes::UpdateRuns,
            decision: Decision::Core {
                function: "item_on",
                events: &["RunEvent::Resume"],
            },
        },
    ];
    let text = report(&found, &applies, machine);
    let want = [
        "b.sql:2: UpdateItems is not in APPLIES",
        "c.sql: APPLIES lists a InsertRuns that is not there any more",
        "c.sql: a fresh row starts `planned` (a run) or `ready` (an item), not `running`",
        "a.sql: APPLIES names `fn item_on`",
        "a.sql: APPLIES names `RunEvent::Resume`",
    ];
    for w in want {
        assert!(text.contains(w), "{w}\n{text}");
    }
    assert_eq!(text.lines().count(), want.len(), "{text}");
    assert_eq!(report(&found[..1], &applies[..1], machine), "");
}

#[test]
fn every_state_write_is_a_listed_guarded_apply_of_a_core_decision() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let machine = std::fs::read_to_string(root.join("core/src/dispatch/machine.rs")).unwrap();
    let found = found_in_workspace();
    let kinds: BTreeSet<Writes> = found.iter().map(|(_, f)| f.writes).collect();
    assert_eq!(kinds.len(), 4, "found every kind of write: {found:?}");
    let text = report(&found, APPLIES, &machine);
    assert!(text.is_empty(), "state writes:\n{text}");
}
