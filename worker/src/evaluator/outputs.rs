//! Reading what the verifier left in its output folder without trusting it.
//!
//! The folder was writable by the code under test, so every file in it is opened without
//! following a link (`O_NOFOLLOW`, `O_NONBLOCK` so a FIFO cannot block the worker), must be a
//! regular file with a single link, and is size-capped before a byte is read. Anything else
//! is tampering; the reason names the file and what it was, never what it pointed to or held.

use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;

/// The most a reward file may hold.
pub const REWARD_CAP: u64 = 4 * 1024;
/// The most a JUnit report may hold.
pub const JUNIT_CAP: u64 = 64 * 1024 * 1024;

/// Why a verifier output could not be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OutputError {
    /// The file is not a plain file the verifier wrote: tampering.
    Tampered(String),
    /// The file is a plain file but does not hold a verdict (not a number, bad JSON).
    Invalid(String),
}

/// Reads `name` from `dir`: `Ok(None)` when it does not exist.
pub fn read_capped(dir: &Path, name: &str, cap: u64) -> Result<Option<Vec<u8>>, OutputError> {
    let tampered = |what: String| Err(OutputError::Tampered(format!("{name} {what}")));
    match std::fs::symlink_metadata(dir) {
        Ok(m) if m.file_type().is_dir() => {}
        Ok(_) => {
            return tampered(
                "sits in a verifier folder that was replaced by a link or a file".into(),
            )
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return tampered("sits in a verifier folder that was removed".into())
        }
        Err(e) => {
            return tampered(format!(
                "sits in a verifier folder that cannot be read ({})",
                e.kind()
            ))
        }
    }
    let path = dir.join(name);
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOCTTY)
        .open(&path);
    let file = match file {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return tampered("is a symbolic link".into())
        }
        Err(e) => return tampered(format!("cannot be opened ({})", e.kind())),
    };
    let meta = match file.metadata() {
        Ok(m) => m,
        Err(e) => return tampered(format!("cannot be inspected ({})", e.kind())),
    };
    if !meta.file_type().is_file() {
        return tampered("is not a regular file".into());
    }
    if meta.nlink() != 1 {
        return tampered(format!(
            "has {} hard links (a link to another file)",
            meta.nlink()
        ));
    }
    if meta.len() > cap {
        return tampered(format!(
            "holds {} bytes, over the {cap} a verifier output may hold",
            meta.len()
        ));
    }
    let mut bytes = Vec::new();
    if let Err(e) = file.take(cap + 1).read_to_end(&mut bytes) {
        return tampered(format!("cannot be read ({})", e.kind()));
    }
    if bytes.len() as u64 > cap {
        return tampered(format!(
            "grew over the {cap} bytes a verifier output may hold"
        ));
    }
    Ok(Some(bytes))
}

/// Reads `reward.txt`, else `reward.json`, from the verifier folder: the reward and where it
/// came from, `Ok(None)` when neither exists.
pub fn read_reward(verifier: &Path) -> Result<Option<(f64, &'static str)>, OutputError> {
    let invalid = |s: String| Err(OutputError::Invalid(s));
    if let Some(b) = read_capped(verifier, "reward.txt", REWARD_CAP)? {
        let s = String::from_utf8_lossy(&b);
        let Ok(v) = s.trim().parse::<f64>() else {
            let shown: String = s.trim().chars().take(64).collect();
            return invalid(format!("reward.txt holds `{shown}`, not a number"));
        };
        if !v.is_finite() {
            return invalid("reward.txt is not a finite number".into());
        }
        return Ok(Some((v, "reward_txt")));
    }
    if let Some(b) = read_capped(verifier, "reward.json", REWARD_CAP)? {
        let v: serde_json::Value = match serde_json::from_slice(&b) {
            Ok(v) => v,
            Err(e) => return invalid(format!("reward.json does not parse: {e}")),
        };
        let Some(r) = v
            .get("reward")
            .or_else(|| v.get("score"))
            .and_then(serde_json::Value::as_f64)
            .or_else(|| v.as_f64())
        else {
            return invalid("reward.json has no numeric `reward` or `score`".into());
        };
        if !r.is_finite() {
            return invalid("reward.json's reward is not a finite number".into());
        }
        return Ok(Some((r, "reward_json")));
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tampered(r: Result<Option<(f64, &'static str)>, OutputError>) -> String {
        match r {
            Err(OutputError::Tampered(s)) => s,
            other => panic!("expected tampering, got {other:?}"),
        }
    }

    #[test]
    fn reward_files() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        assert_eq!(read_reward(d).unwrap(), None);
        std::fs::write(d.join("reward.json"), r#"{"reward": 0.5}"#).unwrap();
        assert_eq!(read_reward(d).unwrap(), Some((0.5, "reward_json")));
        std::fs::write(d.join("reward.txt"), "1\n").unwrap();
        assert_eq!(read_reward(d).unwrap(), Some((1.0, "reward_txt")));
        std::fs::write(d.join("reward.txt"), "yes").unwrap();
        assert!(matches!(read_reward(d), Err(OutputError::Invalid(_))));
    }

    #[test]
    fn links_special_files_and_big_files_are_tampering_and_never_read() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path().join("v");
        std::fs::create_dir(&d).unwrap();
        let host = tmp.path().join("host");
        std::fs::write(&host, "1\nSECRET").unwrap();

        std::os::unix::fs::symlink(&host, d.join("reward.txt")).unwrap();
        let e = tampered(read_reward(&d));
        assert_eq!(e, "reward.txt is a symbolic link");
        std::fs::remove_file(d.join("reward.txt")).unwrap();

        std::os::unix::fs::symlink("/proc/self/environ", d.join("reward.txt")).unwrap();
        assert!(!tampered(read_reward(&d)).contains("PATH"));
        std::fs::remove_file(d.join("reward.txt")).unwrap();

        std::fs::hard_link(&host, d.join("reward.txt")).unwrap();
        assert!(tampered(read_reward(&d)).contains("2 hard links"));
        std::fs::remove_file(d.join("reward.txt")).unwrap();

        std::fs::create_dir(d.join("reward.txt")).unwrap();
        assert!(tampered(read_reward(&d)).contains("not a regular file"));
        std::fs::remove_dir(d.join("reward.txt")).unwrap();

        let fifo = std::ffi::CString::new(d.join("reward.txt").to_str().unwrap()).unwrap();
        // SAFETY: mkfifo(3) on a path in a temp folder.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        assert!(tampered(read_reward(&d)).contains("not a regular file"));
        std::fs::remove_file(d.join("reward.txt")).unwrap();

        std::fs::write(d.join("reward.txt"), "1".repeat(5000)).unwrap();
        assert!(tampered(read_reward(&d)).contains("5000 bytes"));
        std::fs::remove_file(d.join("reward.txt")).unwrap();

        std::os::unix::fs::symlink(&host, d.join("junit.xml")).unwrap();
        assert!(matches!(
            read_capped(&d, "junit.xml", JUNIT_CAP),
            Err(OutputError::Tampered(_))
        ));

        let moved = tmp.path().join("v2");
        std::fs::rename(&d, &moved).unwrap();
        std::os::unix::fs::symlink(&moved, &d).unwrap();
        assert!(tampered(read_reward(&d)).contains("verifier folder"));
    }
}
