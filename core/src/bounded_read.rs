//! Bounded file reads: every file akbench reads from a user's folders (manifest, task tree,
//! agent descriptor, observations, the run store's plans and records) goes through here.
//!
//! A read opens the file without blocking (`O_NONBLOCK`, so a FIFO with no writer returns
//! at once), and optionally without following a final symlink (`O_NOFOLLOW`, for paths that
//! came from outside a trusted tree); it then requires a regular file by `fstat` of the open
//! descriptor (FIFOs, sockets, character and block devices and directories are refused by
//! name, never read), checks the size against a cap before reading, and reads at most
//! cap + 1 bytes (a file growing under the read is caught too). Problems are returned as
//! text without the path; callers put it in their own error, which names the file, or use
//! [`ReadKind::load`], whose error names it. The cap of each kind of file is in one table,
//! [`ReadKind`] (docs/limits.md lists it).

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

mod kinds;
pub use kinds::{ReadError, ReadKind};

/// Whether a final symlink in the path is followed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Links {
    /// Follow it (the path is the user's own, e.g. `--config`, or a tree already checked).
    Follow,
    /// Refuse it (the name came from a folder that may hold anything, e.g. a descriptor).
    Refuse,
}

/// Why a file was not read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReadProblem {
    /// The open or read failed.
    #[error("cannot read it ({0})")]
    Io(String),
    /// The file is a symlink and links are refused.
    #[error("is a symbolic link, which is not followed here")]
    Symlink,
    /// Not a regular file.
    #[error("is a {0}, not a regular file")]
    NotRegular(&'static str),
    /// Larger than the cap.
    #[error("is {size} bytes, more than the maximum {cap} bytes")]
    TooLarge {
        /// Bytes found (at least).
        size: u64,
        /// The cap.
        cap: u64,
    },
    /// Not UTF-8 text.
    #[error("is not UTF-8 text (invalid byte at offset {0})")]
    NotUtf8(usize),
}

/// The name of a non-regular file type, as messages give it.
pub fn kind_name(ft: &std::fs::FileType) -> &'static str {
    if ft.is_dir() {
        "directory"
    } else if ft.is_symlink() {
        "symbolic link"
    } else if ft.is_fifo() {
        "FIFO (named pipe)"
    } else if ft.is_socket() {
        "socket"
    } else if ft.is_char_device() {
        "character device"
    } else if ft.is_block_device() {
        "block device"
    } else if ft.is_file() {
        "regular file"
    } else {
        "special file"
    }
}

/// Reads at most `cap` bytes of the regular file at `path`.
pub fn read(path: &Path, cap: u64, links: Links) -> Result<Vec<u8>, ReadProblem> {
    let (file, len) = open(path, links)?;
    if len > cap {
        return Err(ReadProblem::TooLarge { size: len, cap });
    }
    read_open(file, cap)
}

/// The first `n` bytes (fewer when the file is shorter) of the regular file at `path`, e.g.
/// a header.
pub fn read_prefix(path: &Path, n: u64, links: Links) -> Result<Vec<u8>, ReadProblem> {
    let (file, _) = open(path, links)?;
    let mut out = Vec::new();
    file.take(n)
        .read_to_end(&mut out)
        .map_err(|e| ReadProblem::Io(e.to_string()))?;
    Ok(out)
}

/// Opens a regular file without blocking (for a streaming reader, which must bound what it
/// reads itself); its size.
pub fn open(path: &Path, links: Links) -> Result<(File, u64), ReadProblem> {
    // Look before opening: opening some devices has effects; a socket cannot be opened.
    let pre = match links {
        Links::Follow => std::fs::metadata(path),
        Links::Refuse => std::fs::symlink_metadata(path),
    }
    .map_err(|e| ReadProblem::Io(e.to_string()))?;
    check_type(&pre.file_type())?;
    let mut flags = libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOCTTY;
    if links == Links::Refuse {
        flags |= libc::O_NOFOLLOW;
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(flags)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) if links == Links::Refuse => ReadProblem::Symlink,
            _ => ReadProblem::Io(e.to_string()),
        })?;
    // The path may have been swapped between the look and the open: the open file decides.
    let meta = file
        .metadata()
        .map_err(|e| ReadProblem::Io(e.to_string()))?;
    check_type(&meta.file_type())?;
    Ok((file, meta.len()))
}

/// Reads at most `cap` bytes of `path` as UTF-8 text; a leading byte-order mark is dropped.
pub fn read_text(path: &Path, cap: u64, links: Links) -> Result<String, ReadProblem> {
    text(read(path, cap, links)?)
}

/// The bytes as UTF-8 text without a leading byte-order mark.
pub fn text(mut bytes: Vec<u8>) -> Result<String, ReadProblem> {
    if bytes.starts_with(b"\xEF\xBB\xBF") {
        bytes.drain(..3);
    }
    String::from_utf8(bytes).map_err(|e| ReadProblem::NotUtf8(e.utf8_error().valid_up_to()))
}

fn check_type(ft: &std::fs::FileType) -> Result<(), ReadProblem> {
    if ft.is_symlink() {
        Err(ReadProblem::Symlink)
    } else if ft.is_file() {
        Ok(())
    } else {
        Err(ReadProblem::NotRegular(kind_name(ft)))
    }
}

fn read_open(file: File, cap: u64) -> Result<Vec<u8>, ReadProblem> {
    let mut out = Vec::new();
    file.take(cap.saturating_add(1))
        .read_to_end(&mut out)
        .map_err(|e| ReadProblem::Io(e.to_string()))?;
    if out.len() as u64 > cap {
        return Err(ReadProblem::TooLarge {
            size: out.len() as u64,
            cap,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;

    fn mkfifo(p: &Path) {
        let c = CString::new(p.as_os_str().as_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    }

    #[test]
    fn only_regular_files_under_the_cap_are_read() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        std::fs::write(d.join("ok"), "hello").unwrap();
        std::fs::write(d.join("bom"), "\u{feff}a: 1").unwrap();
        std::fs::write(d.join("latin1"), b"caf\xe9").unwrap();
        let sparse = File::create(d.join("sparse")).unwrap();
        sparse.set_len(20 << 30).unwrap();
        mkfifo(&d.join("fifo"));
        std::os::unix::fs::symlink("/dev/zero", d.join("zero")).unwrap();
        std::os::unix::fs::symlink(d.join("ok"), d.join("link")).unwrap();
        let _sock = std::os::unix::net::UnixListener::bind(d.join("sock")).unwrap();
        type Case = (&'static str, Links, Result<&'static str, &'static str>);
        let cases: [Case; 12] = [
            ("ok", Links::Follow, Ok("hello")),
            ("ok", Links::Refuse, Ok("hello")),
            ("bom", Links::Follow, Ok("a: 1")),
            ("link", Links::Follow, Ok("hello")),
            ("link", Links::Refuse, Err("symbolic link")),
            ("zero", Links::Follow, Err("character device")),
            ("zero", Links::Refuse, Err("symbolic link")),
            ("fifo", Links::Follow, Err("FIFO")),
            ("sock", Links::Follow, Err("socket")),
            (
                "sparse",
                Links::Follow,
                Err("21474836480 bytes, more than the maximum 64"),
            ),
            ("latin1", Links::Follow, Err("not UTF-8")),
            ("missing", Links::Follow, Err("cannot read it")),
        ];
        for (name, links, want) in cases {
            let got = read_text(&d.join(name), 64, links).map_err(|e| e.to_string());
            match (want, got) {
                (Ok(w), Ok(g)) => assert_eq!(w, g, "{name}"),
                (Err(w), Err(g)) => assert!(g.contains(w), "{name}: {g}"),
                (w, g) => panic!("{name}: wanted {w:?}, got {g:?}"),
            }
        }
        assert!(read(d, 64, Links::Follow)
            .unwrap_err()
            .to_string()
            .contains("directory"));
        assert_eq!(read(&d.join("ok"), 5, Links::Follow).unwrap(), b"hello");
        assert!(read(&d.join("ok"), 4, Links::Follow).is_err());
    }
}
