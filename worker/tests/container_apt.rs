//! Package managers inside the `container` runtime: the agent and the grader run
//! `apt-get install` of a `.deb` from an apt repository on the image's own file system (a
//! `file:` repository: the sandbox has no network), as Terminal-Bench agents and graders
//! do. apt drops to its `_apt` user to fetch, and the package's maintainer script adds a
//! system user and hands it a folder: none of it worked when the sandbox's user namespace
//! mapped one id (`setgroups ... Operation not permitted`).

mod common;

use akbench_core::record::RunRecord;
use common::container_trial::{
    first_attempt_file, registry_and_corpus, run_in_container, runs_unless, DEBIAN_PATH,
};
use common::registry::{base_tar, missing, Registry};
use common::Corpus;
use std::fs;
use std::path::Path;
use std::process::Command;

fn runs_here(test: &str) -> bool {
    let why = missing().or_else(|| {
        ["dpkg-deb", "dpkg-scanpackages"]
            .iter()
            .find(|p| Command::new(p).arg("--version").output().is_err())
            .map(|p| format!("`{p}` is not installed (apt-get install dpkg-dev)"))
    });
    runs_unless(test, why)
}

/// apt, pointed at the image's local repository only (the sandbox has no network).
const APT: &str = "apt-get -q -o Dir::Etc::SourceList=/etc/apt/akb.list -o Dir::Etc::SourceParts=-";

/// A layer with an apt repository at `/opt/akb-repo` holding `akb-hello` (its program
/// prints 42; its `postinst` adds the system user `akbsvc` and gives it
/// `/var/lib/akb-hello`), and `/etc/apt/akb.list` naming it.
fn repo_layer(dir: &Path) -> std::path::PathBuf {
    let pkg = dir.join("pkg");
    fs::create_dir_all(pkg.join("DEBIAN")).unwrap();
    fs::create_dir_all(pkg.join("usr/bin")).unwrap();
    fs::write(
        pkg.join("DEBIAN/control"),
        "Package: akb-hello\nVersion: 1.0\nArchitecture: all\nMaintainer: akbench <t@example.invalid>\nDescription: prints the answer\n",
    )
    .unwrap();
    let script = |p: &Path, text: &str| {
        use std::os::unix::fs::PermissionsExt;
        fs::write(p, text).unwrap();
        fs::set_permissions(p, fs::Permissions::from_mode(0o755)).unwrap();
    };
    script(
        &pkg.join("DEBIAN/postinst"),
        "#!/bin/sh\nset -e\nid akbsvc >/dev/null 2>&1 || useradd --system --no-create-home akbsvc\ninstall -d -o akbsvc -g akbsvc -m 0750 /var/lib/akb-hello\n",
    );
    script(&pkg.join("usr/bin/akb-hello"), "#!/bin/sh\necho 42\n");
    let stage = dir.join("stage");
    let repo = stage.join("opt/akb-repo");
    fs::create_dir_all(&repo).unwrap();
    let out = Command::new("dpkg-deb")
        .args(["--root-owner-group", "--build"])
        .arg(&pkg)
        .arg(repo.join("akb-hello_1.0_all.deb"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let out = Command::new("dpkg-scanpackages")
        .args([".", "/dev/null"])
        .current_dir(&repo)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    fs::write(repo.join("Packages"), &out.stdout).unwrap();
    fs::create_dir_all(stage.join("etc/apt")).unwrap();
    fs::write(
        stage.join("etc/apt/akb.list"),
        "deb [trusted=yes] file:/opt/akb-repo ./\n",
    )
    .unwrap();
    let tar = dir.join("repo.tar");
    let st = Command::new("tar")
        .args(["--owner=0", "--group=0", "--numeric-owner", "-C"])
        .arg(&stage)
        .arg("-cf")
        .arg(&tar)
        .arg(".")
        .status()
        .unwrap();
    assert!(st.success());
    tar
}

/// The registry with the Debian base and the repository layer, and a corpus.
fn setup() -> (Registry, Corpus) {
    let (reg, c) = registry_and_corpus();
    let layers = c.root().join("layers");
    fs::create_dir_all(&layers).unwrap();
    let repo = repo_layer(&layers);
    reg.push(
        "akbench/apt:bookworm",
        &[(&base_tar(), "tar"), (&repo, "tar")],
        &[DEBIAN_PATH],
        Some("/app"),
        None,
    );
    (reg, c)
}

fn run(c: &Corpus, task: &str, agent: &str, name: &str) -> (RunRecord, String) {
    let record = run_in_container(c, task, agent, name, 120.0, 0);
    let read = |f: &str| first_attempt_file(c, name, f);
    let (stdout, stderr) = (read("agent.stdout.log"), read("agent.stderr.log"));
    eprintln!(
        "{name}: state={} ok={:?} cause={:?}\nstdout={stdout}\nstderr={stderr}\ngrade={:?}",
        record.outcome.state, record.outcome.ok, record.attempts[0].cause, record.attempts[0].grade
    );
    (record, stdout)
}

/// The agent installs the package with apt-get (apt's `_apt` sandbox, the maintainer
/// script's new system user and its folder) and uses it; the grader installs it too, in its
/// own fresh view of the image, and grades with it.
#[test]
fn the_agent_and_the_grader_install_debian_packages_with_apt_get() {
    const TEST: &str = "the_agent_and_the_grader_install_debian_packages_with_apt_get";
    if !runs_here(TEST) {
        return;
    }
    let (reg, c) = setup();
    let test_sh = format!(
        "set -u\ncd \"$AKBENCH_WORKSPACE\"\n\
         {APT} update >/dev/null 2>&1 && {APT} install -y akb-hello >/dev/null 2>&1 || echo 'grader: apt-get failed'\n\
         want=\"$(akb-hello 2>/dev/null)\"\n\
         if [ -n \"$want\" ] && [ \"$(cat value.txt)\" = \"$want\" ]; then r=1; else r=0; fi\n\
         echo \"$r\" > \"$AKBENCH_VERIFIER_DIR/reward.txt\"\necho \"graded: reward $r\"\n"
    );
    c.add_task(
        "apt-task",
        &c.first_commit,
        &test_sh,
        &format!(
            "[environment]\nimage = \"{}/akbench/apt:bookworm\"\n",
            reg.addr
        ),
    );
    c.add_agent(
        "apt",
        "adapter = \"scripted\"\nscript = \"apt.sh\"\n",
        Some(&format!(
            "set -e\n{APT} update\n{APT} install -y akb-hello\n\
             akb-hello > value.txt\n\
             echo \"dpkg: $(dpkg-query -W -f '${{Status}}' akb-hello)\"\n\
             echo \"owner: $(stat -c %U /var/lib/akb-hello)\"\n\
             echo \"apt-user: $(stat -c %U /var/cache/apt/archives/partial)\"\n\
             grep -E '^(CapEff|CapBnd|NoNewPrivs):' /proc/self/status\n\
             sed 's/^ */map: /' /proc/self/uid_map\n"
        )),
    );
    let (r, out) = run(&c, "apt-task", "apt", "apt");
    assert_eq!(
        r.outcome.state.to_string(),
        "completed",
        "{:?}",
        r.attempts[0].cause
    );
    for want in [
        "dpkg: install ok installed",
        "owner: akbsvc",
        "apt-user: _apt",
    ] {
        assert!(out.contains(want), "{want:?} missing: {out}");
    }
    assert_eq!(r.outcome.ok, Some(true), "{:?}", r.attempts[0].grade);
    // Inside, root is the sandbox user (65534) and the rest the subordinate range; the
    // capabilities are the container set (no CAP_SYS_ADMIN, bit 21), `no_new_privs` is on.
    let map: Vec<Vec<&str>> = out
        .lines()
        .filter_map(|l| l.strip_prefix("map: "))
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(map[0], ["0", "65534", "1"], "{out}");
    assert_eq!(map[1], ["1", "1000000001", "65535"], "{out}");
    let caps = |name: &str| {
        let hex = out
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{name}:")))
            .unwrap_or_else(|| panic!("no {name}: {out}"))
            .trim();
        u64::from_str_radix(hex, 16).unwrap()
    };
    let want: u64 = [0u32, 1, 3, 4, 5, 6, 7, 8, 10, 18]
        .iter()
        .map(|b| 1u64 << b)
        .sum();
    assert_eq!(caps("CapBnd"), want, "{out}");
    assert_eq!(caps("CapEff"), want, "{out}");
    assert!(out.contains("NoNewPrivs:\t1"), "{out}");
    // An agent that does not install it writes nothing the grader accepts.
    let (r, _) = run(&c, "apt-task", "noop", "noop");
    assert_eq!(r.outcome.ok, Some(false), "{:?}", r.attempts[0].grade);
}
