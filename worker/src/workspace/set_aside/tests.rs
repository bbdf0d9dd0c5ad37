use super::*;
use std::fs;
use std::os::unix::ffi::OsStrExt;

fn mode(p: &Path) -> u32 {
    fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
}

fn chmod(p: &Path, m: u32) {
    fs::set_permissions(p, fs::Permissions::from_mode(m)).unwrap();
}

#[test]
fn what_git_cannot_record_is_set_aside_named_and_put_back() {
    let d = tempfile::tempdir().unwrap();
    let w = d.path().join("ws");
    fs::create_dir_all(w.join(".git/objects")).unwrap();
    fs::create_dir_all(w.join("lib/.git/refs")).unwrap();
    fs::write(w.join("lib/fix.py"), "fixed").unwrap();
    fs::create_dir_all(w.join("sub/.GIT")).unwrap();
    fs::write(w.join("sub/.GIT/config"), "x").unwrap();
    fs::write(w.join(std::ffi::OsStr::from_bytes(b"new\nline")), "n").unwrap();
    let fifo = CString::new(w.join("pipe").as_os_str().as_bytes()).unwrap();
    // SAFETY: a valid path.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
    // A device node, when this process may make one (root outside a user namespace).
    let dev = CString::new(w.join("null").as_os_str().as_bytes()).unwrap();
    // SAFETY: a valid path; makedev(1, 3) is /dev/null's number.
    let made_dev =
        unsafe { libc::mknod(dev.as_ptr(), libc::S_IFCHR | 0o644, libc::makedev(1, 3)) } == 0;
    let aside = d.path().join("aside");
    let set = set_aside(&w, &aside).unwrap();
    // While git reads: gone from the worktree; the worktree's own `.git` and the rest stay.
    assert!(w.join(".git/objects").is_dir());
    assert!(!w.join("lib/.git").exists() && w.join("lib/fix.py").is_file());
    assert!(!w.join("sub/.GIT").exists() && w.join("sub").is_dir());
    assert!(fs::symlink_metadata(w.join("pipe")).is_err());
    assert!(w.join(std::ffi::OsStr::from_bytes(b"new\nline")).is_file());
    let mut named: Vec<(String, Why)> = set
        .entries
        .iter()
        .map(|(p, w)| (quote_path(p), *w))
        .collect();
    named.sort_by(|a, b| a.0.cmp(&b.0));
    let mut expected = vec![
        ("lib/.git".to_string(), Why::NestedRepository),
        ("pipe".to_string(), Why::SpecialFile(Kind::Fifo)),
        ("sub/.GIT".to_string(), Why::RefusedName),
    ];
    if made_dev {
        expected.insert(1, ("null".to_string(), Why::SpecialFile(Kind::Device)));
    }
    assert_eq!(named, expected);
    let entries = set.restore();
    assert_eq!(entries.len(), expected.len());
    // Put back: the worktree is as the agent left it, the folder gone.
    assert!(w.join("lib/.git/refs").is_dir());
    assert!(w.join("sub/.GIT/config").is_file());
    assert!(fs::symlink_metadata(w.join("pipe"))
        .unwrap()
        .file_type()
        .is_fifo());
    assert!(!aside.exists());
}

/// Runs `check` as uid 65534 (in a forked child) when this process is root, so that file
/// modes bind as they do for an unprivileged worker; else in this process. `owned`: what
/// the child must own (given to 65534 first). Returns the check's exit code.
fn as_unprivileged(owned: &[&Path], check: impl FnOnce() -> i32) -> i32 {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return check();
    }
    for p in owned {
        std::os::unix::fs::lchown(p, Some(65534), Some(65534)).unwrap();
    }
    // SAFETY: the child drops to 65534, runs the check and leaves with _exit.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: plain system calls in the forked child.
        let code = if unsafe { libc::setgid(65534) != 0 || libc::setuid(65534) != 0 } {
            100
        } else {
            check()
        };
        // SAFETY: leaves the child without running the test harness's destructors.
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: waits for the child forked above.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    assert!(libc::WIFEXITED(status), "{status}");
    libc::WEXITSTATUS(status)
}

#[test]
fn unreadable_entries_are_made_readable_and_the_executable_bit_is_kept() {
    let d = tempfile::tempdir().unwrap();
    chmod(d.path(), 0o777);
    let w = d.path().join("ws");
    fs::create_dir_all(w.join("shut/inner")).unwrap();
    fs::write(w.join("shut/inner/f"), "x").unwrap();
    fs::write(w.join("run.sh"), "x").unwrap();
    fs::write(w.join("locked"), "x").unwrap();
    let all: Vec<PathBuf> = ["", "shut", "shut/inner", "shut/inner/f", "run.sh", "locked"]
        .iter()
        .map(|p| if p.is_empty() { w.clone() } else { w.join(p) })
        .collect();
    let owned: Vec<&Path> = all.iter().map(PathBuf::as_path).collect();
    chmod(&w.join("run.sh"), 0o100);
    chmod(&w.join("locked"), 0o000);
    chmod(&w.join("shut/inner/f"), 0o000);
    chmod(&w.join("shut/inner"), 0o000);
    chmod(&w.join("shut"), 0o000);
    chmod(&w, 0o000);
    let aside = d.path().join("aside");
    let code = as_unprivileged(&owned, || {
        let Ok(set) = set_aside(&w, &aside) else {
            return 1;
        };
        if !set.restore().is_empty() {
            return 2;
        }
        for p in ["run.sh", "locked", "shut/inner/f"] {
            if fs::read(w.join(p)).is_err() {
                return 3;
            }
        }
        0
    });
    assert_eq!(code, 0);
    // Only the owner's read bit was added: the executable bit git records is as it was.
    assert_eq!(mode(&w.join("locked")), 0o400);
    assert_eq!(mode(&w.join("run.sh")), 0o500);
    assert_eq!(mode(&w.join("shut")) & 0o700, 0o700);
    assert_eq!(mode(&w.join("shut/inner")) & 0o700, 0o700);
}

#[test]
fn a_read_only_folder_does_not_keep_an_entry_from_being_set_aside() {
    let d = tempfile::tempdir().unwrap();
    let w = d.path().join("ws");
    fs::create_dir_all(w.join("ro/.git")).unwrap();
    chmod(&w.join("ro"), 0o500);
    let set = set_aside(&w, &d.path().join("aside")).unwrap();
    assert!(!w.join("ro/.git").exists());
    assert_eq!(set.restore().len(), 1);
    assert!(w.join("ro/.git").is_dir());
}

#[test]
fn a_path_past_the_limit_is_set_aside_with_everything_below_it() {
    let d = tempfile::tempdir().unwrap();
    let w = d.path().join("ws");
    // 200 bytes a level: the 16th folder ends past MAX_PATH_BYTES.
    let name = "n".repeat(199);
    let mut p = w.clone();
    for _ in 0..18 {
        p.push(&name);
    }
    fs::create_dir_all(&p).unwrap();
    fs::write(p.join("f"), "x").unwrap();
    let set = set_aside(&w, &d.path().join("aside")).unwrap();
    let first_over = akbench_core::uncollectable::MAX_PATH_BYTES / 200 + 1;
    assert_eq!(set.entries.len(), 1, "{:?}", set.entries);
    assert_eq!(set.entries[0].1, Why::PathTooLong);
    assert_eq!(set.entries[0].0.len(), first_over * 200 - 1);
    let _ = set.restore();
    assert!(p.join("f").is_file());
}

#[test]
fn an_entry_the_worker_may_not_read_is_the_agents_doing_naming_it() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        akbench_core::testkit::skip(
            "an_entry_the_worker_may_not_read_is_the_agents_doing_naming_it",
            "needs root to make a file of another user",
        );
        return;
    }
    // A file of another user (root), unreadable, in a worktree of the worker (65534).
    let d = tempfile::tempdir().unwrap();
    chmod(d.path(), 0o777);
    let w = d.path().join("ws");
    fs::create_dir_all(w.join("a")).unwrap();
    fs::write(w.join("a/secret"), "x").unwrap();
    chmod(&w.join("a/secret"), 0o000);
    let aside = d.path().join("aside");
    let code = as_unprivileged(&[&w, &w.join("a")], || match set_aside(&w, &aside) {
        Err(Refusal::AgentLeft { path, .. }) if path == "a/secret" => 0,
        _ => 1,
    });
    assert_eq!(code, 0, "the refusal names a/secret");
}

#[test]
fn the_record_lists_at_most_max_entries_and_counts_the_rest() {
    let entries: Vec<(Vec<u8>, Why)> = (0..5)
        .map(|i| (format!("p{i}").into_bytes(), Why::SpecialFile(Kind::Fifo)))
        .collect();
    let (list, more) = listed(&entries, 3);
    assert_eq!(list.len(), 3);
    assert_eq!(more, 2);
    assert_eq!(list[0].0, "p0");
    assert!(list[0].1.starts_with("special file (FIFO)"));
    assert_eq!(listed(&entries, 10).1, 0);
}
