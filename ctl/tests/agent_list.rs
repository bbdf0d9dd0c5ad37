//! `akbench agent list` and `akbench agent install` through the real binary: every known
//! agent listed with its pinned version, installed or not (an entry without its marker is
//! not), a real install (npm, gemini-cli) listed with its folder and runtime, and bad names
//! and versions refused with exit 2 naming the fix.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn akbench(cache: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_akbench"))
        .args(args)
        .env("AKBENCH_AGENTS_CACHE", cache)
        .output()
        .unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn lists_every_known_agent_and_what_is_installed() {
    let tmp = tempfile::tempdir().unwrap();
    // An entry left without its marker (an install that crashed) is not installed.
    let pinned = akbench_core::agent::install::Install::pinned(
        akbench_core::agent::install::known("codex").unwrap(),
    );
    let key = pinned.key(&akbench_core::agent::install::platform());
    std::fs::create_dir_all(tmp.path().join(&key).join("bin")).unwrap();
    // A complete entry of another codex version (its marker as the worker writes it).
    let mut other = pinned.clone();
    other.version = "0.1.0".into();
    let other_dir = tmp
        .path()
        .join(other.key(&akbench_core::agent::install::platform()));
    std::fs::create_dir_all(&other_dir).unwrap();
    let marker = akbench_worker::agents::Marker {
        install: other.clone(),
        platform: akbench_core::agent::install::platform(),
        runtime: "node v0".into(),
        built_at: Some(other_dir.canonicalize().unwrap()),
    };
    std::fs::write(
        other_dir.join(akbench_worker::agents::MARKER),
        serde_json::to_string(&marker).unwrap(),
    )
    .unwrap();
    let o = akbench(tmp.path(), &["agent", "list", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&o.stdout).unwrap();
    let known = akbench_core::agent::install::KNOWN;
    assert_eq!(rows.len(), known.len() + 1, "{}", text(&o));
    for (row, k) in rows.iter().zip(known) {
        assert_eq!(row["adapter"], k.adapter);
        assert_eq!(row["package"], k.package);
        assert_eq!(row["version"], k.version);
        assert_eq!(row["ecosystem"], k.ecosystem.as_str());
        assert_eq!(row["pinned"], true);
        assert!(row["installed"].is_null(), "{row}");
    }
    let last = &rows[known.len()];
    assert_eq!(
        (&last["adapter"], &last["version"], &last["pinned"]),
        (&"codex".into(), &"0.1.0".into(), &false.into()),
        "{last}"
    );
    assert_eq!(last["installed"], other_dir.display().to_string());
    let o = akbench(tmp.path(), &["agent", "list"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains(&tmp.path().display().to_string()), "{out}");
    for k in known {
        let line = out
            .lines()
            .find(|l| l.starts_with(&format!("{} ", k.adapter)))
            .unwrap_or_else(|| panic!("{}: {out}", k.adapter));
        assert!(line.contains(k.version) && line.ends_with(" no"), "{line}");
    }
    assert!(
        out.lines().any(|l| l.starts_with("codex ")
            && l.contains("0.1.0 (not pinned)")
            && l.contains("yes (node v0)")),
        "{out}"
    );
}

#[test]
fn bad_names_and_versions_are_refused_naming_the_fix() {
    let tmp = tempfile::tempdir().unwrap();
    for (args, needle) in [
        (vec!["agent", "install", "oracle"], "field `install`"),
        (vec!["agent", "install", "nope"], "not `nope`"),
        (
            vec!["agent", "install", "codex", "--version", "latest"],
            "install.version",
        ),
    ] {
        let o = akbench(tmp.path(), &args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(needle) && err.contains("fix:"), "{err}");
    }
    // Nothing was installed, not even a folder of an entry.
    let entries: Vec<_> = std::fs::read_dir(tmp.path())
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(entries.is_empty(), "{entries:?}");
}

/// The agent cache the worker's tests share (`worker/tests/agents_installed.rs`).
fn shared_cache() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"))
        .join("akbench-agents")
}

/// [`shared_cache`], made and canonical (the installer records entries by their canonical
/// folder).
fn shared_cache_made() -> PathBuf {
    let c = shared_cache();
    std::fs::create_dir_all(&c).unwrap();
    c.canonicalize().unwrap()
}

#[test]
fn an_installed_agent_is_listed_with_its_folder_and_runtime() {
    let have = |p: &str| {
        Command::new(p)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if !(have("npm") && have("node") && have("patchelf")) {
        akbench_core::testkit::skip(
            "an_installed_agent_is_listed_with_its_folder_and_runtime",
            "node, npm and patchelf are needed to install an npm agent",
        );
        return;
    }
    let cache = shared_cache_made();
    let o = akbench(&cache, &["agent", "install", "gemini-cli"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let launcher = PathBuf::from(String::from_utf8_lossy(&o.stdout).trim());
    assert!(launcher.starts_with(&cache) && launcher.ends_with("bin/gemini"));
    let v = Command::new(&launcher).arg("--version").output().unwrap();
    assert_eq!(String::from_utf8_lossy(&v.stdout).trim(), "0.61.0", "{v:?}");
    let o = akbench(&cache, &["agent", "list", "--json"]);
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&o.stdout).unwrap();
    let row = rows.iter().find(|r| r["adapter"] == "gemini-cli").unwrap();
    assert_eq!(
        row["installed"].as_str().map(PathBuf::from),
        launcher
            .parent()
            .and_then(Path::parent)
            .map(Path::to_path_buf),
        "{row}"
    );
    assert!(
        row["runtime"]
            .as_str()
            .is_some_and(|r| r.starts_with("node v")),
        "{row}"
    );
    let o = akbench(&cache, &["agent", "list"]);
    let out = String::from_utf8_lossy(&o.stdout);
    let line = out.lines().find(|l| l.starts_with("gemini-cli ")).unwrap();
    assert!(line.contains("yes (node v"), "{line}");
}
