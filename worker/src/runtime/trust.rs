//! Which certificate authorities the programs inside a sandbox trust, besides the ones of
//! the host (`sandbox`) or of the image (`container`): the worker's own interception CA
//! (the egress proxy's, [`super::egress`]) and the operator's [`EXTRA_CA_ENV`] (an internal
//! mirror's CA, a test's upstream host's).
//!
//! Owns the merged bundle and where it goes:
//! - `sandbox` (bwrap over the host): the host's bundle plus the extra certificates, written
//!   in the attempt's scratch folder and bound read-only over the host bundle's path
//!   ([`for_sandbox`]);
//! - `container` (the image): the image's bundle plus the extra certificates, written in the
//!   attempt's copy-on-write upper folder at [`BUNDLE`], and the extra certificates dropped
//!   in [`ANCHOR`] so that a grader's `apt-get install ca-certificates` (whose
//!   `update-ca-certificates` rewrites the bundle) keeps them ([`for_container`]);
//! - for programs with stores of their own, [`env_vars`]: `SSL_CERT_FILE` (OpenSSL, Python's
//!   `ssl`, uv), `REQUESTS_CA_BUNDLE`, `CURL_CA_BUNDLE`, `PIP_CERT`, `NODE_EXTRA_CA_CERTS`,
//!   all naming the merged bundle.
//!
//! Nothing here holds a private key: only certificates enter the sandbox.

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use std::io;
use std::path::{Path, PathBuf};

/// The operator's setting: a PEM file of certificate authorities every sandboxed program
/// trusts while its phase has a network.
pub const EXTRA_CA_ENV: &str = "AKBENCH_SANDBOX_EXTRA_CA";

/// The bundle path Debian-family systems (and most images) read, and where the merged
/// bundle goes inside a container.
pub const BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

/// Where `update-ca-certificates` finds local authorities: the extra certificates are kept
/// here in a container, so a regenerated bundle still has them.
pub const ANCHOR: &str = "/usr/local/share/ca-certificates/akbench-extra.crt";

/// Host bundles, in the order looked for (Debian and derivatives; Fedora, RHEL).
pub const HOST_BUNDLES: &[&str] = &[BUNDLE, "/etc/pki/tls/certs/ca-bundle.crt"];

/// The variables naming the bundle for programs that do not read the system's.
pub const VARS: &[&str] = &[
    "SSL_CERT_FILE",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "PIP_CERT",
    "NODE_EXTRA_CA_CERTS",
];

/// Certificates only (PEM), checked: at least one, each one parses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Extra {
    pem: String,
}

impl Extra {
    /// The certificates of `text` (read from `source`, named in the error), re-encoded one
    /// after the other; anything but `CERTIFICATE` blocks (a private key) is left out.
    pub fn parse(text: &str, source: &str) -> Result<Extra, String> {
        let mut pem = String::new();
        for c in CertificateDer::pem_slice_iter(text.as_bytes()) {
            let der = c.map_err(|e| {
                format!("{source}: not a PEM certificate file ({e}); fix: name a file of `-----BEGIN CERTIFICATE-----` blocks")
            })?;
            pem.push_str(&encode(der.as_ref()));
        }
        if pem.is_empty() {
            return Err(format!(
                "{source}: holds no certificate; fix: name a file of `-----BEGIN CERTIFICATE-----` blocks"
            ));
        }
        Ok(Extra { pem })
    }

    /// The operator's [`EXTRA_CA_ENV`] file (`None` when unset or empty); the error names the
    /// variable, the file and the fix.
    pub fn from_env() -> Result<Option<Extra>, String> {
        let Some(path) = std::env::var_os(EXTRA_CA_ENV).filter(|v| !v.is_empty()) else {
            return Ok(None);
        };
        let path = PathBuf::from(path);
        let source = format!("{EXTRA_CA_ENV}={}", path.display());
        let text = read_operator_pem(&path)
            .map_err(|e| format!("{source}: {e}; fix: name a readable PEM file, or unset it"))?;
        Extra::parse(&text, &source).map(Some)
    }

    /// Both sets, `self`'s first.
    pub fn and(&self, other: &Extra) -> Extra {
        Extra {
            pem: format!("{}{}", self.pem, other.pem),
        }
    }

    /// The certificates, PEM.
    pub fn pem(&self) -> &str {
        &self.pem
    }
}

/// PEM of one DER certificate (64-column base64 lines).
fn encode(der: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut b64 = String::with_capacity(der.len() * 4 / 3 + 4);
    for chunk in der.chunks(3) {
        let n = chunk.len();
        let v = (u32::from(chunk[0]) << 16)
            | (u32::from(*chunk.get(1).unwrap_or(&0)) << 8)
            | u32::from(*chunk.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= n {
                b64.push(char::from(T[((v >> (18 - 6 * i)) & 63) as usize]));
            } else {
                b64.push('=');
            }
        }
    }
    let mut out = String::from("-----BEGIN CERTIFICATE-----\n");
    for line in b64.as_bytes().chunks(64) {
        out.push_str(std::str::from_utf8(line).unwrap_or_default());
        out.push('\n');
    }
    out.push_str("-----END CERTIFICATE-----\n");
    out
}

/// `base` (a system bundle, possibly empty) followed by the extra certificates (pure).
pub fn merged(base: &str, extra: &Extra) -> String {
    let mut s = base.to_string();
    if !s.is_empty() && !s.ends_with('\n') {
        s.push('\n');
    }
    s.push_str("# akbench: the worker's extra certificate authorities\n");
    s.push_str(extra.pem());
    s
}

/// [`VARS`], each naming `bundle` (the path inside the sandbox).
pub fn env_vars(bundle: &str) -> Vec<(&'static str, String)> {
    VARS.iter().map(|v| (*v, bundle.to_string())).collect()
}

/// A merged bundle for the `sandbox` runtime: the file written in `scratch` and the path it
/// is bound at inside (the host's bundle's, else its own path, exposed read-only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bind {
    /// The merged bundle, on the host.
    pub file: PathBuf,
    /// Where the programs inside read it.
    pub inside: PathBuf,
}

/// The most a certificate bundle (the operator's, the host's, an image's) may hold.
pub const MAX_BUNDLE_BYTES: u64 = 8 * 1024 * 1024;

/// An operator's PEM file (a setting's path: links followed), bounded.
pub fn read_operator_pem(path: &Path) -> Result<String, String> {
    akbench_core::bounded_read::read_text(
        path,
        MAX_BUNDLE_BYTES,
        akbench_core::bounded_read::Links::Follow,
    )
    .map_err(|e| format!("cannot read it ({e})"))
}

/// Writes the host's bundle plus `extra` into `scratch` (see [`Bind`]).
pub fn for_sandbox(extra: &Extra, scratch: &Path) -> io::Result<Bind> {
    let host = HOST_BUNDLES.iter().map(Path::new).find(|p| p.is_file());
    let base = match host {
        // The host's own bundle (a system file; links followed, as every program does).
        Some(p) => akbench_core::bounded_read::read_text(
            p,
            MAX_BUNDLE_BYTES,
            akbench_core::bounded_read::Links::Follow,
        )
        .map_err(|e| io::Error::other(format!("{}: {e}", p.display())))?,
        None => String::new(),
    };
    let file = scratch.join("ca-certificates.crt");
    write_readable(&file, &merged(&base, extra))?;
    let inside = host.map_or_else(|| file.clone(), Path::to_path_buf);
    Ok(Bind { file, inside })
}

/// Writes into `upper` (the container's copy-on-write folder, over `rootfs`) the image's
/// bundle plus `extra` at [`BUNDLE`] and `extra` at [`ANCHOR`], folders made as the
/// image's (mode) and files owned by `owner` (the sandbox user, which is the image's root
/// inside) when given.
pub fn for_container(
    extra: &Extra,
    rootfs: &Path,
    upper: &Path,
    owner: Option<(u32, u32)>,
) -> io::Result<()> {
    let rel = |p: &str| PathBuf::from(p.trim_start_matches('/'));
    let base = image_bundle(rootfs, &rel(BUNDLE));
    for (path, text) in [(BUNDLE, merged(&base, extra)), (ANCHOR, extra.pem().into())] {
        let rel = rel(path);
        if let Some(parent) = rel.parent() {
            let mut at = PathBuf::new();
            for part in parent.components() {
                at.push(part);
                let dir = upper.join(&at);
                if dir.is_dir() {
                    continue;
                }
                std::fs::create_dir(&dir)?;
                let mode = std::fs::metadata(rootfs.join(&at))
                    .map(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o7777)
                    .unwrap_or(0o755);
                std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(mode))?;
                if let Some((u, g)) = owner {
                    std::os::unix::fs::lchown(&dir, Some(u), Some(g))?;
                }
            }
        }
        let file = upper.join(&rel);
        // A link in the image (Debian's bundle is a file; some images link it) is replaced.
        let _ = std::fs::remove_file(&file);
        write_readable(&file, &text)?;
        if let Some((u, g)) = owner {
            std::os::unix::fs::lchown(&file, Some(u), Some(g))?;
        }
    }
    Ok(())
}

/// The image's own bundle at `rel`, empty when it has none: its links resolved inside the
/// image's root (an image's `/etc/ssl/certs/ca-certificates.crt -> /etc/shadow`, or a link
/// climbing with `..`, must never read the worker's file into the sandbox), the file itself
/// read without following a link, bounded.
fn image_bundle(rootfs: &Path, rel: &Path) -> String {
    let Ok(inside) = crate::root_path::resolve(rootfs, rel) else {
        return String::new();
    };
    akbench_core::bounded_read::read_text(
        &rootfs.join(inside),
        MAX_BUNDLE_BYTES,
        akbench_core::bounded_read::Links::Refuse,
    )
    .unwrap_or_default()
}

fn write_readable(path: &Path, text: &str) -> io::Result<()> {
    std::fs::write(path, text)?;
    std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o644))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ca_pem() -> String {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut p = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        p.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        p.self_signed(&key).unwrap().pem()
    }

    /// An image whose bundle is a link out of its root (absolute, or climbing with `..`, or
    /// through a linked folder) never brings the worker's file into the sandbox: the links
    /// resolve inside the image's root.
    #[test]
    fn an_image_bundle_linking_outside_its_root_reads_nothing_of_the_worker() {
        let host = tempfile::tempdir().unwrap();
        let secret = host.path().join("secret");
        std::fs::write(&secret, "WORKER SECRET\n").unwrap();
        let rel = Path::new("etc/ssl/certs/ca-certificates.crt");
        type Make<'a> = Box<dyn Fn(&Path) + 'a>;
        let cases: [(&str, Make); 4] = [
            (
                "absolute",
                Box::new(|r: &Path| {
                    std::os::unix::fs::symlink(&secret, r.join(rel)).unwrap();
                }),
            ),
            (
                "climbing",
                Box::new(|r: &Path| {
                    let up = "../".repeat(20);
                    let target = format!(
                        "{up}{}",
                        secret.display().to_string().trim_start_matches('/')
                    );
                    std::os::unix::fs::symlink(target, r.join(rel)).unwrap();
                }),
            ),
            (
                "linked folder",
                Box::new(|r: &Path| {
                    std::fs::remove_dir(r.join("etc/ssl/certs")).unwrap();
                    std::fs::create_dir_all(host.path().join("certs")).unwrap();
                    std::fs::write(
                        host.path().join("certs/ca-certificates.crt"),
                        "WORKER SECRET\n",
                    )
                    .unwrap();
                    std::os::unix::fs::symlink(host.path().join("certs"), r.join("etc/ssl/certs"))
                        .unwrap();
                }),
            ),
            (
                "own file",
                Box::new(|r: &Path| {
                    std::fs::write(r.join(rel), "IMAGE BUNDLE\n").unwrap();
                }),
            ),
        ];
        for (name, make) in cases {
            let root = tempfile::tempdir().unwrap();
            std::fs::create_dir_all(root.path().join("etc/ssl/certs")).unwrap();
            make(root.path());
            let got = image_bundle(root.path(), rel);
            assert!(!got.contains("WORKER SECRET"), "{name}: {got:?}");
            if name == "own file" {
                assert_eq!(got, "IMAGE BUNDLE\n");
            }
        }
    }

    #[test]
    fn only_certificates_are_taken_and_bad_files_are_named() {
        let ca = ca_pem();
        let key = "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n";
        let e = Extra::parse(&format!("{ca}{key}"), "f").unwrap();
        // Re-encoded byte for byte (rcgen writes 64-column PEM too), the key left out.
        assert_eq!(e.pem().replace("\r\n", "\n"), ca.replace("\r\n", "\n"));
        assert!(!e.pem().contains("PRIVATE"));
        let cases = [
            ("", "f: holds no certificate; fix: "),
            (key, "f: holds no certificate"),
            (
                "-----BEGIN CERTIFICATE-----\n!!!\n-----END CERTIFICATE-----\n",
                "f: not a PEM certificate file",
            ),
        ];
        for (text, want) in cases {
            let err = Extra::parse(text, "f").unwrap_err();
            assert!(err.starts_with(want), "{text:?}: {err}");
        }
        let two = e.and(&e);
        assert_eq!(two.pem().matches("BEGIN CERTIFICATE").count(), 2);
    }

    #[test]
    fn the_merged_bundle_keeps_the_system_one_first() {
        let e = Extra::parse(&ca_pem(), "f").unwrap();
        for base in ["", "SYSTEM", "SYSTEM\n"] {
            let m = merged(base, &e);
            assert!(m.starts_with(base), "{m}");
            assert!(m.ends_with(e.pem()), "{m}");
            if !base.is_empty() {
                assert!(m.starts_with("SYSTEM\n# akbench"), "{m}");
            }
        }
        let vars = env_vars(BUNDLE);
        assert_eq!(vars.len(), VARS.len());
        assert!(vars.iter().all(|(_, v)| v == BUNDLE));
    }

    #[test]
    fn a_container_gets_the_bundle_and_the_anchor_in_its_upper_folder() {
        let d = tempfile::tempdir().unwrap();
        let (root, upper) = (d.path().join("root"), d.path().join("upper"));
        std::fs::create_dir_all(root.join("etc/ssl/certs")).unwrap();
        std::fs::write(root.join("etc/ssl/certs/ca-certificates.crt"), "IMAGE\n").unwrap();
        std::fs::create_dir_all(&upper).unwrap();
        let e = Extra::parse(&ca_pem(), "f").unwrap();
        for_container(&e, &root, &upper, None).unwrap();
        let b = std::fs::read_to_string(upper.join("etc/ssl/certs/ca-certificates.crt")).unwrap();
        assert!(b.starts_with("IMAGE\n") && b.ends_with(e.pem()), "{b}");
        let a = std::fs::read_to_string(upper.join(ANCHOR.trim_start_matches('/'))).unwrap();
        assert_eq!(a, e.pem());
        // An image with no bundle (no ca-certificates package yet): the extra ones alone.
        let (root2, upper2) = (d.path().join("root2"), d.path().join("upper2"));
        std::fs::create_dir_all(&root2).unwrap();
        std::fs::create_dir_all(&upper2).unwrap();
        for_container(&e, &root2, &upper2, None).unwrap();
        let b = std::fs::read_to_string(upper2.join("etc/ssl/certs/ca-certificates.crt")).unwrap();
        assert!(b.starts_with("# akbench") && b.ends_with(e.pem()), "{b}");
    }
}
