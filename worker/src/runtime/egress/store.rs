//! The egress proxy's cache on disk, shared by every attempt of a worker (and by the
//! workers that share its folder, a volume): one body file and one metadata file per key
//! under `objects/`, written through a temporary file and a rename (a reader never sees a
//! partial body; two writers of one key leave one whole copy), the body's sha256 checked on
//! every read (a damaged entry is removed and fetched again), a size cap with
//! least-recently-used eviction (a hit touches the entry). Concurrent misses of one key in
//! this process fetch once: the others wait for the first ([`Store::claim`]). What may be
//! cached is decided in core (`akbench_core::egress::cache`).

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::{self, Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, OnceLock};

/// The cache folder (a worker setting; unset: no cache).
pub const DIR_ENV: &str = "AKBENCH_EGRESS_CACHE_DIR";
/// The cache's size cap in MiB (default [`DEFAULT_MAX_MB`]).
pub const MAX_MB_ENV: &str = "AKBENCH_EGRESS_CACHE_MAX_MB";
/// The default size cap.
pub const DEFAULT_MAX_MB: u64 = 10_240;

/// What is kept with a body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Meta {
    key: String,
    len: u64,
    sha256: String,
    headers: Vec<(String, String)>,
}

/// A cache folder.
#[derive(Debug)]
pub struct Store {
    dir: PathBuf,
    max_bytes: u64,
    busy: Mutex<HashSet<String>>,
    freed: Condvar,
}

impl PartialEq for Store {
    fn eq(&self, o: &Self) -> bool {
        self.dir == o.dir
    }
}

impl Eq for Store {}

/// A stored response, its digest checked: the body (at its start) and the kept headers.
#[derive(Debug)]
pub struct Hit {
    /// The body.
    pub body: File,
    /// Its length.
    pub len: u64,
    /// The response headers kept (`akbench_core::egress::cache::KEPT_HEADERS`).
    pub headers: Vec<(String, String)>,
}

/// Held while this thread fetches a key; the others asking for it wait ([`Store::claim`]).
#[derive(Debug)]
pub struct Claim<'a> {
    store: &'a Store,
    key: String,
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        lock(&self.store.busy).remove(&self.key);
        self.store.freed.notify_all();
    }
}

/// A body being stored.
#[derive(Debug)]
pub struct Writer {
    store: Arc<Store>,
    tmp: PathBuf,
    file: File,
    hash: Sha256,
    written: u64,
    meta: Meta,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn hex(d: &[u8]) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}

impl Store {
    /// The store of `dir` in this process (one per folder, so its claims are shared by
    /// every attempt), made with its folders.
    pub fn open(dir: &Path, max_bytes: u64) -> io::Result<Arc<Store>> {
        static OPEN: OnceLock<Mutex<HashMap<PathBuf, Arc<Store>>>> = OnceLock::new();
        std::fs::create_dir_all(dir.join("objects"))?;
        std::fs::create_dir_all(dir.join("tmp"))?;
        let dir = dir.canonicalize()?;
        let mut open = lock(OPEN.get_or_init(Default::default));
        let s = open.entry(dir.clone()).or_insert_with(|| {
            Arc::new(Store {
                dir,
                max_bytes,
                busy: Mutex::new(HashSet::new()),
                freed: Condvar::new(),
            })
        });
        Ok(s.clone())
    }

    /// The store the worker's settings name ([`DIR_ENV`], [`MAX_MB_ENV`]); `None` when
    /// unset. The error names the variable and the fix.
    pub fn from_env() -> Result<Option<Arc<Store>>, String> {
        let Some(dir) = std::env::var_os(DIR_ENV).filter(|v| !v.is_empty()) else {
            return Ok(None);
        };
        let max_mb = match std::env::var(MAX_MB_ENV) {
            Ok(v) if !v.is_empty() => v.trim().parse::<u64>().ok().filter(|n| *n > 0).ok_or_else(|| {
                format!("{MAX_MB_ENV}={v}: not a size in MiB; fix: a whole number above 0, or unset it (default {DEFAULT_MAX_MB})")
            })?,
            _ => DEFAULT_MAX_MB,
        };
        let dir = PathBuf::from(dir);
        Store::open(&dir, max_mb.saturating_mul(1024 * 1024))
            .map(Some)
            .map_err(|e| {
                format!(
                    "{DIR_ENV}={}: cannot make the cache there ({e}); fix: name a writable folder, or unset it",
                    dir.display()
                )
            })
    }

    /// The folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn paths(&self, key: &str) -> (PathBuf, PathBuf) {
        let h = hex(&Sha256::digest(key.as_bytes()));
        let d = self.dir.join("objects").join(&h[..2]);
        (d.join(format!("{h}.body")), d.join(format!("{h}.meta")))
    }

    /// Waits until no other thread of this process fetches `key`, then holds it.
    pub fn claim(&self, key: &str) -> Claim<'_> {
        let mut busy = lock(&self.busy);
        while busy.contains(key) {
            busy = self.freed.wait(busy).unwrap_or_else(|e| e.into_inner());
        }
        busy.insert(key.to_string());
        Claim {
            store: self,
            key: key.to_string(),
        }
    }

    /// The stored response of `key`, its length and digest checked (a damaged entry is
    /// removed: `None`); a hit becomes the most recently used.
    pub fn get(&self, key: &str) -> Option<Hit> {
        let (body, meta) = self.paths(key);
        let m: Meta = serde_json::from_slice(&std::fs::read(&meta).ok()?).ok()?;
        if m.key != key {
            return None;
        }
        let check = || -> io::Result<Option<File>> {
            let mut f = File::open(&body)?;
            let mut h = Sha256::new();
            let n = io::copy(&mut f, &mut HashWriter(&mut h))?;
            if n != m.len || hex(&h.finalize()) != m.sha256 {
                return Ok(None);
            }
            f.rewind()?;
            Ok(Some(f))
        };
        match check() {
            Ok(Some(f)) => {
                if let Ok(mf) = File::options().append(true).open(&meta) {
                    let _ = mf.set_modified(std::time::SystemTime::now());
                }
                Some(Hit {
                    body: f,
                    len: m.len,
                    headers: m.headers,
                })
            }
            Ok(None) => {
                let _ = std::fs::remove_file(&meta);
                let _ = std::fs::remove_file(&body);
                None
            }
            Err(_) => None,
        }
    }

    /// Starts storing `key`'s body of `len` bytes with `headers`.
    pub fn writer(
        self: &Arc<Self>,
        key: &str,
        len: u64,
        headers: Vec<(String, String)>,
    ) -> io::Result<Writer> {
        if len > self.max_bytes {
            return Err(io::Error::other("larger than the cache"));
        }
        let tmp =
            self.dir
                .join("tmp")
                .join(format!("{}.{}", uuid::Uuid::now_v7(), std::process::id()));
        let file = File::create(&tmp)?;
        Ok(Writer {
            store: self.clone(),
            tmp,
            file,
            hash: Sha256::new(),
            written: 0,
            meta: Meta {
                key: key.to_string(),
                len,
                sha256: String::new(),
                headers,
            },
        })
    }

    /// Removes the least recently used entries until the bodies fit the cap.
    fn evict(&self) {
        let mut entries = Vec::new();
        let mut total = 0u64;
        let Ok(shards) = std::fs::read_dir(self.dir.join("objects")) else {
            return;
        };
        for shard in shards.flatten() {
            let Ok(files) = std::fs::read_dir(shard.path()) else {
                continue;
            };
            for f in files.flatten() {
                let p = f.path();
                if p.extension().is_some_and(|e| e == "meta") {
                    let body = p.with_extension("body");
                    let size = std::fs::metadata(&body).map(|m| m.len()).unwrap_or(0);
                    let used = f.metadata().and_then(|m| m.modified()).ok();
                    total += size;
                    entries.push((used, p, body, size));
                }
            }
        }
        if total <= self.max_bytes {
            return;
        }
        entries.sort_by_key(|e| e.0);
        for (_, meta, body, size) in entries {
            if total <= self.max_bytes {
                break;
            }
            let _ = std::fs::remove_file(&meta);
            let _ = std::fs::remove_file(&body);
            total = total.saturating_sub(size);
        }
    }
}

struct HashWriter<'a>(&'a mut Sha256);

impl Write for HashWriter<'_> {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        self.0.update(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Writer {
    /// Appends body bytes.
    pub fn write(&mut self, b: &[u8]) -> io::Result<()> {
        self.written += b.len() as u64;
        if self.written > self.meta.len {
            return Err(io::Error::other("more bytes than the response's length"));
        }
        self.hash.update(b);
        self.file.write_all(b)
    }

    /// Keeps the body when it is whole (its length as announced), then evicts past the
    /// cap. A short body is dropped.
    pub fn finish(mut self) -> io::Result<()> {
        if self.written != self.meta.len {
            let _ = std::fs::remove_file(&self.tmp);
            return Err(io::Error::other("the body ended early"));
        }
        self.file.sync_all()?;
        self.meta.sha256 = hex(&std::mem::take(&mut self.hash).finalize());
        let (body, meta) = self.store.paths(&self.meta.key);
        if let Some(d) = body.parent() {
            std::fs::create_dir_all(d)?;
        }
        let meta_tmp = self.tmp.with_extension("meta");
        std::fs::write(&meta_tmp, serde_json::to_vec(&self.meta)?)?;
        // The body first: a metadata file always names a whole body of its digest.
        std::fs::rename(&self.tmp, &body)?;
        std::fs::rename(&meta_tmp, &meta)?;
        self.store.evict();
        Ok(())
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.tmp);
    }
}

/// Reads `hit`'s body in chunks to `out`: the bytes written.
pub fn copy_body(hit: &mut Hit, out: &mut impl Write) -> io::Result<u64> {
    let mut buf = vec![0u8; 64 * 1024];
    let mut n = 0u64;
    loop {
        let k = hit.body.read(&mut buf)?;
        if k == 0 {
            return Ok(n);
        }
        out.write_all(&buf[..k])?;
        n += k as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(s: &Arc<Store>, key: &str, body: &[u8]) {
        let mut w = s
            .writer(
                key,
                body.len() as u64,
                vec![("content-type".into(), "x".into())],
            )
            .unwrap();
        w.write(body).unwrap();
        w.finish().unwrap();
    }

    #[test]
    fn a_stored_body_is_served_checked_and_evicted_least_recently_used() {
        let d = tempfile::tempdir().unwrap();
        let s = Store::open(d.path(), 250).unwrap();
        put(&s, "a", &[1u8; 100]);
        put(&s, "b", &[2u8; 100]);
        let mut h = s.get("a").unwrap();
        assert_eq!((h.len, h.headers[0].1.as_str()), (100, "x"));
        let mut out = Vec::new();
        copy_body(&mut h, &mut out).unwrap();
        assert_eq!(out, [1u8; 100]);
        std::thread::sleep(std::time::Duration::from_millis(20));
        // `a` was used after `b`: storing `c` past the cap evicts `b`.
        let _ = s.get("a");
        put(&s, "c", &[3u8; 100]);
        assert!(s.get("b").is_none());
        assert!(s.get("a").is_some() && s.get("c").is_some());
        // A damaged body is found, removed, not served.
        let (body, meta) = s.paths("c");
        std::fs::write(&body, [9u8; 100]).unwrap();
        assert!(s.get("c").is_none());
        assert!(!meta.exists() && !body.exists());
        // A short body is not kept; nothing is left in tmp.
        let mut w = s.writer("d", 10, Vec::new()).unwrap();
        w.write(&[0u8; 5]).unwrap();
        assert!(w.finish().is_err());
        assert!(s.get("d").is_none());
        assert!(s.writer("e", 10_000, Vec::new()).is_err());
        assert_eq!(std::fs::read_dir(d.path().join("tmp")).unwrap().count(), 0);
    }

    #[test]
    fn concurrent_misses_of_one_key_fetch_once() {
        let d = tempfile::tempdir().unwrap();
        let s = Store::open(d.path(), 1 << 20).unwrap();
        let fetched = Arc::new(std::sync::atomic::AtomicU32::new(0));
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let (s, fetched) = (s.clone(), fetched.clone());
                std::thread::spawn(move || {
                    let _c = s.claim("k");
                    if s.get("k").is_none() {
                        fetched.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        put(&s, "k", b"body");
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(fetched.load(std::sync::atomic::Ordering::SeqCst), 1);
        // One store per folder in a process.
        assert!(Arc::ptr_eq(&s, &Store::open(d.path(), 1).unwrap()));
    }
}
