//! Spreading attempt folders over the file system: the work root is marked as a "top of a
//! directory hierarchy" (`FS_TOPDIR_FL`, `chattr +T`), so ext2/3/4 place each attempt
//! folder made in it in a block group of its own choosing, as it does for folders made at
//! the root of the file system, instead of the work root's own group.
//!
//! Why: every attempt makes and removes a few dozen files and folders, and all of them land
//! in the block group of their parent folder. On an ext4 without a journal, allocating an
//! inode skips (by reading each one) every inode of that group deleted in the last minute,
//! so with all attempts in one group each allocation walked past the thousands of inodes the
//! previous attempts freed (`recently_deleted` was the largest kernel cost of a sweep of
//! no-op trials; docs/PERFORMANCE.md). Best effort: on a file system without the flag, or
//! where it cannot be set, nothing changes.

use std::path::Path;

/// `FS_TOPDIR_FL` of `<linux/fs.h>` (`chattr +T`).
const FS_TOPDIR_FL: libc::c_int = 0x0002_0000;

/// Makes `dir` (and its parents) and marks it top-of-hierarchy when the file system knows
/// the flag; returns whether the flag is set now.
pub fn spread_children(dir: &Path) -> bool {
    use std::os::fd::AsRawFd;
    if std::fs::create_dir_all(dir).is_err() {
        return false;
    }
    let Ok(f) = std::fs::File::open(dir) else {
        return false;
    };
    let fd = f.as_raw_fd();
    let mut flags: libc::c_int = 0;
    // SAFETY: FS_IOC_GETFLAGS writes one int through the pointer, which outlives the call;
    // fd is open for the call's duration.
    if unsafe { libc::ioctl(fd, libc::FS_IOC_GETFLAGS, &mut flags) } != 0 {
        return false;
    }
    if flags & FS_TOPDIR_FL != 0 {
        return true;
    }
    flags |= FS_TOPDIR_FL;
    // SAFETY: FS_IOC_SETFLAGS reads one int through the pointer, as above.
    unsafe { libc::ioctl(fd, libc::FS_IOC_SETFLAGS, &flags) == 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flag_is_set_where_the_file_system_has_it() {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("work");
        let set = spread_children(&dir);
        assert!(dir.is_dir());
        // Where it is set, it is there when read back (`lsattr -d` shows `T`).
        let lsattr = std::process::Command::new("lsattr")
            .arg("-d")
            .arg(&dir)
            .output();
        match lsattr {
            Ok(o) if o.status.success() => {
                let attrs = String::from_utf8_lossy(&o.stdout);
                let attrs = attrs.split_whitespace().next().unwrap_or("");
                assert_eq!(set, attrs.contains('T'), "{attrs}");
                if !set {
                    println!("skipped: this file system has no FS_TOPDIR_FL ({attrs})");
                }
            }
            _ => println!("skipped: lsattr is not available to read the flag back"),
        }
        // Setting it again is a no-op that still says it is set.
        assert_eq!(spread_children(&dir), set);
    }
}
