//! The output writer against every kind of thing that may sit at a path.

use super::*;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};

fn mknod(p: &Path, mode: libc::mode_t, dev: libc::dev_t) -> bool {
    let c = CString::new(p.as_os_str().as_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    unsafe { libc::mknod(c.as_ptr(), mode, dev) == 0 }
}

fn entries(d: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(d)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn a_new_or_regular_path_is_written_and_nothing_else_is_replaced() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    write(&d.join("new.html"), b"one").unwrap();
    assert_eq!(std::fs::read(d.join("new.html")).unwrap(), b"one");
    write(&d.join("new.html"), b"two").unwrap();
    assert_eq!(std::fs::read(d.join("new.html")).unwrap(), b"two");

    assert!(mknod(&d.join("fifo"), libc::S_IFIFO | 0o600, 0));
    std::fs::create_dir(d.join("dir")).unwrap();
    std::os::unix::fs::symlink(d.join("new.html"), d.join("link")).unwrap();
    let _sock = std::os::unix::net::UnixListener::bind(d.join("sock")).unwrap();
    // A copy of /dev/full's node when allowed (as root), else skipped.
    let full = mknod(&d.join("full"), libc::S_IFCHR | 0o600, libc::makedev(1, 7));
    let before = entries(d);
    for (name, word) in [
        ("fifo", "FIFO"),
        ("dir", "directory"),
        ("link", "symbolic link"),
        ("sock", "socket"),
        ("full", "character device"),
    ] {
        if name == "full" && !full {
            continue;
        }
        let p = d.join(name);
        let e = write(&p, b"x").unwrap_err();
        assert!(e.is_refusal());
        let m = e.to_string();
        assert!(m.contains(word) && m.contains(&*p.to_string_lossy()), "{m}");
        assert!(m.contains("fix:"), "{m}");
    }
    assert_eq!(entries(d), before, "nothing added, nothing replaced");
    if full {
        let m = std::fs::symlink_metadata(d.join("full")).unwrap();
        assert!(m.file_type().is_char_device());
    }
    assert_eq!(std::fs::read(d.join("new.html")).unwrap(), b"two");
}

#[test]
fn a_private_output_is_never_put_over_anything() {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("server.key");
    write_with(&p, Mode::Private, Existing::Refuse, |w| w.write_all(b"k")).unwrap();
    let mode = std::fs::metadata(&p).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let e = write_with(&p, Mode::Private, Existing::Refuse, |w| w.write_all(b"j")).unwrap_err();
    assert!(matches!(e, OutputError::Exists { .. }), "{e}");
    assert_eq!(std::fs::read(&p).unwrap(), b"k");
    assert_eq!(entries(tmp.path()), ["server.key"]);
}

#[test]
fn a_failed_fill_leaves_nothing_behind() {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("out.jsonl");
    std::fs::write(&p, "old").unwrap();
    let e = write_with(&p, Mode::Public, Existing::Replace, |_| {
        Err(std::io::Error::other("serializing failed"))
    })
    .unwrap_err();
    assert!(e.to_string().contains("serializing failed"), "{e}");
    assert_eq!(std::fs::read(&p).unwrap(), b"old");
    assert_eq!(entries(tmp.path()), ["out.jsonl"]);
    let missing = tmp.path().join("no/such/folder/x");
    let e = write(&missing, b"x").unwrap_err();
    assert!(
        !e.is_refusal() && e.to_string().contains("no/such/folder"),
        "{e}"
    );
}
