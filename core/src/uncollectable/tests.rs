use super::*;

#[test]
fn a_git_folder_is_the_workspaces_own_at_the_root_and_nested_below_it() {
    assert_eq!(classify(b".git", Kind::Dir), Decision::Own);
    for rel in [&b"sub/.git"[..], b"a/b/.git"] {
        for kind in [Kind::Dir, Kind::File, Kind::Symlink] {
            assert_eq!(
                classify(rel, kind),
                Decision::SetAside(Why::NestedRepository),
                "{rel:?}"
            );
        }
    }
    assert_eq!(classify(b"sub/.gitignore", Kind::File), Decision::Collect);
    assert_eq!(classify(b"sub/x.git", Kind::Dir), Decision::Collect);
}

#[test]
fn special_files_are_set_aside_and_ordinary_entries_collected() {
    for kind in [Kind::Fifo, Kind::Socket, Kind::Device] {
        assert_eq!(
            classify(b"p", kind),
            Decision::SetAside(Why::SpecialFile(kind))
        );
    }
    for kind in [Kind::Dir, Kind::File, Kind::Symlink] {
        assert_eq!(classify(b"src/main.rs", kind), Decision::Collect);
    }
}

#[test]
fn paths_past_the_limit_are_set_aside() {
    let at = vec![b'a'; MAX_PATH_BYTES];
    assert_eq!(classify(&at, Kind::File), Decision::Collect);
    let mut over = at.clone();
    over.push(b'a');
    assert_eq!(
        classify(&over, Kind::Dir),
        Decision::SetAside(Why::PathTooLong)
    );
}

#[test]
fn the_names_git_refuses_are_refused_and_their_neighbours_are_not() {
    for name in [
        &b".GIT"[..],
        b".Git",
        b".git ",
        b".git.",
        b".git. .",
        b".git:stream",
        b"git~1",
        b"GIT~1",
        b"git~1 ",
        b"a\\.git",
        b"a\\git~1",
        b"..",
    ] {
        assert!(git_refuses(name, false), "{:?}", quote_path(name));
    }
    for name in [
        &b".gitignore"[..],
        b".github",
        b"git~1.txt",
        b"git~2",
        b".gitmodules",
        b"a\\b",
        b"x.git",
        b".git x",
    ] {
        assert!(!git_refuses(name, false), "{:?}", quote_path(name));
    }
    // Links (and folders, which may hold one) named `.gitmodules` or an alias of it.
    for name in [
        &b".gitmodules"[..],
        b".GITMODULES",
        b".gitmodules .",
        b"gitmod~1",
        b"GITMOD~4",
        b"gi7eba~1",
        b"gi7eb~12",
    ] {
        assert!(git_refuses(name, true), "{:?}", quote_path(name));
        assert_eq!(
            classify(name, Kind::Symlink),
            Decision::SetAside(Why::RefusedName)
        );
    }
    for name in [
        &b".gitmodulesx"[..],
        b"gitmod~5",
        b"gi7ebb~1",
        b".gitattributes",
    ] {
        assert!(!git_refuses(name, true), "{:?}", quote_path(name));
    }
}

/// The rule agrees with git itself: every name the rule refuses, `git add` refuses, and
/// every name it accepts, `git add` records (a missing git skips this check).
#[test]
fn the_rule_matches_git_add() {
    use std::process::Command;
    let Ok(v) = Command::new("git").arg("--version").output() else {
        crate::testkit::skip("the_rule_matches_git_add", "git is not installed");
        return;
    };
    assert!(v.status.success());
    let names: &[(&[u8], bool)] = &[
        (b".GIT", false),
        (b".git ", false),
        (b".git.", false),
        (b"git~1", false),
        (b"Git~1", false),
        (b"a\\.git", false),
        (b".gitignore", false),
        (b"git~1.txt", false),
        (b"a\\b", false),
        (b".github", false),
        (b".gitmodules", true),
        (b"gitmod~1", true),
        (b"gi7eba~1", true),
        (b".gitmodules", false),
        (b".gitmodulesx", true),
        (b"new\nline", false),
        (b"bad\xffutf8", false),
    ];
    for (name, link) in names {
        let d = tempfile::tempdir().unwrap();
        let git = |args: &[&str]| {
            Command::new("git")
                .current_dir(d.path())
                .env("GIT_CONFIG_GLOBAL", "/dev/null")
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .args(args)
                .output()
                .unwrap()
        };
        assert!(git(&["init", "-q"]).status.success());
        use std::os::unix::ffi::OsStrExt;
        let p = d.path().join(std::ffi::OsStr::from_bytes(name));
        if *link {
            std::os::unix::fs::symlink("target", &p).unwrap();
        } else {
            std::fs::write(&p, "x").unwrap();
        }
        let added = git(&["add", "--all"]).status.success();
        assert_eq!(
            added,
            !git_refuses(name, *link),
            "{} (link: {link}): git add {}",
            quote_path(name),
            if added { "accepts it" } else { "refuses it" }
        );
    }
}

#[test]
fn paths_are_quoted_as_git_quotes_them() {
    assert_eq!(quote_path(b"src/a b.rs"), "src/a b.rs");
    assert_eq!(quote_path(b"new\nline"), "new\\nline");
    assert_eq!(quote_path(b"bad\xff"), "bad\\377");
    assert_eq!(quote_path(b"back\\slash\t"), "back\\\\slash\\t");
    assert_eq!(quote_path("é".as_bytes()), "\\303\\251");
}

#[test]
fn every_reason_reads_as_the_record_states_it() {
    assert!(Why::NestedRepository
        .describe()
        .starts_with("nested repository"));
    assert!(Why::RefusedName.describe().starts_with("name git refuses"));
    assert!(Why::SpecialFile(Kind::Fifo)
        .describe()
        .starts_with("special file (FIFO)"));
    assert!(Why::PathTooLong.describe().starts_with("path too long"));
}
