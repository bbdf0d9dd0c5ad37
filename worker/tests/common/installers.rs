//! The installers Terminal-Bench 2.1 graders fetch, served by the test upstream host
//! ([`super::upstream`]) under their real names: `https://astral.sh/uv/VERSION/install.sh`
//! (scripts/test-upstream/uv-install.sh, a short script doing what the real one does) and
//! `https://github.com/astral-sh/uv/releases/download/VERSION/uv-x86_64-unknown-linux-gnu.tar.gz`,
//! built from PyPI's `uv` wheel by scripts/test-upstream/uv-release.py and cached under
//! `$CARGO_TARGET_DIR` (built once per version). scripts/test_upstream.py serves the same
//! files for scripts/harbor-corpus.
//!
//! The worker reaches them through `AKBENCH_EGRESS_HOSTS` ([`super::upstream::Upstream::hosts_env`]
//! or its policy); the sandbox trusts the upstream's CA through `AKBENCH_SANDBOX_EXTRA_CA`.

use super::upstream::Upstream;
use std::path::PathBuf;
use std::process::Command;

/// The version real graders pin.
pub const UV_VERSION: &str = "0.9.7";

/// The release asset's name.
pub const UV_TARBALL: &str = "uv-x86_64-unknown-linux-gnu.tar.gz";

/// The installer's URL for `version`.
pub fn install_url(version: &str) -> String {
    format!("https://astral.sh/uv/{version}/install.sh")
}

/// The release tarball's URL for `version`.
pub fn tarball_url(version: &str) -> String {
    format!("https://github.com/astral-sh/uv/releases/download/{version}/{UV_TARBALL}")
}

/// The installer script for `version` (POSIX sh, `curl` or `wget`, as the real one):
/// scripts/test-upstream/uv-install.sh.
pub fn install_sh(version: &str) -> String {
    include_str!("../../../scripts/test-upstream/uv-install.sh")
        .replace("@VERSION@", version)
        .replace("@URL@", &tarball_url(version))
}

/// Builds the release tarball from PyPI's wheel (digest checked), atomically.
const BUILD: &str = include_str!("../../../scripts/test-upstream/uv-release.py");

/// The release tarball for `version`, built once under `$CARGO_TARGET_DIR` (call it before
/// entering the test's worker namespace, which reaches only the test host).
pub fn uv_tarball(version: &str) -> Result<PathBuf, String> {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"));
    let dir = target.join("akbench-test-uv").join(version);
    let out = dir.join(UV_TARBALL);
    if out.is_file() {
        return Ok(out);
    }
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let o = Command::new("/usr/bin/python3")
        .args(["-c", BUILD, version])
        .arg(&out)
        .output()
        .map_err(|e| format!("python3: {e}"))?;
    if !o.status.success() {
        return Err(format!(
            "building {UV_TARBALL} {version} from PyPI's wheel: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        ));
    }
    Ok(out)
}

/// Puts uv's installer and release tarball for `version` on `u`.
pub fn serve_uv(u: &Upstream, version: &str) -> Result<(), String> {
    let tarball = uv_tarball(version)?;
    let www = u.www();
    let install = www.join(format!("astral.sh/uv/{version}/install.sh"));
    let release = www.join(format!(
        "github.com/astral-sh/uv/releases/download/{version}/{UV_TARBALL}"
    ));
    for (path, from) in [(&install, None), (&release, Some(&tarball))] {
        let parent = path.parent().unwrap_or(&www);
        std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
        let done = match from {
            None => std::fs::write(path, install_sh(version)),
            Some(f) => std::fs::copy(f, path).map(|_| ()),
        };
        done.map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(())
}
