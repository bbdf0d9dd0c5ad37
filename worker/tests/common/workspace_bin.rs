//! A binary of this workspace from another package (`akbench`, `akbench-coordinator`,
//! `akbench-worker`), for tests that cargo gives only their own package's binaries: built
//! from the current tree every time (a narrower `cargo nextest run -p akbench-worker` would
//! otherwise run a stale binary from an earlier build of the other crates), and that build is
//! a no-op after the README's test command (`cargo nextest run --workspace`, CI) built it:
//!
//! - the same features: `--workspace`, and `--examples` (the workspace has none) so that
//!   dev-dependencies count as they do in a test build. `cargo build -p <package>` resolves
//!   other features: hundreds of crates rebuilt inside the test (over two minutes in CI), and
//!   rebuilt again by the next build with the other features;
//! - the same environment: the variables cargo sets for a test run (`CARGO_MANIFEST_DIR`,
//!   `CARGO_PKG_*`, `OUT_DIR`, ...) are removed, as build scripts (ring's) ask to rerun when
//!   one of them changes, which rebuilt ring and everything above it.

use std::path::PathBuf;
use std::process::Command;

/// Whether `name` is one of the variables cargo sets for a test run (rather than one the
/// user set for cargo itself, like `CARGO_TARGET_DIR`).
fn set_for_the_test(name: &str) -> bool {
    const PREFIXES: [&str; 7] = [
        "CARGO_MANIFEST_",
        "CARGO_PKG_",
        "CARGO_CRATE_",
        "CARGO_BIN_",
        "CARGO_CFG_",
        "CARGO_FEATURE_",
        "CARGO_RUSTC_CURRENT_DIR",
    ];
    matches!(
        name,
        "OUT_DIR" | "CARGO_PRIMARY_PACKAGE" | "CARGO_TARGET_TMPDIR"
    ) || PREFIXES.iter().any(|p| name.starts_with(p))
}

/// The path of workspace binary `bin`, built (see the module doc) when it is not fresh.
pub fn workspace_bin(bin: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let path = exe.parent().unwrap().parent().unwrap().join(bin);
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args([
        "build",
        "--quiet",
        "--workspace",
        "--examples",
        "--bin",
        bin,
    ])
    .current_dir(env!("CARGO_MANIFEST_DIR"));
    for (name, _) in std::env::vars_os() {
        if name.to_str().is_some_and(set_for_the_test) {
            cmd.env_remove(name);
        }
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "failed to build {bin}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(path.is_file(), "{} missing after the build", path.display());
    path
}
