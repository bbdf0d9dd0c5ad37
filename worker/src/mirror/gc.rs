//! The collection of the mirror and baseline caches: least recently used first, never an
//! entry in use, until the two fit a bound (the rule is [`akbench_core::image::cache::victims`],
//! the image store's).
//!
//! An entry is a mirror (`<root>/<hash>.git`) or a built baseline (`<root>/baselines/<key>`);
//! its last use is the modification time of its lock file (`<entry>.lock`), stamped each time
//! the lock is taken. An entry is in use while its lock is held (a mirror while it is fetched
//! or read, a baseline while an attempt's workspace holds it): the collection takes the lock
//! exclusively without waiting and skips the entry when it cannot. A removed entry is first
//! renamed to a trash name (`<entry>.trash-<id>`), which no reader looks at, then deleted: a
//! crash half way leaves trash (removed by the next collection), never a half entry.

use super::{MirrorCache, MirrorError};
use akbench_core::image::cache::{victims, Entry};
use std::collections::BTreeSet;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

impl MirrorCache {
    /// Removes mirrors and baselines, least recently used first, until they hold at most
    /// `max_bytes`; an entry in use is never removed. Returns the removed entries' folders.
    pub fn gc(&self, max_bytes: u64) -> Result<Vec<PathBuf>, MirrorError> {
        let mut entries = Vec::new();
        for (folder, is_entry) in [
            (self.root().to_path_buf(), is_mirror as fn(&str) -> bool),
            (self.baselines_root(), is_baseline),
        ] {
            let Ok(rd) = std::fs::read_dir(&folder) else {
                continue;
            };
            for e in rd.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                let path = e.path();
                if name.contains(".trash-") {
                    // Left by a collection that stopped half way.
                    let _ = std::fs::remove_dir_all(&path);
                    continue;
                }
                if !is_entry(&name) || !path.is_dir() {
                    continue;
                }
                entries.push(Entry {
                    digest: path.to_string_lossy().into_owned(),
                    bytes: crate::runtime::disk_usage(std::slice::from_ref(&path)),
                    last_used: last_used(&path),
                });
            }
        }
        let in_use: BTreeSet<String> = entries
            .iter()
            .filter(|e| is_locked(Path::new(&e.digest)))
            .map(|e| e.digest.clone())
            .collect();
        let mut gone = Vec::new();
        for victim in victims(&entries, &in_use, max_bytes) {
            let path = PathBuf::from(victim);
            // Exclusive and without waiting: an entry taken into use meanwhile stays.
            let Some(_lock) = try_lock(&path) else {
                continue;
            };
            let name = path.file_name().unwrap_or_default().to_string_lossy();
            let trash =
                path.with_file_name(format!("{name}.trash-{}", uuid::Uuid::now_v7().simple()));
            std::fs::rename(&path, &trash).map_err(|source| MirrorError::Io {
                path: path.clone(),
                source,
            })?;
            std::fs::remove_dir_all(&trash).map_err(|source| MirrorError::Io {
                path: trash.clone(),
                source,
            })?;
            gone.push(path);
        }
        Ok(gone)
    }
}

/// A mirror's folder name: `<hash>.git`.
fn is_mirror(name: &str) -> bool {
    name.strip_suffix(".git")
        .is_some_and(|h| !h.is_empty() && h.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// A built baseline's folder name: its key (hex, no extension; building ones end in
/// `.tmp-<pid>`).
fn is_baseline(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The entry's last use: its lock file's modification time in nanoseconds (0 when it has
/// none: never stamped, so first to go).
fn last_used(entry: &Path) -> u64 {
    std::fs::metadata(entry.with_extension("lock"))
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// The entry's lock taken exclusively without waiting (`None`: someone holds it). A
/// missing lock file is made (nobody holds it then); taking the lock does not stamp it.
fn try_lock(entry: &Path) -> Option<std::fs::File> {
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(entry.with_extension("lock"))
        .ok()?;
    // SAFETY: flock on an open descriptor; released when `f` closes.
    let rc = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    (rc == 0).then_some(f)
}

/// True when someone holds the entry's lock (no lock file: nobody does).
fn is_locked(entry: &Path) -> bool {
    entry.with_extension("lock").exists() && try_lock(entry).is_none()
}
