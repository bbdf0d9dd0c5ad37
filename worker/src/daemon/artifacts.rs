//! The artifact store: where each attempt's artifacts (agent stdout / stderr, the agent's
//! diff, evaluator logs, `attempt_record.json`) end up, on the `object_store` crate.
//!
//! `--artifacts DIR` (or `file:///DIR`) is a local folder; `--artifacts s3://bucket/prefix`
//! is an S3-compatible bucket configured by the usual `AWS_*` environment (endpoint, region,
//! credentials), available when the crate is built with the `s3` feature. Objects are keyed
//! `<prefix>/<trial key>/a<n>/<file>`.

use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutOptions, PutPayload};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The artifact store could not be opened or written.
#[derive(Debug, thiserror::Error)]
pub enum ArtifactError {
    /// The store's URL is not usable.
    #[error("artifact store `{url}`: {reason}")]
    Url {
        /// As given.
        url: String,
        /// What is wrong and what to do.
        reason: String,
    },
    /// Reading a local artifact failed.
    #[error("failed to read artifact {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
    /// The store has no such object.
    #[error("artifact `{key}` is not in the store")]
    Missing {
        /// Object key.
        key: String,
    },
    /// The store failed a read.
    #[error("failed to fetch artifact `{key}`: {source}")]
    Get {
        /// Object key.
        key: String,
        /// Cause.
        source: object_store::Error,
    },
    /// The store refused or failed a write.
    #[error("failed to store artifact `{key}`: {source}")]
    Put {
        /// Object key.
        key: String,
        /// Cause.
        source: object_store::Error,
    },
}

/// Parts of a multipart upload, bytes (S3 takes parts of 5 MiB or more); a file up to this
/// size is stored in one request.
pub const STREAM_CHUNK: usize = 8 << 20;

/// Where artifacts are copied once an attempt ends.
#[derive(Debug, Clone)]
pub struct ArtifactStore {
    store: Arc<dyn ObjectStore>,
    prefix: Option<ObjectPath>,
    url: String,
    local_root: Option<PathBuf>,
}

impl ArtifactStore {
    /// Opens the store named by `url`: a folder path, `file:///folder`, or (with the `s3`
    /// feature) `s3://bucket/prefix`. A local folder is created if missing.
    pub fn open(url: &str) -> Result<Self, ArtifactError> {
        let err = |reason: String| ArtifactError::Url {
            url: url.to_string(),
            reason,
        };
        if let Some(rest) = url.strip_prefix("s3://") {
            return Self::open_s3(url, rest);
        }
        if url.contains("://") && !url.starts_with("file://") {
            return Err(err(
                "unknown scheme; give a folder, file:///folder or s3://bucket/prefix".into(),
            ));
        }
        let dir = PathBuf::from(url.strip_prefix("file://").unwrap_or(url));
        std::fs::create_dir_all(&dir).map_err(|e| err(format!("cannot create the folder: {e}")))?;
        let dir = dir
            .canonicalize()
            .map_err(|e| err(format!("cannot resolve the folder: {e}")))?;
        let store = object_store::local::LocalFileSystem::new_with_prefix(&dir)
            .map_err(|e| err(e.to_string()))?;
        Ok(Self {
            store: Arc::new(store),
            prefix: None,
            url: url.to_string(),
            local_root: Some(dir),
        })
    }

    #[cfg(feature = "s3")]
    fn open_s3(url: &str, rest: &str) -> Result<Self, ArtifactError> {
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Err(ArtifactError::Url {
                url: url.to_string(),
                reason: "no bucket; give s3://bucket/prefix".into(),
            });
        }
        let store = object_store::aws::AmazonS3Builder::from_env()
            .with_bucket_name(bucket)
            .build()
            .map_err(|e| ArtifactError::Url {
                url: url.to_string(),
                reason: format!("{e}; set AWS_REGION, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY (and AWS_ENDPOINT for S3-compatible stores)"),
            })?;
        let prefix = prefix.trim_matches('/');
        Ok(Self {
            store: Arc::new(store),
            prefix: (!prefix.is_empty()).then(|| ObjectPath::from(prefix)),
            url: url.to_string(),
            local_root: None,
        })
    }

    #[cfg(not(feature = "s3"))]
    fn open_s3(url: &str, _rest: &str) -> Result<Self, ArtifactError> {
        Err(ArtifactError::Url {
            url: url.to_string(),
            reason: "this akbench-worker was built without S3 support; rebuild with `--features s3` or give a local folder".into(),
        })
    }

    /// The store as given.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The folder of a local store.
    pub fn local_root(&self) -> Option<&Path> {
        self.local_root.as_deref()
    }

    fn key(&self, rel: &str) -> ObjectPath {
        let mut parts: Vec<String> = Vec::new();
        if let Some(p) = &self.prefix {
            parts.extend(p.parts().map(|p| p.as_ref().to_string()));
        }
        parts.extend(rel.split('/').filter(|s| !s.is_empty()).map(str::to_string));
        ObjectPath::from_iter(parts)
    }

    /// Copies every regular file under `dir` (recursively; symlinks are skipped) to
    /// `<key>/<relative path>`. Returns how many files were stored.
    pub async fn put_dir(&self, dir: &Path, key: &str) -> Result<usize, ArtifactError> {
        let mut stack = vec![(dir.to_path_buf(), key.to_string())];
        let mut count = 0;
        while let Some((d, k)) = stack.pop() {
            let read = |e| ArtifactError::Read {
                path: d.clone(),
                source: e,
            };
            let mut entries: Vec<_> = std::fs::read_dir(&d)
                .map_err(read)?
                .collect::<Result<_, _>>()
                .map_err(read)?;
            entries.sort_by_key(std::fs::DirEntry::file_name);
            for e in entries {
                let path = e.path();
                let name = e.file_name().to_string_lossy().into_owned();
                let ft = e.file_type().map_err(|source| ArtifactError::Read {
                    path: path.clone(),
                    source,
                })?;
                let child = format!("{k}/{name}");
                if ft.is_dir() {
                    stack.push((path, child));
                } else if ft.is_file() {
                    self.put_file(&path, &self.key(&child)).await?;
                    count += 1;
                }
            }
        }
        Ok(count)
    }

    /// Stores the file at `path` as `location`: read whole when small, else in
    /// [`STREAM_CHUNK`] parts of a multipart upload, at most two in flight, so memory does
    /// not grow with the file's size.
    async fn put_file(&self, path: &Path, location: &ObjectPath) -> Result<(), ArtifactError> {
        use std::io::Read;
        let read = |source| ArtifactError::Read {
            path: path.to_path_buf(),
            source,
        };
        let put = |source| ArtifactError::Put {
            key: location.to_string(),
            source,
        };
        // A regular file only (a FIFO left in the trial folder is refused, not waited on);
        // read in bounded pieces below.
        let (mut f, size) =
            akbench_core::bounded_read::open(path, akbench_core::bounded_read::Links::Refuse)
                .map_err(|e| read(std::io::Error::other(e.to_string())))?;
        if size <= STREAM_CHUNK as u64 {
            let mut bytes = Vec::new();
            f.read_to_end(&mut bytes).map_err(read)?;
            self.store
                .put_opts(location, PutPayload::from(bytes), PutOptions::default())
                .await
                .map_err(put)?;
            return Ok(());
        }
        let upload = self.store.put_multipart(location).await.map_err(put)?;
        let mut w = object_store::WriteMultipart::new_with_chunk_size(upload, STREAM_CHUNK);
        let mut piece = vec![0u8; 1 << 20];
        loop {
            let n = match f.read(&mut piece) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    let _ = w.abort().await;
                    return Err(read(e));
                }
            };
            if let Err(e) = w.wait_for_capacity(2).await {
                let _ = w.abort().await;
                return Err(put(e));
            }
            w.write(&piece[..n]);
        }
        w.finish().await.map_err(put)?;
        Ok(())
    }

    /// The bytes of the object at `rel` (`<trial key>/a<n>/<file>`, as [`Self::put_dir`]
    /// stored it).
    pub async fn get(&self, rel: &str) -> Result<Vec<u8>, ArtifactError> {
        let location = self.key(rel);
        let key = location.to_string();
        let fetched = match self.store.get(&location).await {
            Ok(r) => r.bytes().await,
            Err(e) => Err(e),
        };
        match fetched {
            Ok(b) => Ok(b.to_vec()),
            Err(object_store::Error::NotFound { .. }) => Err(ArtifactError::Missing { key }),
            Err(source) => Err(ArtifactError::Get { key, source }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn copies_a_folder_tree_to_a_local_store() {
        let src = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(src.path().join("eval")).unwrap();
        std::fs::write(src.path().join("agent.diff"), "diff").unwrap();
        std::fs::write(src.path().join("eval/log.txt"), "log").unwrap();
        std::os::unix::fs::symlink("/etc/passwd", src.path().join("link")).unwrap();
        let dst = tempfile::tempdir().unwrap();
        let store = ArtifactStore::open(dst.path().join("store").to_str().unwrap()).unwrap();
        let n = store
            .put_dir(src.path(), "run/task/agent/r1/a1")
            .await
            .unwrap();
        assert_eq!(n, 2);
        assert_eq!(
            store.get("run/task/agent/r1/a1/agent.diff").await.unwrap(),
            b"diff"
        );
        assert!(matches!(
            store.get("run/task/agent/r1/a1/absent").await,
            Err(ArtifactError::Missing { .. })
        ));
        let root = dst.path().join("store/run/task/agent/r1/a1");
        assert_eq!(
            std::fs::read_to_string(root.join("agent.diff")).unwrap(),
            "diff"
        );
        assert_eq!(
            std::fs::read_to_string(root.join("eval/log.txt")).unwrap(),
            "log"
        );
        assert!(!root.join("link").exists());
    }

    /// A file larger than one part goes up in parts (never read whole) and arrives whole.
    #[tokio::test]
    async fn a_large_file_is_stored_in_parts() {
        let src = tempfile::tempdir().unwrap();
        let big: Vec<u8> = (0..(STREAM_CHUNK * 2 + 12345))
            .map(|i| (i % 251) as u8)
            .collect();
        std::fs::write(src.path().join("big.bin"), &big).unwrap();
        let dst = tempfile::tempdir().unwrap();
        let store = ArtifactStore::open(dst.path().join("store").to_str().unwrap()).unwrap();
        assert_eq!(store.put_dir(src.path(), "t/a1").await.unwrap(), 1);
        assert_eq!(store.get("t/a1/big.bin").await.unwrap(), big);
    }

    #[test]
    fn refuses_unknown_schemes() {
        assert!(ArtifactStore::open("gs://bucket").is_err());
        #[cfg(not(feature = "s3"))]
        assert!(ArtifactStore::open("s3://bucket/prefix")
            .unwrap_err()
            .to_string()
            .contains("--features s3"));
    }
}
