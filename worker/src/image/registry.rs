//! The registry client: manifests and blobs by digest, with docker `config.json`
//! credentials and token challenges. Every blob is hashed while it streams into a temporary
//! file and only renamed into the content-addressed store when its digest matches.

use super::http::{self, Response};
use super::ImageError;
use akbench_core::image::manifest::{self, Descriptor, Document};
use akbench_core::image::registry::{
    api_host, docker_config_auth, parse_challenge, scheme, Challenge, Credentials,
};
use akbench_core::image::{base64_encode, ImageRef};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The largest manifest or configuration accepted.
pub const MAX_DOCUMENT_BYTES: u64 = 4 << 20;

/// Where credentials come from: `AKBENCH_REGISTRY_AUTH` (a docker `config.json`, e.g. a
/// mounted Kubernetes pull secret's `.dockerconfigjson`), else `$DOCKER_CONFIG/config.json`,
/// else `~/.docker/config.json`.
pub fn credentials_file() -> Option<PathBuf> {
    if let Ok(p) = std::env::var("AKBENCH_REGISTRY_AUTH") {
        return Some(PathBuf::from(p));
    }
    if let Ok(d) = std::env::var("DOCKER_CONFIG") {
        return Some(Path::new(&d).join("config.json"));
    }
    std::env::var("HOME")
        .ok()
        .map(|h| Path::new(&h).join(".docker/config.json"))
}

/// A client for one pull (holds tokens per repository).
#[derive(Debug)]
pub struct Client {
    insecure: Vec<String>,
    auth_file: Option<PathBuf>,
    tokens: Mutex<BTreeMap<String, String>>,
}

impl Client {
    /// A client allowing plain HTTP to `insecure` (`host:port`), reading credentials from
    /// `auth_file` when it exists.
    pub fn new(insecure: Vec<String>, auth_file: Option<PathBuf>) -> Self {
        Self {
            insecure,
            auth_file,
            tokens: Mutex::new(BTreeMap::new()),
        }
    }

    fn credentials(&self, registry: &str) -> Result<Option<Credentials>, ImageError> {
        let Some(f) = &self.auth_file else {
            return Ok(None);
        };
        if std::fs::metadata(f).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound) {
            return Ok(None);
        }
        let text = akbench_core::bounded_read::ReadKind::RegistryAuth
            .read_text(f, akbench_core::bounded_read::Links::Follow)
            .map_err(|e| ImageError::Credentials {
                file: f.clone(),
                problem: format!("it {e}"),
            })?;
        docker_config_auth(&text, registry).map_err(|problem| ImageError::Credentials {
            file: f.clone(),
            problem,
        })
    }

    fn base(&self, image: &ImageRef) -> String {
        format!(
            "{}://{}/v2/{}",
            scheme(&image.registry, &self.insecure),
            api_host(&image.registry),
            image.repository
        )
    }

    /// GET `path` (under the repository) with the repository's credentials, answering a
    /// token or basic challenge once.
    async fn get(
        &self,
        image: &ImageRef,
        path: &str,
        headers: &[(String, String)],
    ) -> Result<Response, ImageError> {
        let url = format!("{}/{path}", self.base(image));
        let fail = |problem: String| ImageError::Registry {
            image: image.to_string(),
            problem,
        };
        let allow = &self.insecure;
        let key = format!("{}/{}", image.registry, image.repository);
        let token = self.tokens.lock().ok().and_then(|t| t.get(&key).cloned());
        let resp = http::get(&url, headers, token.as_deref(), allow)
            .await
            .map_err(|problem| ImageError::Unavailable {
                image: image.to_string(),
                problem,
            })?;
        if resp.status != 401 {
            return Ok(resp);
        }
        let creds = self.credentials(&image.registry)?;
        let challenge = resp.header("www-authenticate").and_then(parse_challenge);
        let auth = match (challenge, &creds) {
            (Some(Challenge::Basic), Some(c)) => format!(
                "Basic {}",
                base64_encode(format!("{}:{}", c.username, c.password).as_bytes())
            ),
            (Some(Challenge::Bearer { realm, service, scope }), _) => {
                let mut u = url::Url::parse(&realm)
                    .map_err(|e| fail(format!("the token realm `{realm}` is not a URL: {e}")))?;
                if let Some(s) = service {
                    u.query_pairs_mut().append_pair("service", &s);
                }
                let scope = scope.unwrap_or_else(|| format!("repository:{}:pull", image.repository));
                u.query_pairs_mut().append_pair("scope", &scope);
                let basic = creds.as_ref().map(|c| {
                    format!(
                        "Basic {}",
                        base64_encode(format!("{}:{}", c.username, c.password).as_bytes())
                    )
                });
                let t = http::get(u.as_str(), &[], basic.as_deref(), allow)
                    .await
                    .map_err(fail)?;
                if t.status != 200 {
                    return Err(fail(format!("the token service answered {}", t.status)));
                }
                let body = t.bytes(1 << 20).await.map_err(fail)?;
                let v: serde_json::Value = serde_json::from_slice(&body)
                    .map_err(|e| fail(format!("the token answer is not JSON: {e}")))?;
                let tok = v
                    .get("token")
                    .or_else(|| v.get("access_token"))
                    .and_then(|x| x.as_str())
                    .ok_or_else(|| fail("the token answer holds no token".into()))?;
                format!("Bearer {tok}")
            }
            _ => {
                return Err(fail(format!(
                    "it refused access (401) and {}; fix: `docker login {}` (or put its credentials in the file AKBENCH_REGISTRY_AUTH names)",
                    match &self.auth_file {
                        Some(f) => format!("{} holds no credentials for it", f.display()),
                        None => "no credentials file is set".into(),
                    },
                    image.registry
                )))
            }
        };
        if let Ok(mut t) = self.tokens.lock() {
            t.insert(key, auth.clone());
        }
        let resp = http::get(&url, headers, Some(&auth), allow)
            .await
            .map_err(fail)?;
        if resp.status == 401 || resp.status == 403 {
            return Err(fail(format!(
                "it refused the credentials ({}); fix: check the login for {}",
                resp.status, image.registry
            )));
        }
        Ok(resp)
    }

    /// The manifest `reference` (a tag or digest) names: its bytes, media type and digest.
    async fn manifest(
        &self,
        image: &ImageRef,
        reference: &str,
    ) -> Result<(Vec<u8>, String, String), ImageError> {
        let fail = |problem: String| ImageError::Registry {
            image: image.to_string(),
            problem,
        };
        let resp = self
            .get(
                image,
                &format!("manifests/{reference}"),
                &[("accept".into(), manifest::ACCEPT.into())],
            )
            .await?;
        if resp.status == 404 {
            return Err(fail(format!(
                "it has no manifest `{reference}`; fix: push the image, or correct the reference"
            )));
        }
        if resp.status >= 500 || resp.status == 429 {
            return Err(ImageError::Unavailable {
                image: image.to_string(),
                problem: format!(
                    "the registry answered {} to the manifest request; fix: try again when it is back",
                    resp.status
                ),
            });
        }
        if resp.status != 200 {
            return Err(fail(format!(
                "the manifest request answered {}",
                resp.status
            )));
        }
        let media = resp.header("content-type").unwrap_or("").to_string();
        let bytes = resp.bytes(MAX_DOCUMENT_BYTES).await.map_err(fail)?;
        let digest = akbench_core::digest::digest_bytes(&bytes);
        if akbench_core::image::is_digest(reference) && digest != reference {
            return Err(ImageError::Tampered {
                image: image.to_string(),
                blob: reference.to_string(),
                got: digest,
            });
        }
        Ok((bytes, media, digest))
    }

    /// Resolves `image` (its tag, or its digest) to the digest of the image manifest for
    /// this platform (an index is followed to the linux manifest of this architecture).
    pub async fn resolve(&self, image: &ImageRef) -> Result<String, ImageError> {
        let (bytes, media, digest) = self.manifest(image, image.reference()).await?;
        let fail = |problem: String| ImageError::Registry {
            image: image.to_string(),
            problem,
        };
        match manifest::parse(&bytes, &media).map_err(fail)? {
            Document::Image { .. } => Ok(digest),
            Document::Index(list) => {
                let d = manifest::choose(&list, manifest::host_architecture()).map_err(fail)?;
                Ok(d.digest)
            }
        }
    }

    /// The image manifest with digest `digest`: its configuration and layers.
    pub async fn image_manifest(
        &self,
        image: &ImageRef,
        digest: &str,
    ) -> Result<(Descriptor, Vec<Descriptor>), ImageError> {
        let (bytes, media, _) = self.manifest(image, digest).await?;
        match manifest::parse(&bytes, &media).map_err(|problem| ImageError::Registry {
            image: image.to_string(),
            problem,
        })? {
            Document::Image { config, layers } => Ok((config, layers)),
            Document::Index(_) => Err(ImageError::Registry {
                image: image.to_string(),
                problem: format!("{digest} is an index, not an image manifest; fix: pin the platform's manifest (akbench resolves tags to it)"),
            }),
        }
    }

    /// Downloads blob `d` into `dest` (content-addressed): streamed into a temporary file in
    /// `tmp_dir`, hashed on the way, renamed into place only when its digest and size
    /// match; otherwise the temporary file is removed and nothing is stored.
    pub async fn blob(
        &self,
        image: &ImageRef,
        d: &Descriptor,
        tmp_dir: &Path,
        dest: &Path,
    ) -> Result<(), ImageError> {
        let fail = |problem: String| ImageError::Registry {
            image: image.to_string(),
            problem,
        };
        let resp = self.get(image, &format!("blobs/{}", d.digest), &[]).await?;
        if resp.status != 200 {
            return Err(fail(format!("blob {} answered {}", d.digest, resp.status)));
        }
        let io = |path: &Path, e: std::io::Error| ImageError::Io {
            path: path.to_path_buf(),
            source: e,
        };
        std::fs::create_dir_all(tmp_dir).map_err(|e| io(tmp_dir, e))?;
        let tmp = tmp_dir.join(format!("blob-{}", uuid::Uuid::now_v7()));
        let mut file = std::fs::File::create(&tmp).map_err(|e| io(&tmp, e))?;
        // Removed however this ends, also when the pull's deadline drops this future.
        let _partial = Partial(tmp.clone());
        let mut hasher = Sha256::new();
        let read = resp
            .read_into(d.size, |b| {
                hasher.update(b);
                file.write_all(b)
                    .map_err(|e| format!("failed to write {}: {e}", tmp.display()))
            })
            .await;
        let got = format!("sha256:{}", hex::encode(hasher.finalize()));
        let checked = match read {
            Err(problem) => Err(fail(format!("blob {}: {problem}", d.digest))),
            Ok(n) if got != d.digest => {
                let _ = n;
                Err(ImageError::Tampered {
                    image: image.to_string(),
                    blob: d.digest.clone(),
                    got,
                })
            }
            Ok(n) if n != d.size => Err(fail(format!(
                "blob {} has {n} bytes, the manifest says {}",
                d.digest, d.size
            ))),
            Ok(_) => file.sync_all().map_err(|e| io(&tmp, e)),
        };
        drop(file);
        if let Err(e) = checked {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
        if let Some(p) = dest.parent() {
            std::fs::create_dir_all(p).map_err(|e| io(p, e))?;
        }
        std::fs::rename(&tmp, dest).map_err(|e| io(dest, e))
    }
}

/// A download in progress: its temporary file is removed when this is dropped (after a
/// rename, there is nothing left to remove).
struct Partial(PathBuf);

impl Drop for Partial {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}
