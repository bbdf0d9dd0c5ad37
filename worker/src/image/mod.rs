//! Task images on a worker: pulled by digest, verified, cached and unpacked once.
//!
//! Layout under the store's folder (`<cache>/images`, root-only):
//! - `blobs/sha256/<hex>`: verified blobs (a blob enters only after its digest matched);
//! - `roots/<hex>/rootfs` and `roots/<hex>/run.json`: an unpacked image (by manifest
//!   digest) and what its configuration says about running (env, working directory,
//!   user); `roots/<hex>/ready` is written last, its modification time is the last use;
//! - `roots/<hex>.lock`: held shared while an attempt uses the image, exclusively while it
//!   is unpacked or removed; `tmp/`: downloads and unpacks in progress.
//!
//! [`Store::gc`] keeps the store under its bound, least recently used first, never an image
//! in use (rules in `akbench_core::image::cache`).
//!
//! Bounds (docs/limits.md): an image's configuration size, layer count, unpacked bytes and
//! entries are capped ([`ImageLimits`], overridden by `AKBENCH_IMAGE_MAX_*`), checked from
//! the manifest before anything is downloaded and while each layer unpacks; every wait on
//! the registry has a stall timer ([`http::STALL`]) and each operation a total deadline
//! ([`Deadlines`], `AKBENCH_PULL_TIMEOUT_SEC`).

mod http;
mod registry;
mod task;
mod unpack;

pub use registry::{credentials_file, Client};
pub use task::{for_services, for_task, TaskImageError};

use akbench_core::image::layer::compression;
pub use akbench_core::image::limits::ImageLimits;
use akbench_core::image::manifest::{run_config, RunConfig};
use akbench_core::image::{digest_hex, ImageRef};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

/// Pulling or unpacking an image failed.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    /// The registry could not be reached or answered something unusable.
    #[error("failed to pull {image}: {problem}")]
    Registry {
        /// The reference.
        image: String,
        /// What went wrong, with the fix.
        problem: String,
    },
    /// The registry could not be reached, or answered a server error (5xx, 429): not the
    /// image's fault, and worth trying again (the CLI exits 3, not 2).
    #[error("failed to pull {image}: {problem}")]
    Unavailable {
        /// The reference.
        image: String,
        /// What went wrong.
        problem: String,
    },
    /// A blob's content does not match its digest: nothing of it was stored.
    #[error("failed to pull {image}: blob {blob} does not match its digest (got {got}); it was refused and nothing of it is cached")]
    Tampered {
        /// The reference.
        image: String,
        /// The expected digest.
        blob: String,
        /// The digest of what was served.
        got: String,
    },
    /// The credentials file is unreadable or malformed.
    #[error("failed to read registry credentials from {}: {problem}; fix: a docker config.json with `auths`", file.display())]
    Credentials {
        /// The file.
        file: PathBuf,
        /// What is wrong.
        problem: String,
    },
    /// The image is not pinned to a digest.
    #[error("failed to pull {0}: it is not pinned to a digest; fix: plan the run (a plan resolves tags) or write `@sha256:...`")]
    NotPinned(String),
    /// A layer could not be unpacked.
    #[error("failed to unpack {image}: {problem}")]
    Unpack {
        /// The reference.
        image: String,
        /// What went wrong.
        problem: String,
    },
    /// A local file operation failed.
    #[error("failed to write {}: {source}", path.display())]
    Io {
        /// Path.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
}

/// An unpacked image ready to run over, held in use until dropped.
#[derive(Debug)]
pub struct Unpacked {
    /// The manifest digest.
    pub digest: String,
    /// The root file system (read-only: runs see it through a copy-on-write view).
    pub rootfs: PathBuf,
    /// What the configuration says about running.
    pub run: RunConfig,
    /// True when this call pulled and unpacked it (false: it was cached).
    pub fetched: bool,
    _lock: std::fs::File,
}

/// Whether the unpacked image in `dir` is ready to use: unpacked to the end (`ready`
/// written) and the worker's own (a tree another user owns, as the sandbox user's cache of
/// earlier versions, is unpacked again: that user could have changed it).
fn ready(dir: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    dir.join("ready").is_file()
        && std::fs::symlink_metadata(dir.join("rootfs")).is_ok_and(|m| m.is_dir() && m.uid() == me)
}

/// The image store of a worker.
#[derive(Debug, Clone)]
pub struct Store {
    root: PathBuf,
    /// Registries reachable over plain HTTP.
    pub insecure: Vec<String>,
    /// The docker config.json with credentials.
    pub auth_file: Option<PathBuf>,
    /// Unpacked images owned by this user; `None` (what [`Store::from_env`] gives): the
    /// worker's own, so no sandbox user can change the cache.
    pub owner: Option<(u32, u32)>,
    /// The caps on an image (`AKBENCH_IMAGE_MAX_*`).
    pub limits: ImageLimits,
    /// How long a pull and a tag's resolution may take in total.
    pub deadlines: Deadlines,
}

/// The variable overriding [`Deadlines::pull`], in seconds.
pub const PULL_TIMEOUT_VAR: &str = "AKBENCH_PULL_TIMEOUT_SEC";

/// The total deadlines of the registry operations, besides the stall timer of each wait
/// ([`http::STALL`]): a registry that sends a byte now and then never stalls, and is still
/// given up on at the deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deadlines {
    /// Pulling an image not yet cached: its manifest and every blob (default 30 minutes).
    pub pull: std::time::Duration,
    /// Resolving a tag to a digest (its manifest, or an index and a manifest): at most
    /// 2 minutes, and never longer than `pull`.
    pub resolve: std::time::Duration,
}

/// The longest a tag's resolution may take.
pub const RESOLVE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(120);

impl Default for Deadlines {
    fn default() -> Self {
        Deadlines::with_pull(std::time::Duration::from_secs(1800))
    }
}

impl Deadlines {
    /// A pull deadline of `pull`; resolving gets at most [`RESOLVE_TIMEOUT`] of it.
    pub fn with_pull(pull: std::time::Duration) -> Self {
        Deadlines {
            pull,
            resolve: pull.min(RESOLVE_TIMEOUT),
        }
    }

    /// From [`PULL_TIMEOUT_VAR`] (seconds, within core's timeout range), else the default.
    pub fn from_env() -> Result<Self, String> {
        match std::env::var(PULL_TIMEOUT_VAR) {
            Err(_) => Ok(Deadlines::default()),
            Ok(text) => akbench_core::limits::parse_seconds(&text)
                .map(|s| Deadlines::with_pull(std::time::Duration::from_secs_f64(s)))
                .map_err(|e| {
                    format!(
                        "{PULL_TIMEOUT_VAR}: {e}; fix: set the seconds a pull may take in total"
                    )
                }),
        }
    }
}

/// `what` (a registry operation on `image`) within `deadline`; past it, an error naming
/// the operation, the deadline and its variable.
async fn within<T>(
    deadline: std::time::Duration,
    image: &ImageRef,
    operation: &str,
    what: impl std::future::Future<Output = Result<T, ImageError>>,
) -> Result<T, ImageError> {
    match tokio::time::timeout(deadline, what).await {
        Ok(r) => r,
        Err(_) => Err(ImageError::Registry {
            image: image.to_string(),
            problem: format!(
                "{operation} did not finish within its deadline of {} s (the registry {} is too slow, or sends a little now and then); fix: check the registry, or raise {PULL_TIMEOUT_VAR}",
                deadline.as_secs_f64(),
                image.registry
            ),
        }),
    }
}

fn lock(path: &Path, exclusive: bool) -> Result<std::fs::File, ImageError> {
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(|source| ImageError::Io {
            path: path.to_path_buf(),
            source,
        })?;
    let op = if exclusive {
        libc::LOCK_EX
    } else {
        libc::LOCK_SH
    };
    // SAFETY: flock on an open descriptor.
    if unsafe { libc::flock(f.as_raw_fd(), op) } != 0 {
        return Err(ImageError::Io {
            path: path.to_path_buf(),
            source: std::io::Error::last_os_error(),
        });
    }
    Ok(f)
}

/// Runs `fut` on a private runtime on its own thread (callers may be inside one).
fn block_on<T: Send>(fut: impl std::future::Future<Output = T> + Send) -> T {
    std::thread::scope(|s| {
        s.spawn(|| {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a current-thread runtime starts")
                .block_on(fut)
        })
        .join()
        .expect("the pull thread does not panic")
    })
}

impl Store {
    /// A store in `root`, configured from the environment: `AKBENCH_INSECURE_REGISTRIES`
    /// and the credentials file ([`credentials_file`]). Unpacked images are the worker's
    /// (never the sandbox user's: the container runtime shows them as the sandbox user's
    /// through an idmapped mount), in folders only the worker can enter.
    pub fn from_env(root: PathBuf) -> Result<Self, String> {
        let insecure = akbench_core::image::registry::insecure_list(
            &std::env::var(akbench_core::image::registry::INSECURE_VAR).unwrap_or_default(),
        )?;
        Ok(Self {
            root,
            insecure,
            auth_file: credentials_file(),
            owner: None,
            limits: ImageLimits::from_lookup(|v| std::env::var(v).ok())?,
            deadlines: Deadlines::from_env()?,
        })
    }

    /// `dir` (under the store) made if missing, the worker's, entered by the worker only
    /// (mode 0700): what is in it cannot be changed by another user, the sandbox users
    /// included.
    fn private_dir(&self, dir: &Path) -> Result<(), ImageError> {
        use std::os::unix::fs::PermissionsExt;
        let io = |source| ImageError::Io {
            path: dir.to_path_buf(),
            source,
        };
        std::fs::create_dir_all(dir).map_err(io)?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(io)
    }

    /// The store's folder.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn client(&self) -> Client {
        Client::new(self.insecure.clone(), self.auth_file.clone())
    }

    /// The digest `image`'s tag (or digest) names for this platform.
    pub fn resolve(&self, image: &ImageRef) -> Result<String, ImageError> {
        let c = self.client();
        block_on(within(
            self.deadlines.resolve,
            image,
            "resolving the tag",
            c.resolve(image),
        ))
    }

    fn blob_path(&self, digest: &str) -> PathBuf {
        self.root
            .join("blobs/sha256")
            .join(digest_hex(digest).unwrap_or("invalid"))
    }

    /// The unpacked image `image` (pinned) names: pulled, verified and unpacked when not yet
    /// cached, marked used now, held in use until the result is dropped.
    pub fn ensure(&self, image: &ImageRef) -> Result<Unpacked, ImageError> {
        let digest = image
            .digest
            .clone()
            .ok_or_else(|| ImageError::NotPinned(image.to_string()))?;
        let hex = digest_hex(&digest).ok_or_else(|| ImageError::NotPinned(image.to_string()))?;
        let roots = self.root.join("roots");
        for d in [&self.root.join("blobs"), &self.root.join("tmp"), &roots] {
            self.private_dir(d)?;
        }
        let dir = roots.join(hex);
        let lock_path = roots.join(format!("{hex}.lock"));
        let mut fetched = false;
        if !ready(&dir) {
            let _x = lock(&lock_path, true)?;
            if !ready(&dir) {
                self.pull_and_unpack(image, &digest, &dir)?;
                fetched = true;
            }
        }
        let held = lock(&lock_path, false)?;
        let run_path = dir.join("run.json");
        let run = std::fs::read(&run_path)
            .map_err(|source| ImageError::Io {
                path: run_path.clone(),
                source,
            })
            .and_then(|b| {
                run_config(&b).map_err(|problem| ImageError::Unpack {
                    image: image.to_string(),
                    problem,
                })
            })?;
        // The marker's time is the last use (the collection order).
        let _ = std::fs::File::options()
            .write(true)
            .open(dir.join("ready"))
            .and_then(|f| f.set_modified(std::time::SystemTime::now()));
        Ok(Unpacked {
            digest,
            rootfs: dir.join("rootfs"),
            run,
            fetched,
            _lock: held,
        })
    }

    fn pull_and_unpack(
        &self,
        image: &ImageRef,
        digest: &str,
        dir: &Path,
    ) -> Result<(), ImageError> {
        // Blobs are not collected while a pull is under way.
        let _store = lock(&self.root.join("store.lock"), false)?;
        let client = self.client();
        let tmp = self.root.join("tmp");
        let too_big = |problem: String| ImageError::Unpack {
            image: image.to_string(),
            problem,
        };
        let (config, layers) = block_on(within(self.deadlines.pull, image, "the pull", async {
            let (config, layers) = client.image_manifest(image, digest).await?;
            // Caps the manifest shows are checked before anything is downloaded.
            self.limits
                .check_manifest(config.size, layers.len())
                .map_err(too_big)?;
            for d in std::iter::once(&config).chain(&layers) {
                let dest = self.blob_path(&d.digest);
                if !dest.is_file() {
                    client.blob(image, d, &tmp, &dest).await?;
                }
            }
            Ok::<_, ImageError>((config, layers))
        }))?;
        let unpack_err = |problem: String| ImageError::Unpack {
            image: image.to_string(),
            problem,
        };
        let work = tmp.join(format!("root-{}", uuid::Uuid::now_v7()));
        let rootfs = work.join("rootfs");
        let io = |path: &Path, source| ImageError::Io {
            path: path.to_path_buf(),
            source,
        };
        std::fs::create_dir_all(&rootfs).map_err(|e| io(&rootfs, e))?;
        let mut budget = self.limits.budget();
        let result = (|| {
            for l in &layers {
                compression(&l.media_type).ok_or_else(|| {
                    unpack_err(format!(
                        "layer {} has the media type `{}`, which akbench does not unpack (tar, tar+gzip, tar+zstd)",
                        l.digest, l.media_type
                    ))
                })?;
                unpack::apply(&rootfs, &self.blob_path(&l.digest), self.owner, &mut budget)
                    .map_err(unpack_err)?;
            }
            if let Some((uid, gid)) = self.owner {
                std::os::unix::fs::lchown(&rootfs, Some(uid), Some(gid))
                    .map_err(|e| io(&rootfs, e))?;
            }
            let cfg = std::fs::read(self.blob_path(&config.digest))
                .map_err(|e| io(&self.blob_path(&config.digest), e))?;
            run_config(&cfg).map_err(unpack_err)?;
            std::fs::write(work.join("run.json"), &cfg).map_err(|e| io(&work, e))?;
            let blobs: Vec<&str> = std::iter::once(&config)
                .chain(&layers)
                .map(|d| d.digest.as_str())
                .collect();
            std::fs::write(work.join("blobs"), blobs.join("\n")).map_err(|e| io(&work, e))?;
            std::fs::write(work.join("ready"), digest).map_err(|e| io(&work, e))?;
            let _ = std::fs::remove_dir_all(dir);
            std::fs::rename(&work, dir).map_err(|e| io(dir, e))
        })();
        if result.is_err() {
            let _ = std::fs::remove_dir_all(&work);
        }
        result
    }

    /// Removes unpacked images (with the blobs no remaining image uses), least recently
    /// used first, until the store holds at most `max_bytes`; an image in use is never
    /// removed. Returns the removed digests.
    pub fn gc(&self, max_bytes: u64) -> Result<Vec<String>, ImageError> {
        use akbench_core::image::cache::{victims, Entry};
        let roots = self.root.join("roots");
        let mut entries = Vec::new();
        let mut in_use = std::collections::BTreeSet::new();
        let Ok(rd) = std::fs::read_dir(&roots) else {
            return Ok(Vec::new());
        };
        for e in rd.flatten() {
            let p = e.path();
            let Ok(digest) = std::fs::read_to_string(p.join("ready")) else {
                continue;
            };
            let last_used = std::fs::metadata(p.join("ready"))
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_secs());
            // A blob two images share counts for both (a conservative bound).
            let blobs: u64 = self
                .blobs_of(&p)
                .iter()
                .filter_map(|b| std::fs::metadata(self.blob_path(b)).ok())
                .map(|m| m.len())
                .sum();
            let bytes = crate::runtime::disk_usage(std::slice::from_ref(&p)) + blobs;
            if is_locked(&roots.join(format!("{}.lock", e.file_name().to_string_lossy()))) {
                in_use.insert(digest.clone());
            }
            entries.push(Entry {
                digest,
                bytes,
                last_used,
            });
        }
        let mut gone = Vec::new();
        for d in victims(&entries, &in_use, max_bytes) {
            let hex = digest_hex(&d).unwrap_or("invalid");
            // Exclusive and without waiting: an image taken into use meanwhile stays.
            let Ok(f) = std::fs::OpenOptions::new()
                .write(true)
                .open(roots.join(format!("{hex}.lock")))
            else {
                continue;
            };
            // SAFETY: flock on an open descriptor; released when `f` closes.
            if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
                continue;
            }
            let dir = roots.join(hex);
            let _ = std::fs::remove_file(dir.join("ready"));
            std::fs::remove_dir_all(&dir).map_err(|source| ImageError::Io {
                path: dir.clone(),
                source,
            })?;
            gone.push(d);
        }
        if !gone.is_empty() {
            self.remove_unused_blobs();
        }
        Ok(gone)
    }

    fn blobs_of(&self, dir: &Path) -> Vec<String> {
        std::fs::read_to_string(dir.join("blobs"))
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// Removes every blob no ready image lists.
    fn remove_unused_blobs(&self) {
        let Ok(_store) = lock(&self.root.join("store.lock"), true) else {
            return;
        };
        let mut used = std::collections::BTreeSet::new();
        if let Ok(rd) = std::fs::read_dir(self.root.join("roots")) {
            for e in rd.flatten() {
                used.extend(self.blobs_of(&e.path()));
            }
        }
        if let Ok(rd) = std::fs::read_dir(self.root.join("blobs/sha256")) {
            for e in rd.flatten() {
                let d = format!("sha256:{}", e.file_name().to_string_lossy());
                if !used.contains(&d) {
                    let _ = std::fs::remove_file(e.path());
                }
            }
        }
    }
}

fn is_locked(path: &Path) -> bool {
    let Ok(f) = std::fs::OpenOptions::new().write(true).open(path) else {
        return false;
    };
    // SAFETY: flock on an open descriptor; released when `f` closes.
    unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) != 0 }
}

#[cfg(test)]
mod cache_owner_tests {
    use super::*;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    /// The cache's folders are the worker's and only it can enter them; an unpacked tree
    /// another user owns (the sandbox user's, as earlier versions unpacked it) is not used
    /// but unpacked again. Before, unpacked images were the sandbox user's (65534).
    #[test]
    fn the_image_cache_is_the_workers_and_a_tree_of_another_user_is_not_used() {
        let tmp = tempfile::tempdir().unwrap();
        let store = Store::from_env(tmp.path().join("images")).unwrap();
        assert_eq!(store.owner, None);
        let roots = tmp.path().join("images/roots");
        store.private_dir(&roots).unwrap();
        let m = std::fs::metadata(&roots).unwrap();
        // SAFETY: geteuid has no preconditions.
        assert_eq!(m.uid(), unsafe { libc::geteuid() });
        assert_eq!(m.permissions().mode() & 0o777, 0o700);
        let dir = roots.join("00");
        std::fs::create_dir_all(dir.join("rootfs")).unwrap();
        assert!(!ready(&dir), "no ready marker");
        std::fs::write(dir.join("ready"), "sha256:00").unwrap();
        assert!(ready(&dir));
        if crate::runtime::bwrap::is_root() {
            std::os::unix::fs::lchown(dir.join("rootfs"), Some(65534), Some(65534)).unwrap();
            assert!(!ready(&dir), "a tree the sandbox user owns was used");
        }
    }
}

#[cfg(test)]
mod deadline_tests {
    use super::*;
    use std::io::{Read, Write};

    /// A registry that answers every request with headers at once and then one byte of
    /// the body every 50 ms: it never stalls, and is given up on at the deadline.
    #[test]
    fn a_registry_that_drips_is_given_up_on_at_the_deadline_naming_it() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        std::thread::spawn(move || {
            for c in l.incoming() {
                let Ok(mut c) = c else { return };
                std::thread::spawn(move || {
                    let mut buf = [0u8; 4096];
                    let _ = c.read(&mut buf);
                    let _ = c.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 100000\r\n\r\n{");
                    while c.write_all(b" ").is_ok() {
                        std::thread::sleep(std::time::Duration::from_millis(50));
                    }
                });
            }
        });
        let tmp = tempfile::tempdir().unwrap();
        let mut store = Store::from_env(tmp.path().join("images")).unwrap();
        store.insecure = vec![addr.clone()];
        store.auth_file = None;
        store.deadlines = Deadlines::with_pull(std::time::Duration::from_millis(400));
        let image = ImageRef::parse(&format!("{addr}/akbench/drip:v1")).unwrap();
        let e = store.resolve(&image).unwrap_err().to_string();
        assert!(
            e.contains("resolving the tag")
                && e.contains("deadline of 0.4 s")
                && e.contains(&addr)
                && e.contains(PULL_TIMEOUT_VAR),
            "{e}"
        );
        let pinned = image.with_digest(&format!("sha256:{}", "0".repeat(64)));
        let e = store.ensure(&pinned).unwrap_err().to_string();
        assert!(e.contains("the pull did not finish"), "{e}");
        let tmp_left: Vec<_> = std::fs::read_dir(tmp.path().join("images/tmp"))
            .unwrap()
            .flatten()
            .collect();
        assert!(tmp_left.is_empty(), "{tmp_left:?}");
    }

    #[test]
    fn the_pull_deadline_comes_from_its_variable_within_core_s_range() {
        assert_eq!(Deadlines::default().pull.as_secs(), 1800);
        assert_eq!(Deadlines::default().resolve, RESOLVE_TIMEOUT);
        let d = Deadlines::with_pull(std::time::Duration::from_secs(5));
        assert_eq!(d.resolve.as_secs(), 5, "never longer than the pull");
    }
}
