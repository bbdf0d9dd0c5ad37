//! Clean-room grading's withholding rule (docs/tasks.md, "Clean-room grading"): which changes
//! of the agent's diff steer the grader rather than the solution and are taken back from the
//! grading copy - by path ([`DEFAULT_WITHHELD`], a task's `verifier.protected_paths`) and, for
//! files that hold a test runner's settings beside other things (`pyproject.toml`,
//! `setup.cfg`, `tox.ini`), by whether the change touches those settings
//! ([`runner_config_changed`]) - and how a recorded diff splits into the part grading takes
//! and the part it withholds ([`split_withheld`]).

/// Paths that steer the grader rather than the solution, withheld from the agent's diff by
/// default (docs/tasks.md, "Clean-room grading"): runner and toolchain configuration
/// (`.cargo/`, `rust-toolchain`, `rust-toolchain.toml`), interpreter start-up hooks
/// (`sitecustomize.py`, `usercustomize.py`, `*.pth`), installed-package metadata that makes
/// Python load code by itself (`*.dist-info/`, `*.egg-info/`, `*.egg-link`: a pytest plugin
/// declared as an entry point is loaded from any of them on `sys.path`, the working folder
/// included), pytest configuration files (`conftest.py`, `pytest.ini`, `.pytest.ini`,
/// `pytest.toml`, `.pytest.toml`; the pytest sections of files that hold other things too
/// are [`runner_config_changed`]'s), and what the grader itself owns (the verifier folder
/// names `.akbench/`). A glob is a path (`a/b.txt`), a folder (`a/`: everything under it;
/// `*.x/`: every folder whose name ends in `.x`), or a file name pattern with one leading
/// `*` (`*.pth`), matched at any depth.
pub const DEFAULT_WITHHELD: &[&str] = &[
    ".cargo/",
    "rust-toolchain",
    "rust-toolchain.toml",
    "sitecustomize.py",
    "usercustomize.py",
    "*.pth",
    "*.dist-info/",
    "*.egg-info/",
    "*.egg-link",
    "conftest.py",
    "pytest.ini",
    ".pytest.ini",
    "pytest.toml",
    ".pytest.toml",
    ".akbench/",
];

/// True when the diff's change of `path` (relative to the repository, `/`-separated) is
/// withheld from grading: it matches a default ([`DEFAULT_WITHHELD`]) or one of the task's
/// `verifier.protected_paths` (same glob forms; a path without `/` matches that name at any
/// depth, one with `/` from the repository root).
pub fn is_withheld(path: &str, protected: &[String]) -> bool {
    let globs = DEFAULT_WITHHELD
        .iter()
        .copied()
        .chain(protected.iter().map(String::as_str));
    let parts: Vec<&str> = path.split('/').collect();
    let file = parts.last().copied().unwrap_or("");
    for g in globs {
        let folders = &parts[..parts.len().saturating_sub(1)];
        let matched = if let Some(dir) = g.strip_suffix('/') {
            if let Some(suffix) = dir.strip_prefix('*') {
                folders.iter().any(|f| f.ends_with(suffix))
            } else if dir.contains('/') {
                path.starts_with(&format!("{dir}/"))
            } else {
                folders.contains(&dir)
            }
        } else if let Some(suffix) = g.strip_prefix('*') {
            file.ends_with(suffix)
        } else if g.contains('/') {
            path == g
        } else {
            file == g
        };
        if matched {
            return true;
        }
    }
    false
}

/// The path a `diff --git a/P b/P` header names (renames are off, so both are the same);
/// `None` for a line that is not such a header.
fn header_path(line: &[u8]) -> Option<String> {
    let rest = std::str::from_utf8(line.strip_prefix(b"diff --git ")?).ok()?;
    if let Some(q) = rest.strip_prefix("\"a/") {
        // Quoted (special characters): `"a/P" "b/P"`, P C-escaped; kept escaped.
        let end = q.find("\" \"b/")?;
        return Some(q[..end].to_string());
    }
    let n = rest.len();
    if n < 5 || (n - 1) % 2 != 0 {
        return None;
    }
    let half = (n - 1) / 2;
    let (a, b) = (&rest[..half], &rest[half + 1..]);
    match (a.strip_prefix("a/"), b.strip_prefix("b/")) {
        (Some(pa), Some(pb)) if pa == pb => Some(pa.to_string()),
        _ => None,
    }
}

/// Splits a recorded diff (`git diff-tree -p --no-renames` output) into the part grading
/// takes and the part it withholds ([`is_withheld`] on each file's path, and the paths in
/// `also`, which the caller found steering by their content: [`runner_config_changed`]):
/// `(kept, withheld, withheld paths)`. The parts are whole per-file sections, in order.
pub fn split_withheld(
    diff: &[u8],
    protected: &[String],
    also: &[String],
) -> (Vec<u8>, Vec<u8>, Vec<String>) {
    let (mut kept, mut held, mut paths) = (Vec::new(), Vec::new(), Vec::new());
    let mut current_held = false;
    for line in diff.split_inclusive(|b| *b == b'\n') {
        let bare = line.strip_suffix(b"\n").unwrap_or(line);
        if bare.starts_with(b"diff --git ") {
            current_held = match header_path(bare) {
                Some(p) if is_withheld(&p, protected) || also.contains(&p) => {
                    paths.push(p);
                    true
                }
                _ => false,
            };
        }
        if current_held {
            held.extend_from_slice(line);
        } else {
            kept.extend_from_slice(line);
        }
    }
    (kept, held, paths)
}

/// The paths a recorded diff changes, in order (one per `diff --git` section).
pub fn diff_paths(diff: &[u8]) -> Vec<String> {
    diff.split(|b| *b == b'\n')
        .filter(|l| l.starts_with(b"diff --git "))
        .filter_map(header_path)
        .collect()
}

/// Files that hold pytest's settings beside other things: a change to them is withheld when
/// it changes those settings ([`runner_config_changed`]), and kept otherwise (a real fix may
/// add a dependency to `pyproject.toml`).
pub const RUNNER_CONFIG_FILES: &[&str] = &["pyproject.toml", "setup.cfg", "tox.ini"];

/// Whether `path` (a diff path) names a file of [`RUNNER_CONFIG_FILES`], at any depth.
pub fn is_runner_config_file(path: &str) -> bool {
    RUNNER_CONFIG_FILES.contains(&path.rsplit('/').next().unwrap_or(path))
}

/// Whether the change of `path` from `before` to `after` (`None`: absent) changes a test
/// runner's settings in a file of [`RUNNER_CONFIG_FILES`]: `pyproject.toml`'s `[tool.pytest]`
/// table (`ini_options` and pytest 9's native keys), the `[tool:pytest]` or `[pytest]` section
/// of `setup.cfg` / `tox.ini`. A file that does not parse on one side and does on the other
/// counts as changed (pytest would read something else); other files never do.
pub fn runner_config_changed(path: &str, before: Option<&[u8]>, after: Option<&[u8]>) -> bool {
    if !is_runner_config_file(path) {
        return false;
    }
    let file = path.rsplit('/').next().unwrap_or(path);
    let text = |b: Option<&[u8]>| b.map(|b| String::from_utf8_lossy(b).into_owned());
    let (before, after) = (text(before), text(after));
    if file == "pyproject.toml" {
        pytest_table(before.as_deref()) != pytest_table(after.as_deref())
    } else {
        pytest_sections(before.as_deref()) != pytest_sections(after.as_deref())
    }
}

/// `tool.pytest` of a `pyproject.toml` text: `Ok(None)` when absent (or no file), `Err` when
/// the text is not TOML.
fn pytest_table(text: Option<&str>) -> Result<Option<toml::Value>, ()> {
    let Some(text) = text else { return Ok(None) };
    let doc: toml::Table = toml::from_str(text).map_err(|_| ())?;
    Ok(doc
        .get("tool")
        .and_then(|t| t.as_table())
        .and_then(|t| t.get("pytest"))
        .cloned())
}

/// The lines (trailing space trimmed) of every `[pytest]` / `[tool:pytest]` section of an
/// INI text, in order, each section's header included.
fn pytest_sections(text: Option<&str>) -> Vec<String> {
    let mut out = Vec::new();
    let mut inside = false;
    for line in text.unwrap_or("").lines() {
        let t = line.trim();
        if let Some(name) = t.strip_prefix('[').and_then(|r| r.strip_suffix(']')) {
            let name = name.trim().to_ascii_lowercase();
            inside = name == "pytest" || name == "tool:pytest";
        }
        if inside {
            out.push(line.trim_end().to_string());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn withheld_paths() {
        let extra = vec![
            "scripts/grade.sh".to_string(),
            "fixtures/".to_string(),
            "*.cfg".to_string(),
        ];
        let table: &[(&str, bool)] = &[
            (".cargo/config.toml", true),
            ("sub/.cargo/config.toml", true),
            ("rust-toolchain.toml", true),
            ("crates/a/rust-toolchain", true),
            ("sitecustomize.py", true),
            ("lib/usercustomize.py", true),
            ("evil.pth", true),
            ("tests/conftest.py", true),
            ("pytest.ini", true),
            (".akbench/reward.txt", true),
            ("scripts/grade.sh", true),
            ("other/scripts/grade.sh", false),
            ("fixtures/a.json", true),
            ("setup.cfg", true),
            ("src/lib.rs", false),
            ("build.rs", false),
            ("Cargo.toml", false),
            ("pyslug/__init__.py", false),
            ("tests/test_x.py", false),
            ("cargo/config.toml", false),
            ("my.pthx", false),
            ("evil-1.0.dist-info/entry_points.txt", true),
            ("src/evil.egg-info/entry_points.txt", true),
            ("evil.egg-link", true),
            (".pytest.ini", true),
            ("pytest.toml", true),
            ("sub/.pytest.toml", true),
            ("dist-info/x", false),
            ("a.dist-infox/x", false),
            ("pyproject.toml", false),
            ("tox.ini", false),
        ];
        for (p, want) in table {
            assert_eq!(is_withheld(p, &extra), *want, "{p}");
        }
        assert!(!is_withheld("setup.cfg", &[]));
    }

    #[test]
    fn diffs_split_into_kept_and_withheld_sections() {
        let diff = b"diff --git a/src/lib.rs b/src/lib.rs\nindex 1..2 100644\n--- a/src/lib.rs\n+++ b/src/lib.rs\n@@ -1 +1 @@\n-a\n+b\ndiff --git a/.cargo/config.toml b/.cargo/config.toml\nnew file mode 100644\n--- /dev/null\n+++ b/.cargo/config.toml\n@@ -0,0 +1 @@\n+[target]\ndiff --git a/a b/a b/a b/a b/a\n--- a/a b/a\n+++ b/a b/a\n@@ -1 +1 @@\n-x\n+y\ndiff --git \"a/x\\tconftest.py\" \"b/x\\tconftest.py\"\n+z\n";
        let (kept, held, paths) = split_withheld(diff, &[], &[]);
        let kept = String::from_utf8(kept).unwrap();
        let held = String::from_utf8(held).unwrap();
        assert_eq!(paths, vec![".cargo/config.toml".to_string()]);
        assert!(kept.starts_with("diff --git a/src/lib.rs") && kept.contains("+b\n"));
        assert!(kept.contains("diff --git a/a b/a b/a b/a b/a\n"), "{kept}");
        assert!(
            held.starts_with("diff --git a/.cargo/config.toml") && held.ends_with("+[target]\n")
        );
        assert!(!kept.contains("[target]"));
        let (k, h, p) = split_withheld(b"", &[], &[]);
        assert!(k.is_empty() && h.is_empty() && p.is_empty());
        let (_, _, p) = split_withheld(diff, &["src/lib.rs".into()], &[]);
        assert_eq!(
            p,
            vec!["src/lib.rs".to_string(), ".cargo/config.toml".to_string()]
        );
        assert_eq!(
            diff_paths(diff),
            vec!["src/lib.rs", ".cargo/config.toml", "x\\tconftest.py"]
        );
        assert_eq!(header_path(b"diff --git a/x b/y"), None);
        assert_eq!(header_path(b"+diff --git a/x b/x"), None);
        let (_, held, p) = split_withheld(diff, &[], &["src/lib.rs".into()]);
        assert_eq!(
            p,
            vec!["src/lib.rs".to_string(), ".cargo/config.toml".to_string()]
        );
        assert!(held.starts_with(b"diff --git a/src/lib.rs"));
    }

    #[test]
    fn a_runner_config_change_is_one_to_the_pytest_settings() {
        let p = |s: &str| Some(s.as_bytes().to_vec());
        let dep = "[project]\nname = \"x\"\ndependencies = []\n";
        let dep2 = "[project]\nname = \"x\"\ndependencies = [\"attrs\"]\n";
        let opts = "[project]\nname = \"x\"\n\n[tool.pytest.ini_options]\naddopts = \"-p evil\"\n";
        let dotted = "tool.pytest.ini_options.addopts = \"-p evil\"\n";
        let native = "[tool.pytest]\naddopts = [\"-p\", \"evil\"]\n";
        let cfg = "[metadata]\nname = x\n[tool:pytest]\naddopts = -q\n";
        let cfg_dep = "[metadata]\nname = y\n[tool:pytest]\naddopts = -q\n";
        let cfg_evil = "[metadata]\nname = x\n[tool:pytest]\naddopts = -q -p evil\n";
        let tox = "[tox]\nenvlist = py3\n";
        let tox_evil = "[tox]\nenvlist = py3\n[ pytest ]\naddopts = -p evil\n";
        // (path, before, after, changed)
        type Row = (&'static str, Option<Vec<u8>>, Option<Vec<u8>>, bool);
        let table: &[Row] = &[
            ("pyproject.toml", p(dep), p(dep2), false),
            ("pyproject.toml", None, p(dep), false),
            ("pyproject.toml", p(dep), None, false),
            ("pyproject.toml", p(dep), p(opts), true),
            ("pyproject.toml", None, p(opts), true),
            ("pyproject.toml", p(opts), None, true),
            ("pyproject.toml", p(opts), p(opts), false),
            ("sub/pyproject.toml", p(dep), p(dotted), true),
            ("pyproject.toml", p(dep), p(native), true),
            ("pyproject.toml", p(dep), p("[project\n"), true),
            ("pyproject.toml", p("[project\n"), p("[project\n"), false),
            ("setup.cfg", p(cfg), p(cfg_dep), false),
            ("setup.cfg", p(cfg), p(cfg_evil), true),
            ("setup.cfg", p(cfg), None, true),
            ("tox.ini", p(tox), p(tox_evil), true),
            ("tox.ini", None, p(tox), false),
            ("Cargo.toml", p(dep), p(opts), false),
            ("pyproject.toml.bak", p(dep), p(opts), false),
        ];
        for (path, before, after, want) in table {
            assert_eq!(
                runner_config_changed(path, before.as_deref(), after.as_deref()),
                *want,
                "{path}: {before:?} -> {after:?}"
            );
        }
    }
}
