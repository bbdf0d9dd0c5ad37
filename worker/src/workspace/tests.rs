use super::*;

/// A private view over a bare repository of its own, objects written to `objects`.
fn private_in(d: &Path, objects: &Path) -> Private {
    let repo = d.join("repo.git");
    let mut c = crate::git::git(Some(d));
    c.args(["init", "-q", "--bare"]).arg(&repo);
    run(c).unwrap();
    Private {
        objects: objects.to_path_buf(),
        repo: repo.clone(),
        borrowed: repo.join("objects"),
    }
}

fn failed_add(detail: &str) -> GitError {
    GitError {
        args: "add --all -- .".into(),
        detail: detail.into(),
    }
}

#[test]
fn a_git_add_refused_where_git_works_is_the_agents_doing() {
    let d = tempfile::tempdir().unwrap();
    let objects = d.path().join("objects");
    std::fs::create_dir(&objects).unwrap();
    let p = private_in(d.path(), &objects);
    let e = blame_add(&p, d.path(), failed_add("error: invalid path 'x'"));
    match e {
        WorkspaceError::AgentLeft(cause) => {
            assert!(cause.contains("invalid path 'x'"), "{cause}")
        }
        other => panic!("not the agent's: {other:?}"),
    }
}

#[test]
fn a_git_add_that_fails_for_the_host_stays_the_hosts() {
    let d = tempfile::tempdir().unwrap();
    let objects = d.path().join("objects");
    std::fs::create_dir(&objects).unwrap();
    let p = private_in(d.path(), &objects);
    // Git missing, a full disk: named by git's message.
    for detail in [
        "cannot start git: No such file or directory (os error 2)",
        "error: unable to write file: No space left on device",
    ] {
        assert!(
            matches!(
                blame_add(&p, d.path(), failed_add(detail)),
                WorkspaceError::Git(_)
            ),
            "{detail}"
        );
    }
    // Git cannot write an object of its own here either (its object folder is a file).
    std::fs::remove_dir(&objects).unwrap();
    std::fs::write(&objects, "not a folder").unwrap();
    assert!(matches!(
        blame_add(&p, d.path(), failed_add("error: something")),
        WorkspaceError::Git(_)
    ));
}
