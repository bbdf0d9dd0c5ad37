//! What a tripwire twin is made of: the task's declared `[verifier.tripwire]`, else the
//! (file, test) pairs of the hidden tests that have an expected value to change
//! ([`akbench_core::grading::twin`]), in a random order; each made into a [`Twin`] (the
//! tests-copy files to write over) when it is run.

use akbench_core::grading::tripwire_code;
use akbench_core::grading::twin::{self, perturb_test, test_lang, tests_with_sites};
use akbench_core::task::Task;
use std::path::{Path, PathBuf};

/// A twin of a task's tests: the files of the tests copy to overwrite, with their new text.
#[derive(Debug, Clone)]
pub(crate) struct Twin {
    /// `(path under tests/, text)`.
    pub files: Vec<(String, String)>,
    /// What it is, for the record and the cause (`the hidden tests with 6 expected values
    /// changed`, `the declared tripwire test`).
    pub what: String,
    /// The declared or appended test's name, empty for a perturbed twin.
    pub name: String,
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

/// A random number in `0..n`.
fn random_below(n: u32) -> u32 {
    let b = random_bytes(4);
    u32::from_le_bytes([b[0], b[1], b[2], b[3]]) % n.max(1)
}

/// A random lowercase word.
pub(super) fn random_word(len: usize) -> String {
    random_bytes(len)
        .into_iter()
        .map(|b| char::from(b'a' + b % 26))
        .collect()
}

fn random_pair() -> (u32, u32) {
    let b = random_bytes(3);
    let a = u32::from(b[0]) * 256 + u32::from(b[1]) + 2;
    (a, a + 1 + u32::from(b[2]))
}

/// One test whose expected values a twin changes.
pub(crate) struct Candidate {
    /// The file under tests/.
    pub file: String,
    content: String,
    lang: twin::Lang,
    /// The test function (empty: the top of the file).
    pub test: String,
}

impl Candidate {
    /// The twin: this test's expected values changed, at random.
    pub fn twin(&self) -> Twin {
        let p = perturb_test(&self.content, self.lang, &self.test, &mut random_below);
        Twin {
            files: vec![(self.file.clone(), p.text)],
            what: changed(p.sites, &self.test, &self.file),
            name: String::new(),
        }
    }
}

/// What a task's tripwire is made of.
pub(crate) enum Twins {
    /// The task's own: `[verifier.tripwire] code`, or a test appended to its `file`.
    Declared(Twin),
    /// Tests of the hidden tests whose expected values a twin changes, in a random order.
    Tests(Vec<Candidate>),
}

/// The tripwire of `task`: the declared `[verifier.tripwire]` (its `code` appended to its
/// `file`, or the tests of that file), else every test of a test file the twin knows that
/// has an expected value to change, shuffled. `Ok(Err(why))`: no twin applies (the record
/// says why). `Err`: the task's declaration is wrong (an evaluation error naming it).
pub(crate) fn twins_of(task: &Task) -> Result<Result<Twins, String>, String> {
    let decl = task.file.verifier.tripwire.clone().unwrap_or_default();
    if decl.enabled == Some(false) {
        return Ok(Err(
            "none: the task turned it off ([verifier.tripwire] enabled = false)".into(),
        ));
    }
    let mut candidates = Vec::new();
    if let Some(file) = &decl.file {
        let Some(path) = akbench_core::task::inside(&task.tests_dir, file) else {
            return Err(format!(
                "failed to place the tripwire: task.toml [verifier.tripwire] file `{file}` is not inside tests/; fix: name a file under tests/"
            ));
        };
        let content = akbench_core::bounded_read::ReadKind::TaskFile.read_text(&path, akbench_core::bounded_read::Links::Follow).map_err(|e| {
            format!("failed to place the tripwire: task.toml [verifier.tripwire] file `{file}` cannot be read: it {e}")
        })?;
        let base = Path::new(file)
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("");
        if let Some(code) = &decl.code {
            let name = random_word(12);
            return Ok(Ok(Twins::Declared(Twin {
                files: vec![(
                    file.clone(),
                    format!("{content}{}", code.replace("{name}", &name)),
                )],
                what: format!("the task's declared tripwire `{name}` in {file}"),
                name,
            })));
        }
        if let Some(lang) = test_lang(base, &content) {
            add(&mut candidates, file, &content, lang);
        }
        if candidates.is_empty() {
            let (a, b) = random_pair();
            return match tripwire_code(base, &content, &random_word(12), a, b) {
                Some((name, code)) => Ok(Ok(Twins::Declared(Twin {
                    files: vec![(file.clone(), format!("{content}{code}"))],
                    what: format!("a test `{name}` that must fail, added to {file}"),
                    name,
                }))),
                None => Err(format!(
                    "failed to place the tripwire: task.toml [verifier.tripwire] file `{file}` has no expected value to change and is no test file akbench knows; fix: give `code` too"
                )),
            };
        }
    } else {
        let mut files = Vec::new();
        list_files(&task.tests_dir, Path::new(""), &mut files);
        files.sort();
        for rel in files {
            let base = rel.file_name().and_then(|n| n.to_str()).unwrap_or("");
            let Ok(content) = akbench_core::bounded_read::ReadKind::TaskFile.read_text(
                &task.tests_dir.join(&rel),
                akbench_core::bounded_read::Links::Refuse,
            ) else {
                continue;
            };
            if let Some(lang) = test_lang(base, &content) {
                add(&mut candidates, &rel.display().to_string(), &content, lang);
            }
        }
    }
    if candidates.is_empty() {
        return Ok(Err(
            "none: no expected value to change in the hidden tests (no assertion with a literal in a test file akbench knows); declare [verifier.tripwire] to have one"
                .into(),
        ));
    }
    // Fisher-Yates: every order equally likely.
    for i in (1..candidates.len()).rev() {
        candidates.swap(i, pick(i + 1));
    }
    Ok(Ok(Twins::Tests(candidates)))
}

fn add(out: &mut Vec<Candidate>, file: &str, content: &str, lang: twin::Lang) {
    for test in tests_with_sites(content, lang) {
        out.push(Candidate {
            file: file.to_string(),
            content: content.to_string(),
            lang,
            test,
        });
    }
}

/// A random index below `n` (`n` > 0).
fn pick(n: usize) -> usize {
    usize::try_from(random_below(u32::try_from(n).unwrap_or(u32::MAX))).unwrap_or(0) % n.max(1)
}

fn changed(sites: usize, test: &str, file: &str) -> String {
    let test = if test.is_empty() {
        "the top of the file".to_string()
    } else {
        format!("test `{test}`")
    };
    format!(
        "the hidden tests with the {sites} expected value{} of {test} in {file} changed",
        if sites == 1 { "" } else { "s" },
    )
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
