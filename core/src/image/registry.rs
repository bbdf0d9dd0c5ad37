//! Talking to a registry: which credentials, which scheme, which token challenge.

use std::collections::BTreeMap;

/// The variable listing registries reachable over plain HTTP (`host:port`, comma-separated).
pub const INSECURE_VAR: &str = "AKBENCH_INSECURE_REGISTRIES";

/// Parses an insecure-registry list; an entry that is not `host:port` is refused by name.
pub fn insecure_list(value: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    for e in value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let ok = e
            .rsplit_once(':')
            .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok_and(|n| n > 0))
            && super::ImageRef::parse(&format!("{e}/x")).is_ok_and(|r| r.registry == e);
        if !ok {
            return Err(format!(
                "{INSECURE_VAR}: `{}` is not `host:port`; fix: list registries as host:port, comma-separated (e.g. 127.0.0.1:5000)",
                crate::limits::elide(e)
            ));
        }
        out.push(e.to_string());
    }
    Ok(out)
}

/// `http` for a registry on the insecure list, `https` otherwise.
pub fn scheme(registry: &str, insecure: &[String]) -> &'static str {
    if insecure.iter().any(|i| i == registry) {
        "http"
    } else {
        "https"
    }
}

/// The host a registry's API is served from (`docker.io` is `registry-1.docker.io`).
pub fn api_host(registry: &str) -> &str {
    if registry == super::DEFAULT_REGISTRY {
        "registry-1.docker.io"
    } else {
        registry
    }
}

/// A user name and password (or token) for a registry.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    /// User name.
    pub username: String,
    /// Password or identity token.
    pub password: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Credentials({}, <redacted>)", self.username)
    }
}

/// The credentials docker's `config.json` (`auths`) holds for `registry`: the `auth` field
/// (base64 of `user:password`) or `username` and `password`. Keys may be written as
/// `host`, `https://host`, `http://host/v1/` (Docker Hub's legacy key). A malformed file is an
/// error naming what is wrong.
pub fn docker_config_auth(json: &str, registry: &str) -> Result<Option<Credentials>, String> {
    #[derive(serde::Deserialize)]
    struct File {
        #[serde(default)]
        auths: BTreeMap<String, Entry>,
    }
    #[derive(serde::Deserialize)]
    struct Entry {
        #[serde(default)]
        auth: Option<String>,
        #[serde(default)]
        username: Option<String>,
        #[serde(default)]
        password: Option<String>,
        #[serde(default)]
        identitytoken: Option<String>,
    }
    let f: File =
        serde_json::from_str(json).map_err(|e| format!("is not a docker config file: {e}"))?;
    let host_of = |k: &str| {
        let k = k
            .trim_start_matches("https://")
            .trim_start_matches("http://");
        k.split('/').next().unwrap_or("").to_string()
    };
    let wanted: Vec<&str> = if registry == super::DEFAULT_REGISTRY {
        vec!["docker.io", "index.docker.io", "registry-1.docker.io"]
    } else {
        vec![registry]
    };
    let Some((key, e)) = f
        .auths
        .iter()
        .find(|(k, _)| wanted.contains(&host_of(k).as_str()))
    else {
        return Ok(None);
    };
    if let Some(a) = e.auth.as_deref().filter(|a| !a.is_empty()) {
        let raw = super::base64_decode(a)
            .and_then(|b| String::from_utf8(b).ok())
            .ok_or_else(|| format!("auths.\"{key}\".auth is not base64 of `user:password`"))?;
        let (u, p) = raw
            .split_once(':')
            .ok_or_else(|| format!("auths.\"{key}\".auth does not hold `user:password`"))?;
        return Ok(Some(Credentials {
            username: u.to_string(),
            password: p.to_string(),
        }));
    }
    match (&e.username, &e.password, &e.identitytoken) {
        (Some(u), Some(p), _) => Ok(Some(Credentials {
            username: u.clone(),
            password: p.clone(),
        })),
        (_, _, Some(t)) => Ok(Some(Credentials {
            username: "<token>".into(),
            password: t.clone(),
        })),
        _ => Ok(None),
    }
}

/// A `WWW-Authenticate` challenge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Challenge {
    /// `Basic realm=...`: send the credentials with every request.
    Basic,
    /// `Bearer realm=...,service=...,scope=...`: fetch a token from `realm` first.
    Bearer {
        /// The token endpoint (an absolute URL).
        realm: String,
        /// `service`, when given.
        service: Option<String>,
        /// `scope`, when given.
        scope: Option<String>,
    },
}

/// Parses a `WWW-Authenticate` header value.
pub fn parse_challenge(header: &str) -> Option<Challenge> {
    let (scheme, rest) = header.trim().split_once(' ').unwrap_or((header.trim(), ""));
    if scheme.eq_ignore_ascii_case("basic") {
        return Some(Challenge::Basic);
    }
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let mut params = BTreeMap::new();
    let mut s = rest.trim();
    while !s.is_empty() {
        let (k, after) = s.split_once('=')?;
        let after = after.trim_start();
        let (v, next) = if let Some(q) = after.strip_prefix('"') {
            let end = q.find('"')?;
            (&q[..end], q[end + 1..].trim_start())
        } else {
            let end = after.find(',').unwrap_or(after.len());
            (after[..end].trim(), &after[end..])
        };
        params.insert(k.trim().to_ascii_lowercase(), v.to_string());
        s = next.trim_start_matches(',').trim_start();
    }
    Some(Challenge::Bearer {
        realm: params.remove("realm")?,
        service: params.remove("service"),
        scope: params.remove("scope"),
    })
}
