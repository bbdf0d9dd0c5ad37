//! The one output writer: every file akbench writes at a path a user chose (`run report
//! --html`, `run import-harbor --observations`, `run aggregate --markdown`, `akbench certs`,
//! exports, records) is written here, as a new regular file put in place atomically: the
//! bytes go to a temporary file in the same folder, are synced, and the temporary file is
//! renamed onto the path (or linked, when nothing may be replaced).
//!
//! Only a regular file, or nothing, is ever replaced: a device (`/dev/full`), a FIFO, a
//! socket, a folder or a symbolic link at the path is refused by name and left as it is;
//! nothing is written then, not even the temporary file. Reading goes through
//! [`crate::bounded_read`].

use std::fs::File;
use std::io::{BufWriter, ErrorKind, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Who may read the file written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `rw-r--r--` less the umask, like any file written plainly (reports, records).
    Public,
    /// `rw-------`: keys and tokens.
    Private,
}

/// What may be at the path already.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Existing {
    /// A regular file there is replaced (atomically: a reader sees the old or the new).
    Replace,
    /// Anything there refuses the write (`akbench certs` never overwrites a key).
    Refuse,
}

/// Why an output was not written; the path is as it was in every case.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    /// Something other than a regular file is at the path.
    #[error(
        "refused to write {}: it is a {kind}, not a regular file, and is left as it is; fix: \
         pass the path of a regular file or of one that does not exist yet",
        path.display()
    )]
    NotRegular {
        /// The path.
        path: PathBuf,
        /// What is there ("FIFO (named pipe)", "character device", ...).
        kind: &'static str,
    },
    /// Something is at a path that must be new.
    #[error(
        "refused to write {}: it already exists; fix: remove it or pick another path",
        path.display()
    )]
    Exists {
        /// The path.
        path: PathBuf,
    },
    /// The write failed (no such folder, no permission, no space); the path is unchanged.
    #[error("failed to write {}: {source}", path.display())]
    Io {
        /// The path.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}

impl OutputError {
    /// Whether the path itself was refused (the user's input), not the write failing.
    pub fn is_refusal(&self) -> bool {
        matches!(
            self,
            OutputError::NotRegular { .. } | OutputError::Exists { .. }
        )
    }
}

/// Writes `bytes` to `path` as a public file, replacing a regular file there.
pub fn write(path: &Path, bytes: &[u8]) -> Result<(), OutputError> {
    write_with(path, Mode::Public, Existing::Replace, |w| {
        w.write_all(bytes)
    })
}

/// Checks that `path` may be written ([`Existing::Replace`]): absent or a regular file.
/// Lets a command refuse before doing its work; [`write_with`] checks again.
pub fn check(path: &Path) -> Result<(), OutputError> {
    check_existing(path, Existing::Replace)
}

/// Writes what `fill` writes to `path`, in `mode`, replacing what `existing` allows.
pub fn write_with(
    path: &Path,
    mode: Mode,
    existing: Existing,
    fill: impl FnOnce(&mut BufWriter<File>) -> std::io::Result<()>,
) -> Result<(), OutputError> {
    check_existing(path, existing)?;
    let io = |source| OutputError::Io {
        path: path.to_path_buf(),
        source,
    };
    let dir = folder_of(path);
    let (tmp, file) = temporary(dir, path, mode).map_err(io)?;
    let filled = (|| {
        let mut w = BufWriter::new(file);
        fill(&mut w)?;
        let file = w.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()
    })();
    if let Err(e) = filled {
        let _ = std::fs::remove_file(&tmp);
        return Err(io(e));
    }
    let placed = match existing {
        Existing::Replace => {
            // A special file may have appeared since the check: look once more.
            check_existing(path, existing).and_then(|()| std::fs::rename(&tmp, path).map_err(io))
        }
        Existing::Refuse => match std::fs::hard_link(&tmp, path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == ErrorKind::AlreadyExists => Err(OutputError::Exists {
                path: path.to_path_buf(),
            }),
            Err(e) => Err(io(e)),
        },
    };
    let _ = std::fs::remove_file(&tmp);
    placed?;
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

fn check_existing(path: &Path, existing: Existing) -> Result<(), OutputError> {
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
        Err(source) => Err(OutputError::Io {
            path: path.to_path_buf(),
            source,
        }),
        Ok(_) if existing == Existing::Refuse => Err(OutputError::Exists {
            path: path.to_path_buf(),
        }),
        Ok(m) if m.file_type().is_file() => Ok(()),
        Ok(m) => Err(OutputError::NotRegular {
            path: path.to_path_buf(),
            kind: crate::bounded_read::kind_name(&m.file_type()),
        }),
    }
}

fn folder_of(path: &Path) -> &Path {
    path.parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

/// A new file beside `path`: `.<name>.<pid>.<n>.tmp`, created exclusively.
fn temporary(dir: &Path, path: &Path, mode: Mode) -> std::io::Result<(PathBuf, File)> {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "output".into());
    // Keep the temporary name within NAME_MAX whatever the output's name.
    let stem: String = name.chars().take(100).collect();
    loop {
        let n = SEQ.fetch_add(1, Ordering::Relaxed);
        let tmp = dir.join(format!(".{stem}.{}.{n}.tmp", std::process::id()));
        let opened = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(match mode {
                Mode::Public => 0o644,
                Mode::Private => 0o600,
            })
            .custom_flags(libc::O_CLOEXEC | libc::O_NOFOLLOW)
            .open(&tmp);
        match opened {
            Ok(f) => return Ok((tmp, f)),
            Err(e) if e.kind() == ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests;
