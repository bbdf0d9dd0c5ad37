//! Image manifests, indexes and configurations: what a worker reads to pull and run one.

use serde::Deserialize;
use std::collections::BTreeMap;

/// The media types a manifest request accepts (`Accept`).
pub const ACCEPT: &str = "application/vnd.oci.image.index.v1+json, application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.list.v2+json, application/vnd.docker.distribution.manifest.v2+json";

/// A content descriptor.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    /// Media type.
    #[serde(default)]
    pub media_type: String,
    /// `sha256:...`.
    pub digest: String,
    /// Bytes.
    pub size: u64,
    /// For an index entry: its platform.
    #[serde(default)]
    pub platform: Option<Platform>,
}

/// An index entry's platform.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Platform {
    /// `linux`.
    pub os: String,
    /// `amd64`, `arm64`.
    pub architecture: String,
}

/// A parsed manifest document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Document {
    /// An image manifest: its configuration and layers, lowest first.
    Image {
        /// The configuration blob.
        config: Descriptor,
        /// The layers.
        layers: Vec<Descriptor>,
    },
    /// An index (manifest list): one manifest per platform.
    Index(Vec<Descriptor>),
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Raw {
    #[serde(default)]
    media_type: Option<String>,
    #[serde(default)]
    config: Option<Descriptor>,
    #[serde(default)]
    layers: Option<Vec<Descriptor>>,
    #[serde(default)]
    manifests: Option<Vec<Descriptor>>,
}

/// Parses a manifest or index; `content_type` is the response's (the document's own
/// `mediaType` wins when present).
pub fn parse(bytes: &[u8], content_type: &str) -> Result<Document, String> {
    let raw: Raw =
        serde_json::from_slice(bytes).map_err(|e| format!("the manifest is not JSON: {e}"))?;
    let media = raw.media_type.as_deref().unwrap_or(content_type);
    let doc = match (raw.manifests, raw.config, raw.layers) {
        (Some(m), None, _) => Document::Index(m),
        (None, Some(config), Some(layers)) => Document::Image { config, layers },
        _ => {
            return Err(format!(
                "the manifest (`{media}`) is neither an image manifest nor an index"
            ))
        }
    };
    let check = |d: &Descriptor| {
        if super::is_digest(&d.digest) {
            Ok(())
        } else {
            Err(format!(
                "the manifest names `{}`, not a sha256 digest",
                crate::limits::elide(&d.digest)
            ))
        }
    };
    match &doc {
        Document::Index(m) => m.iter().try_for_each(check)?,
        Document::Image { config, layers } => {
            check(config)?;
            layers.iter().try_for_each(check)?;
        }
    }
    Ok(doc)
}

/// The Go architecture name of this machine's (`amd64`, `arm64`), for choosing in an index.
pub fn host_architecture() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        other => other,
    }
}

/// The manifest of `index` for `linux/<arch>`.
pub fn choose(index: &[Descriptor], arch: &str) -> Result<Descriptor, String> {
    index
        .iter()
        .find(|d| {
            d.platform
                .as_ref()
                .is_some_and(|p| p.os == "linux" && p.architecture == arch)
        })
        .cloned()
        .ok_or_else(|| {
            let have: Vec<String> = index
                .iter()
                .filter_map(|d| d.platform.as_ref())
                .map(|p| format!("{}/{}", p.os, p.architecture))
                .collect();
            format!(
                "the image has no linux/{arch} manifest (it has: {}); fix: build and push one for this platform",
                if have.is_empty() { "none".into() } else { have.join(", ") }
            )
        })
}

/// What the image configuration says about running a process.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunConfig {
    /// `Env` (`NAME=value`), in order.
    pub env: Vec<(String, String)>,
    /// `WorkingDir`, when set.
    pub working_dir: Option<String>,
    /// `User`, when set (`name`, `uid`, `uid:gid`).
    pub user: Option<String>,
    /// `Entrypoint` (empty when unset): kept running under a shared environment, with
    /// Harbor's command after it (`sleep infinity`) in place of the image's `Cmd`.
    pub entrypoint: Vec<String>,
    /// `Cmd` (empty when unset): a sidecar service's program after its entrypoint, unless
    /// its compose `command` (or `entrypoint`) replaces it.
    pub cmd: Vec<String>,
}

#[derive(Deserialize)]
struct RawConfigFile {
    #[serde(default)]
    config: Option<RawConfig>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct RawConfig {
    #[serde(default)]
    env: Option<Vec<String>>,
    #[serde(default)]
    working_dir: Option<String>,
    #[serde(default)]
    user: Option<String>,
    #[serde(default)]
    entrypoint: Option<Vec<String>>,
    #[serde(default)]
    cmd: Option<Vec<String>>,
}

/// Reads an image configuration blob.
pub fn run_config(bytes: &[u8]) -> Result<RunConfig, String> {
    let raw: RawConfigFile = serde_json::from_slice(bytes)
        .map_err(|e| format!("the image configuration is not JSON: {e}"))?;
    let Some(c) = raw.config else {
        return Ok(RunConfig::default());
    };
    let env = c
        .env
        .unwrap_or_default()
        .into_iter()
        .filter_map(|kv| {
            kv.split_once('=')
                .map(|(k, v)| (k.to_string(), v.to_string()))
        })
        .collect();
    let nonempty = |s: Option<String>| s.filter(|x| !x.trim().is_empty());
    Ok(RunConfig {
        env,
        working_dir: nonempty(c.working_dir),
        user: nonempty(c.user),
        entrypoint: c.entrypoint.unwrap_or_default(),
        cmd: c.cmd.unwrap_or_default(),
    })
}

/// Variables a worker never takes from the host into a container (the image's own
/// toolchain decides them).
pub const HOST_ONLY_VARS: &[&str] = &["PATH", "RUSTUP_HOME", "CARGO_HOME", "RUSTUP_TOOLCHAIN"];

/// The environment of a process in a container: the image's `Env`, then `spec` (the
/// worker's variables for the attempt: HOME, the adapter's, credentials, `AKBENCH_*`)
/// without the host's toolchain variables, `PATH` the image's (or a default) with
/// `extra_path` (the worker's agent CLIs, read-only) appended.
pub fn container_env(
    image: &RunConfig,
    spec: &BTreeMap<String, String>,
    extra_path: &[String],
) -> BTreeMap<String, String> {
    let mut env: BTreeMap<String, String> = image.env.iter().cloned().collect();
    for (k, v) in spec {
        if !HOST_ONLY_VARS.contains(&k.as_str()) {
            env.insert(k.clone(), v.clone());
        }
    }
    let mut path = image
        .env
        .iter()
        .rev()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.clone())
        .unwrap_or_else(|| "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into());
    for p in extra_path {
        if !path.split(':').any(|x| x == p) {
            path.push(':');
            path.push_str(p);
        }
    }
    env.insert("PATH".into(), path);
    env
}
