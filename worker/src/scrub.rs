//! Stored files without credential values, in constant memory: [`scrub_file`] scrubs a file
//! in place, [`collect`] copies the agent's `/logs` into the attempt's artifacts (regular
//! files only, capped, scrubbed on the way: `akbench_core::artifacts`).
//!
//! Both stream the file through `akbench_core::redact::Scrubber` in pieces of [`PIECE`]
//! bytes, so memory is a few pieces and the longest encoded form, whatever the file's size
//! (a 3.5 GB artifact took the worker to 3.6 GB when files were read whole). A file is
//! read once when it holds no value; when it does, it is read again into a new file beside
//! it, which then replaces it. Links are never followed.

use akbench_core::artifacts::{Budget, Kind, Take};
use akbench_core::redact::Redactor;
use std::collections::BTreeSet;
use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// Bytes read at a time.
pub const PIECE: usize = 1 << 20;

/// Opens a file for reading without following a link, nor waiting on a FIFO.
fn open_no_follow(path: &Path) -> std::io::Result<File> {
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
}

/// Streams at most `limit` bytes of `from` through `redactor` into `to` (`None`: only
/// scanned); returns the names found.
fn stream(
    redactor: &Redactor,
    from: &mut File,
    mut to: Option<&mut dyn Write>,
    limit: u64,
) -> std::io::Result<BTreeSet<String>> {
    let mut s = redactor.scrubber();
    let mut piece = vec![0u8; PIECE];
    let mut out = Vec::with_capacity(PIECE + redactor.longest() + 64);
    let mut left = limit;
    while left > 0 {
        let want = usize::try_from(left).unwrap_or(usize::MAX).min(PIECE);
        let n = match from.read(&mut piece[..want]) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        left -= n as u64;
        s.push(&piece[..n], &mut out);
        if let Some(w) = to.as_mut() {
            w.write_all(&out)?;
        }
        out.clear();
    }
    s.finish(&mut out);
    if let Some(w) = to.as_mut() {
        w.write_all(&out)?;
    }
    Ok(s.found().clone())
}

/// Scrubs the regular file at `path` in place; true when something was replaced (the names
/// found are added to `found`). A missing file is fine (`false`); a link is not followed
/// (an error).
pub fn scrub_file(
    redactor: &Redactor,
    path: &Path,
    found: &mut BTreeSet<String>,
) -> std::io::Result<bool> {
    if redactor.is_empty() {
        return Ok(false);
    }
    let mut f = match open_no_follow(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    };
    let meta = f.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    if stream(redactor, &mut f, None, u64::MAX)?.is_empty() {
        return Ok(false);
    }
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.akbench-scrub-{}", uuid::Uuid::now_v7()));
    let written = (|| {
        let mut f = open_no_follow(path)?;
        let out = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(meta.permissions().mode() & 0o777)
            .open(&tmp)?;
        let mut w = std::io::BufWriter::with_capacity(PIECE, out);
        let names = stream(redactor, &mut f, Some(&mut w), u64::MAX)?;
        w.into_inner().map_err(|e| e.into_error())?.sync_all()?;
        std::fs::rename(&tmp, path)?;
        Ok(names)
    })();
    match written {
        Ok(names) => {
            found.extend(names);
            Ok(true)
        }
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            Err(e)
        }
    }
}

/// Copies the tree at `from` into `to` by `budget`'s rule (regular files and folders only,
/// links never followed nor kept, the cap), each file scrubbed on the way (names found added
/// to `found`). A missing `from` is fine. `rel` is `from`'s name in the notes.
pub fn collect(
    redactor: &Redactor,
    from: &Path,
    to: &Path,
    rel: &str,
    budget: &mut Budget,
    found: &mut BTreeSet<String>,
) -> std::io::Result<()> {
    let Ok(meta) = std::fs::symlink_metadata(from) else {
        return Ok(());
    };
    let kind = if meta.file_type().is_symlink() {
        Kind::Symlink
    } else if meta.is_dir() {
        Kind::Dir
    } else if meta.is_file() {
        Kind::File(meta.len())
    } else {
        Kind::Other
    };
    match budget.take(rel, kind) {
        Take::Skip => Ok(()),
        Take::Dir => {
            std::fs::create_dir_all(to)?;
            let mut entries: Vec<_> = std::fs::read_dir(from)?
                .filter_map(Result::ok)
                .map(|e| e.file_name())
                .collect();
            entries.sort();
            for name in entries {
                let child = format!("{rel}/{}", name.to_string_lossy());
                collect(
                    redactor,
                    &from.join(&name),
                    &to.join(&name),
                    &child,
                    budget,
                    found,
                )?;
            }
            Ok(())
        }
        Take::Copy { bytes } => {
            let mut f = open_no_follow(from)?;
            let out = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o644)
                .open(to)?;
            let mut w = std::io::BufWriter::with_capacity(PIECE, out);
            found.extend(stream(redactor, &mut f, Some(&mut w), bytes)?);
            w.flush()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_scrubbed_in_place_and_a_link_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let red = Redactor::new([("K".to_string(), "sk-0123456789".to_string())]);
        let p = dir.path().join("f.log");
        std::fs::write(&p, "a sk-0123456789 b").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        let mut found = BTreeSet::new();
        assert!(scrub_file(&red, &p, &mut found).unwrap());
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "a [REDACTED:K] b");
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(found.len(), 1);
        // Clean: unchanged, nothing left beside it.
        assert!(!scrub_file(&red, &p, &mut found).unwrap());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        assert!(!scrub_file(&red, &dir.path().join("absent"), &mut found).unwrap());
        let outside = dir.path().join("outside");
        std::fs::write(&outside, "sk-0123456789").unwrap();
        std::os::unix::fs::symlink(&outside, dir.path().join("link")).unwrap();
        assert!(scrub_file(&red, &dir.path().join("link"), &mut found).is_err());
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "sk-0123456789");
    }
}
