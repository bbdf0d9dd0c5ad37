use super::*;

fn spec(dir: &Path, script: &str, timeout_ms: u64) -> ProcessSpec {
    let home = dir.join("home");
    std::fs::create_dir_all(home.join("tmp")).unwrap();
    ProcessSpec {
        argv: vec!["bash".into(), "-c".into(), script.into()],
        cwd: dir.to_path_buf(),
        env: base_env(&home),
        stdout_path: dir.join("stdout.log"),
        stderr_path: dir.join("stderr.log"),
        output_cap: 1024,
        timeout: Duration::from_millis(timeout_ms),
        grace: Duration::from_millis(200),
        tag: format!("test-{}", uuid::Uuid::now_v7()),
        hooks: Default::default(),
    }
}

#[test]
fn exit_codes_and_output_are_captured() {
    let tmp = tempfile::tempdir().unwrap();
    let end = spawn(spec(tmp.path(), "echo out; echo err >&2; exit 7", 10_000))
        .unwrap()
        .wait(&CancelToken::new());
    assert_eq!(end.exit_code, Some(7));
    assert!(!end.timed_out && !end.cancelled);
    assert_eq!(
        std::fs::read_to_string(tmp.path().join("stdout.log")).unwrap(),
        "out\n"
    );
    assert_eq!(
        std::fs::read_to_string(tmp.path().join("stderr.log")).unwrap(),
        "err\n"
    );
}

#[test]
fn output_is_capped_but_counted() {
    let tmp = tempfile::tempdir().unwrap();
    let end = spawn(spec(tmp.path(), "head -c 100000 /dev/zero", 10_000))
        .unwrap()
        .wait(&CancelToken::new());
    assert_eq!(end.stdout_bytes, 100_000);
    assert!(end.truncated);
    assert_eq!(
        std::fs::metadata(tmp.path().join("stdout.log"))
            .unwrap()
            .len(),
        1024
    );
}

#[test]
fn environment_is_reduced_to_the_allow_list() {
    let tmp = tempfile::tempdir().unwrap();
    std::env::set_var("AKBENCH_TEST_SECRET_SHOULD_NOT_LEAK", "x");
    let mut s = spec(tmp.path(), "", 10_000);
    // `env -0` itself, not through a shell (which would add PWD, SHLVL and _).
    s.argv = vec!["env".into(), "-0".into()];
    let given = s.env.clone();
    let tag = s.tag.clone();
    let end = spawn(s).unwrap().wait(&CancelToken::new());
    assert_eq!(end.exit_code, Some(0));
    let out = std::fs::read(tmp.path().join("stdout.log")).unwrap();
    let child: BTreeMap<String, String> = out
        .split(|b| *b == 0)
        .filter(|kv| !kv.is_empty())
        .map(|kv| {
            let kv = String::from_utf8_lossy(kv);
            let (k, v) = kv.split_once('=').unwrap();
            (k.to_string(), v.to_string())
        })
        .collect();
    // Exactly what the spec gives, plus the attempt's tag: nothing inherited.
    let mut expected = given.clone();
    expected.insert(TAG_VAR.to_string(), tag);
    assert_eq!(child, expected);
    // And what the spec gives is the documented allow-list (docs/agents.md).
    let allowed: Vec<&str> = ENV_ALLOW_LIST
        .iter()
        .copied()
        .chain(["RUSTUP_HOME", "CARGO_HOME", "HOME", "TMPDIR"])
        .collect();
    for k in given.keys() {
        assert!(
            allowed.contains(&k.as_str()),
            "{k} is not on the allow-list"
        );
    }
    assert_eq!(child["HOME"], tmp.path().join("home").display().to_string());
    assert!(!child.contains_key("AKBENCH_TEST_SECRET_SHOULD_NOT_LEAK"));
}

fn pids_in(path: &Path) -> Vec<i32> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|s| s.parse().ok())
        .collect()
}

#[test]
fn timeout_kills_the_whole_group_and_escaped_processes() {
    let tmp = tempfile::tempdir().unwrap();
    let pids = tmp.path().join("pids");
    // A child, a grandchild, and a process that leaves the group with setsid; the parent
    // ignores SIGTERM so the SIGKILL path runs.
    let script = format!(
        "trap '' TERM; sleep 300 & echo $! >> {p}; (sleep 300 & echo $! >> {p}; wait) & \
         setsid sleep 300 & echo $! >> {p}; echo started; sleep 300",
        p = pids.display()
    );
    // The timeout leaves the script ample time to start its three sleepers on a loaded machine.
    let end = spawn(spec(tmp.path(), &script, 3_000))
        .unwrap()
        .wait(&CancelToken::new());
    assert!(end.timed_out);
    assert_eq!(end.signal, Some(libc::SIGKILL));
    let found = pids_in(&pids);
    assert_eq!(found.len(), 3, "{found:?}");
    for pid in found {
        assert!(is_gone(pid), "process {pid} survived the timeout");
    }
}

#[test]
fn sigterm_is_enough_for_a_well_behaved_child() {
    let tmp = tempfile::tempdir().unwrap();
    let end = spawn(spec(tmp.path(), "sleep 300", 300))
        .unwrap()
        .wait(&CancelToken::new());
    assert!(end.timed_out);
    assert_eq!(end.signal, Some(libc::SIGTERM));
}

#[test]
fn cancel_stops_the_process() {
    let tmp = tempfile::tempdir().unwrap();
    let token = CancelToken::new();
    let running = spawn(spec(tmp.path(), "sleep 300", 60_000)).unwrap();
    token.cancel();
    let end = running.wait(&token);
    assert!(end.cancelled && !end.timed_out);
}

#[test]
fn missing_program_is_not_found() {
    let tmp = tempfile::tempdir().unwrap();
    let mut s = spec(tmp.path(), "", 1000);
    s.argv = vec!["/nonexistent/agent-binary".into()];
    assert!(matches!(spawn(s), Err(SpawnError::NotFound { .. })));
}

/// A contained child's tree may outlive its leader (bwrap killed before it set its init's
/// parent-death signal: CI saw a cancelled `sleep 300` agent take 300 s). `wait` ends what is
/// left of the cgroups until the output pipes close, instead of waiting for the tree to end
/// by itself. Here the survivor leaves the process group with `setsid` and keeps stdout (in
/// the sandbox the group kill reaches only bwrap, never the tree).
#[test]
fn a_contained_tree_that_outlives_its_leader_is_ended_not_waited_for() {
    use crate::runtime::{cgroup::Group, Limits};
    let tmp = tempfile::tempdir().unwrap();
    // The leader exits only once the survivor has left its process group (`setsid` runs
    // the shell after setsid(2)): otherwise the group kill at the leader's end may catch it.
    let mut s = spec(
        tmp.path(),
        "setsid sh -c 'echo $$ > left; exec sleep 3600' &\n\
         while [ ! -s left ]; do sleep 0.01; done\necho started",
        600_000,
    );
    let group = Group::create(&s.tag, &Limits::default()).unwrap();
    s.hooks.cgroup_procs = group.procs_files();
    s.hooks.contained = true;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(spawn(s).unwrap().wait(&CancelToken::new()));
    });
    // A bound on a hang, not a timing assertion: the old code returned after 3600 s.
    let end = rx
        .recv_timeout(Duration::from_secs(120))
        .expect("wait() still waited for the tree that outlived its leader");
    assert_eq!(end.exit_code, Some(0));
    assert_eq!(end.stdout_bytes, "started\n".len() as u64);
    assert_eq!(group.kill_all_and_wait(Duration::from_secs(10)), 0);
    assert!(group.members().is_empty());
    group.remove();
}
