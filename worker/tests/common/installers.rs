//! The installers Terminal-Bench 2.1 graders fetch, served by the test upstream host
//! ([`super::upstream`]) under their real names: `https://astral.sh/uv/VERSION/install.sh`
//! (a short script doing what the real one does: download the release tarball, unpack `uv`
//! and `uvx` into `$HOME/.local/bin`, write `$HOME/.local/bin/env`) and
//! `https://github.com/astral-sh/uv/releases/download/VERSION/uv-x86_64-unknown-linux-gnu.tar.gz`,
//! built from PyPI's `uv` wheel (PyPI is reachable from these machines; the wheel's digest is
//! checked) and cached under `$CARGO_TARGET_DIR` (built once per version).
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

/// The installer script for `version` (POSIX sh, `curl` or `wget`, as the real one).
pub fn install_sh(version: &str) -> String {
    let url = tarball_url(version);
    format!(
        r#"#!/bin/sh
# akbench's test stand-in for astral.sh's uv installer {version}
set -eu
url="{url}"
bin="${{XDG_BIN_HOME:-$HOME/.local/bin}}"
tmp="$(mktemp -d)"
if command -v curl >/dev/null 2>&1; then
  curl -LsSf "$url" -o "$tmp/uv.tar.gz"
else
  wget -q -O "$tmp/uv.tar.gz" "$url"
fi
tar -xzf "$tmp/uv.tar.gz" -C "$tmp"
mkdir -p "$bin"
cp "$tmp/uv-x86_64-unknown-linux-gnu/uv" "$tmp/uv-x86_64-unknown-linux-gnu/uvx" "$bin/"
chmod +x "$bin/uv" "$bin/uvx"
cat > "$bin/env" <<'EOF'
#!/bin/sh
case ":${{PATH}}:" in
    *:"$HOME/.local/bin":*) ;;
    *) export PATH="$HOME/.local/bin:$PATH" ;;
esac
EOF
rm -rf "$tmp"
echo "everything's installed!"
"#
    )
}

/// Builds the release tarball from PyPI's wheel (digest checked), atomically.
const BUILD: &str = r#"
import hashlib, io, json, os, sys, tarfile, urllib.request, zipfile
v, out = sys.argv[1], sys.argv[2]
req = urllib.request.Request("https://pypi.org/simple/uv/",
                             headers={"Accept": "application/vnd.pypi.simple.v1+json"})
files = json.load(urllib.request.urlopen(req, timeout=120))["files"]
name = "uv-%s-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl" % v
f = next(x for x in files if x["filename"] == name)
data = urllib.request.urlopen(f["url"], timeout=600).read()
if hashlib.sha256(data).hexdigest() != f["hashes"]["sha256"]:
    sys.exit("digest mismatch for " + name)
z = zipfile.ZipFile(io.BytesIO(data))
tmp = "%s.%d" % (out, os.getpid())
with tarfile.open(tmp, "w:gz", compresslevel=1) as t:
    for prog in ["uv", "uvx"]:
        body = z.read("uv-%s.data/scripts/%s" % (v, prog))
        info = tarfile.TarInfo("uv-x86_64-unknown-linux-gnu/" + prog)
        info.size = len(body)
        info.mode = 0o755
        t.addfile(info, io.BytesIO(body))
os.rename(tmp, out)
"#;

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
