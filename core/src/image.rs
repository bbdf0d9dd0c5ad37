//! OCI images as tasks name them: references, digests, and the rules a worker applies when
//! it pulls and unpacks one (pure; the network and file system are the worker's
//! `image` module).
//!
//! - [`ImageRef`]: `registry/repository[:tag][@sha256:...]`, as `environment.image` holds it;
//!   a tag is resolved to a digest when a run is planned, and every record names the digest.
//! - [`layer`]: what a tar entry of a layer does to the root file system (path checks,
//!   whiteouts).
//! - [`manifest`]: manifests, indexes and the image configuration (working directory,
//!   environment, user).
//! - [`registry`]: registry authentication (docker `config.json`, token challenges) and the
//!   plain-HTTP allow-list (`AKBENCH_INSECURE_REGISTRIES`).
//! - [`cache`]: which unpacked images the bounded cache removes (least recently used, never
//!   one in use).
//! - [`limits`]: the caps on an image (configuration size, layers, unpacked bytes and
//!   entries) and their overrides.

pub mod cache;
pub mod layer;
pub mod limits;
pub mod manifest;
pub mod registry;

use serde::{Deserialize, Serialize};
use std::fmt;

/// The registry a reference without one names (Docker's convention).
pub const DEFAULT_REGISTRY: &str = "docker.io";

/// A parsed image reference.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ImageRef {
    /// `host[:port]` of the registry.
    pub registry: String,
    /// The repository path (`library/debian`, `akbench/base`).
    pub repository: String,
    /// The tag, when written.
    pub tag: Option<String>,
    /// The manifest digest (`sha256:` and 64 lowercase hex), when written or resolved.
    pub digest: Option<String>,
}

/// Why a reference was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{reference}` is not an image reference: {problem}")]
pub struct RefError {
    /// The reference as given (elided when long).
    pub reference: String,
    /// What is wrong.
    pub problem: String,
}

/// True when `s` is `sha256:` followed by 64 lowercase hex digits.
pub fn is_digest(s: &str) -> bool {
    s.strip_prefix("sha256:")
        .is_some_and(|h| h.len() == 64 && h.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
}

/// The hex part of a digest checked by [`is_digest`] (for file names).
pub fn digest_hex(digest: &str) -> Option<&str> {
    is_digest(digest).then(|| &digest[7..])
}

fn is_repo_component(c: &str) -> bool {
    // OCI distribution: [a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*
    let b = c.as_bytes();
    if b.is_empty() || !b[0].is_ascii_alphanumeric() || !b[b.len() - 1].is_ascii_alphanumeric() {
        return false;
    }
    if c.bytes().any(|x| x.is_ascii_uppercase()) {
        return false;
    }
    let mut run = String::new();
    for ch in c.chars() {
        if ch.is_ascii_alphanumeric() {
            if !run.is_empty()
                && !matches!(run.as_str(), "." | "_" | "__")
                && !run.chars().all(|x| x == '-')
            {
                return false;
            }
            run.clear();
        } else if matches!(ch, '.' | '_' | '-') {
            run.push(ch);
        } else {
            return false;
        }
    }
    true
}

fn is_tag(t: &str) -> bool {
    // [\w][\w.-]{0,127}
    !t.is_empty()
        && t.len() <= 128
        && (t.as_bytes()[0].is_ascii_alphanumeric() || t.as_bytes()[0] == b'_')
        && t.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

fn is_registry_host(h: &str) -> bool {
    let (host, port) = match h.rsplit_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (h, None),
    };
    let port_ok = port.is_none_or(|p| {
        !p.is_empty()
            && p.len() <= 5
            && p.bytes().all(|b| b.is_ascii_digit())
            && p.parse::<u32>().is_ok_and(|n| (1..=65535).contains(&n))
    });
    port_ok
        && !host.is_empty()
        && host.split('.').all(|l| {
            !l.is_empty()
                && !l.starts_with('-')
                && !l.ends_with('-')
                && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
}

impl ImageRef {
    /// Parses `[registry/]repository[:tag][@sha256:<64 hex>]`. The first path component is
    /// the registry when it has a `.` or `:` or is `localhost`; else the registry is
    /// `docker.io` (and a one-component repository is under `library/`).
    pub fn parse(s: &str) -> Result<ImageRef, RefError> {
        let err = |problem: &str| RefError {
            reference: crate::limits::elide(s),
            problem: problem.to_string(),
        };
        if s.is_empty() {
            return Err(err("it is empty"));
        }
        if s.len() > 512 {
            return Err(err("it is longer than 512 characters"));
        }
        if s.trim() != s || s.contains(char::is_whitespace) {
            return Err(err("it contains white space"));
        }
        let (name_tag, digest) = match s.split_once('@') {
            Some((n, d)) => {
                if !is_digest(d) {
                    return Err(err(
                        "the digest after `@` is not `sha256:` and 64 lowercase hex digits",
                    ));
                }
                (n, Some(d.to_string()))
            }
            None => (s, None),
        };
        // A tag is after the last `:` that follows the last `/` (a registry port is before it).
        let last_slash = name_tag.rfind('/').map_or(0, |i| i + 1);
        let (name, tag) = match name_tag[last_slash..].rfind(':') {
            Some(i) => {
                let t = &name_tag[last_slash + i + 1..];
                if !is_tag(t) {
                    return Err(err("the tag may hold only letters, digits, `_`, `.` and `-` (at most 128, not starting with `.` or `-`)"));
                }
                (&name_tag[..last_slash + i], Some(t.to_string()))
            }
            None => (name_tag, None),
        };
        let mut parts: Vec<&str> = name.split('/').collect();
        let registry = if parts.len() > 1
            && (parts[0].contains('.') || parts[0].contains(':') || parts[0] == "localhost")
        {
            let r = parts.remove(0);
            if !is_registry_host(r) {
                return Err(err("the registry must be a host name or address with an optional port (`host:5000`)"));
            }
            r.to_string()
        } else {
            DEFAULT_REGISTRY.to_string()
        };
        if parts.is_empty() || !parts.iter().all(|c| is_repo_component(c)) {
            return Err(err("the repository must be lowercase path components of letters and digits separated by `.`, `_`, `__` or `-` (e.g. `akbench/base`)"));
        }
        if registry == DEFAULT_REGISTRY && parts.len() == 1 {
            parts.insert(0, "library");
        }
        Ok(ImageRef {
            registry,
            repository: parts.join("/"),
            tag,
            digest,
        })
    }

    /// What the manifest request names: the digest when pinned, else the tag (`latest` when
    /// neither was written).
    pub fn reference(&self) -> &str {
        self.digest
            .as_deref()
            .or(self.tag.as_deref())
            .unwrap_or("latest")
    }

    /// The pinned form `registry/repository@sha256:...` (the tag dropped: the digest alone
    /// names the content).
    pub fn pinned(&self, digest: &str) -> String {
        format!("{}/{}@{digest}", self.registry, self.repository)
    }

    /// This reference with its digest set.
    pub fn with_digest(&self, digest: &str) -> ImageRef {
        ImageRef {
            digest: Some(digest.to_string()),
            ..self.clone()
        }
    }
}

impl fmt::Display for ImageRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.registry, self.repository)?;
        if let Some(t) = &self.tag {
            write!(f, ":{t}")?;
        }
        if let Some(d) = &self.digest {
            write!(f, "@{d}")?;
        }
        Ok(())
    }
}

/// Minimal standard base64 decoding (docker `config.json`'s `auth`); `None` when malformed.
pub fn base64_decode(s: &str) -> Option<Vec<u8>> {
    let val = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let s = s.trim().trim_end_matches('=');
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in s.bytes() {
        acc = (acc << 6) | val(c)?;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    (bits < 6).then_some(out)
}

/// Standard base64 encoding with padding (HTTP basic authentication).
pub fn base64_encode(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |acc, (i, b)| acc | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(A[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests;
