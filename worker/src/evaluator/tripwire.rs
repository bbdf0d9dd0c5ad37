//! The tripwire of a grade: where it goes in the grader's copy of the tests (the task's
//! `[verifier.tripwire]`, else the framework defaults of
//! [`akbench_core::grading::tripwire_code`]), and the second grading run, in a fresh copy of
//! the agent's work, that must report it failing ([`akbench_core::grading::check_tripwire`]).

use super::{run_once, EvalPlace, Run, TAMPERED};
use crate::process::CancelToken;
use akbench_core::grading::{check_tripwire, tripwire_code, TRIPWIRE_OK};
use akbench_core::record::TripwireFacts;
use akbench_core::task::Task;
use std::path::{Path, PathBuf};

pub(super) enum Tripwire {
    Done(TripwireFacts, Option<String>),
    Broken(String),
    Cancelled,
}

/// `n` random bytes from the kernel (`getrandom(2)`).
fn random_bytes(n: usize) -> Vec<u8> {
    let mut buf = vec![0u8; n];
    let mut got = 0;
    while got < n {
        // SAFETY: getrandom(2) writes at most `n - got` bytes into the rest of `buf`.
        let r = unsafe { libc::getrandom(buf[got..].as_mut_ptr().cast(), n - got, 0) };
        if r > 0 {
            got += usize::try_from(r).unwrap_or(0);
        } else if std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            // No getrandom(2): the random half of a UUIDv7.
            for (i, b) in buf.iter_mut().enumerate().skip(got) {
                *b = uuid::Uuid::now_v7().as_bytes()[8 + i % 8];
            }
            break;
        }
    }
    buf
}

/// A random lowercase word.
fn random_word(len: usize) -> String {
    random_bytes(len)
        .into_iter()
        .map(|b| char::from(b'a' + b % 26))
        .collect()
}

/// Where the tripwire goes and what it is: the task's `[verifier.tripwire]`, else the first
/// test file (sorted) of a framework the defaults know. `Ok(None)`: no tripwire (the reason).
fn place_tripwire(task: &Task) -> Result<Result<(String, String, String), String>, String> {
    let token = random_word(12);
    let decl = task.file.verifier.tripwire.clone().unwrap_or_default();
    if decl.enabled == Some(false) {
        return Ok(Err(
            "none: the task turned it off ([verifier.tripwire] enabled = false)".into(),
        ));
    }
    if let Some(file) = &decl.file {
        let Some(path) = akbench_core::task::inside(&task.tests_dir, file) else {
            return Err(format!(
                "failed to place the tripwire: task.toml [verifier.tripwire] file `{file}` is not inside tests/; fix: name a file under tests/"
            ));
        };
        let content = std::fs::read_to_string(&path).map_err(|e| {
            format!("failed to place the tripwire: task.toml [verifier.tripwire] file `{file}` cannot be read: {e}")
        })?;
        if let Some(code) = &decl.code {
            let name = token.clone();
            return Ok(Ok((
                file.clone(),
                name.clone(),
                code.replace("{name}", &name),
            )));
        }
        let base = Path::new(file)
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("");
        let (a, b) = random_pair();
        return match tripwire_code(base, &content, &token, a, b) {
            Some((name, code)) => Ok(Ok((file.clone(), name, code))),
            None => Err(format!(
                "failed to place the tripwire: task.toml [verifier.tripwire] file `{file}` is no test file akbench knows; fix: give `code` too"
            )),
        };
    }
    let mut files = Vec::new();
    list_files(&task.tests_dir, Path::new(""), &mut files);
    files.sort();
    for rel in files {
        let base = rel
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("")
            .to_string();
        let Ok(content) = std::fs::read_to_string(task.tests_dir.join(&rel)) else {
            continue;
        };
        let (a, b) = random_pair();
        if let Some((name, code)) = tripwire_code(&base, &content, &token, a, b) {
            return Ok(Ok((rel.display().to_string(), name, code)));
        }
    }
    Ok(Err(
        "none: no test file of a framework akbench knows in tests/ (declare [verifier.tripwire])"
            .into(),
    ))
}

fn random_pair() -> (u32, u32) {
    let b = random_bytes(3);
    let a = u32::from(b[0]) * 256 + u32::from(b[1]) + 2;
    (a, a + 1 + u32::from(b[2]))
}

fn list_files(root: &Path, rel: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(root.join(rel)) else {
        return;
    };
    for e in rd.flatten() {
        let Ok(ft) = e.file_type() else { continue };
        let r = rel.join(e.file_name());
        if ft.is_dir() {
            list_files(root, &r, out);
        } else if ft.is_file() {
            out.push(r);
        }
    }
}

/// The tripwire run: a fresh copy of the agent's work, the tests copy with the tripwire;
/// it must be seen failing and the run must not be solved.
pub(super) fn run(task: &Task, place: &EvalPlace<'_>, cancel: &CancelToken) -> Tripwire {
    let (file, name, code) = match place_tripwire(task) {
        Err(cause) => return Tripwire::Broken(cause),
        Ok(Err(none)) => {
            return Tripwire::Done(
                TripwireFacts {
                    name: String::new(),
                    file: String::new(),
                    result: none,
                },
                None,
            )
        }
        Ok(Ok(t)) => t,
    };
    let facts = |result: String| TripwireFacts {
        name: name.clone(),
        file: file.clone(),
        result,
    };
    let Some(ws) = place.workspaces else {
        return Tripwire::Done(
            facts("not run: no fresh workspace to run it in".into()),
            None,
        );
    };
    let dir = place.eval_root.join("tripwire");
    let fresh = match ws.agent_copy(&dir) {
        Ok(f) => f,
        Err(e) => {
            return Tripwire::Broken(format!("failed to make the tripwire run's workspace: {e}"))
        }
    };
    let prefix = format!("{}tripwire.", place.log_prefix);
    let run = run_once(
        task,
        place,
        &fresh.path,
        &dir.join("eval"),
        &prefix,
        Some((&file, &code)),
        cancel,
    );
    drop(fresh);
    let seen = match run {
        Run::Cancelled => return Tripwire::Cancelled,
        Run::Machinery { cause, .. } => return Tripwire::Broken(format!("the tripwire run: {cause}")),
        Run::NoVerdict { cause, .. } => Err(format!(
            "the run with the tripwire `{name}` gave no verdict ({cause}) where the run without it solved"
        )),
        Run::Verdict(v) => match v.tampered {
            Some(t) => Err(format!("in the run with the tripwire: {t}")),
            None => check_tripwire(&name, &v.tests, &v.report, v.ok),
        },
    };
    match seen {
        Ok(()) => Tripwire::Done(facts(TRIPWIRE_OK.into()), None),
        Err(t) => Tripwire::Done(facts(format!("{TAMPERED}: {t}")), Some(t)),
    }
}
