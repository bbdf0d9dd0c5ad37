//! `akbench up` (the real binary, a private data folder) and its PostgreSQL: SIGINT, SIGTERM
//! and SIGHUP each stop PostgreSQL and the next start works; after a SIGKILL of the whole
//! process group the next start recovers; the database needs the password kept 0600 in the
//! data folder; `up` raises its open-files limit to the hard one, as the coordinator and
//! worker daemons do (it serves both in one process).

mod common;

use common::examples;

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// `akbench up` on `tmp/data/postgres`, in a process group of its own, returned once it
/// prints that it serves (with its database line).
fn up(tmp: &Path) -> (Child, String) {
    up_with(tmp, Command::new(env!("CARGO_BIN_EXE_akbench")))
}

/// [`up`] with `command` (the `akbench` binary, with whatever the caller set on it).
fn up_with(tmp: &Path, mut command: Command) -> (Child, String) {
    let mut child = command
        .arg("up")
        .arg("--data-dir")
        .arg(tmp.join("data/postgres"))
        .args([
            "--grpc-listen",
            "127.0.0.1:0",
            "--http-listen",
            "127.0.0.1:0",
        ])
        .args(["--workers", "1", "--slots", "1"])
        .arg("--tasks-root")
        .arg(examples().join("tasks"))
        .arg("--agents-root")
        .arg(examples().join("agents"))
        .arg("--out")
        .arg(tmp.join("out"))
        .arg("--cache")
        .arg(tmp.join("cache"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut database = String::new();
    loop {
        let Some(Ok(line)) = lines.next() else {
            let status = child.wait().unwrap();
            panic!("akbench up ended {status:?} before serving");
        };
        if let Some(rest) = line.trim().strip_prefix("database") {
            database = rest.trim().to_string();
        }
        if line.contains("stops everything") {
            break;
        }
    }
    // Keep reading (and dropping) stdout so the process never blocks on a full pipe.
    std::thread::spawn(move || lines.for_each(drop));
    (child, database)
}

/// True when `pid` runs (exists and is not a zombie).
fn runs(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, rest)| rest.trim_start().to_string())
        })
        .is_some_and(|rest| !rest.starts_with('Z'))
}

fn postmaster(pg: &Path) -> i32 {
    let text = std::fs::read_to_string(pg.join("postmaster.pid")).expect("postmaster.pid");
    text.lines().next().unwrap().trim().parse().unwrap()
}

/// The soft and hard open-files limits of process `pid` (`/proc/<pid>/limits`).
fn open_files_limits(pid: u32) -> (String, String) {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .expect("a `Max open files` line");
    let mut fields = line["Max open files".len()..].split_whitespace();
    (
        fields.next().unwrap().to_string(),
        fields.next().unwrap().to_string(),
    )
}

#[test]
fn up_raises_its_open_files_limit_to_the_hard_one() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_akbench"));
    // Started with a soft limit of 256 under the hard one (a usual default is 1,024).
    // SAFETY: the closure only calls getrlimit/setrlimit (async-signal-safe) on a struct on
    // its own stack, between fork and exec.
    unsafe {
        command.pre_exec(|| {
            let mut l = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            if libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            l.rlim_cur = l.rlim_max.min(256);
            if libc::setrlimit(libc::RLIMIT_NOFILE, &l) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let (mut child, _) = up_with(tmp.path(), command);
    let (soft, hard) = open_files_limits(child.id());
    // SAFETY: kill has no memory-safety preconditions.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    assert_eq!(child.wait().unwrap().code(), Some(0));
    // An "unlimited" hard limit may be above what the kernel lets a soft one be (nr_open):
    // the raise then leaves the limit as it was, which this test cannot tell from no raise.
    if hard != "unlimited" {
        assert!(hard.parse::<u64>().unwrap() > 256, "hard limit {hard}");
        assert_eq!(soft, hard, "the soft open-files limit of `akbench up`");
    }
}

#[test]
fn up_stops_its_postgres_on_every_stop_signal_and_recovers_after_a_kill() {
    let tmp = tempfile::tempdir().unwrap();
    // The PostgreSQL account (as root: `postgres`) must reach the data folder.
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let pg = tmp.path().join("data/postgres");

    for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        let (mut child, database) = up(tmp.path());
        let pm = postmaster(&pg);
        assert!(runs(pm));
        // The printed URL carries no password; it says where the password is.
        assert!(
            database.contains("postgres://postgres@127.0.0.1:")
                && database.contains("akbench.secret"),
            "{database}"
        );
        // SAFETY: kill has no memory-safety preconditions.
        assert_eq!(unsafe { libc::kill(child.id() as i32, signal) }, 0);
        let status = child.wait().unwrap();
        assert_eq!(status.code(), Some(0), "signal {signal}: {status:?}");
        assert!(!runs(pm), "signal {signal}: PostgreSQL {pm} still runs");
        assert!(!pg.join("postmaster.pid").exists(), "signal {signal}");
    }
    let secret = pg.join("akbench.secret");
    let mode = std::fs::metadata(&secret).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);

    // SIGKILL of the whole process group: nothing is stopped cleanly; the next start works.
    let (mut child, _) = up(tmp.path());
    let killed_pm = postmaster(&pg);
    // SAFETY: as above; a negative pid names the process group.
    assert_eq!(
        unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) },
        0
    );
    child.wait().unwrap();
    let (mut child, _) = up(tmp.path());
    let pm = postmaster(&pg);
    assert_ne!(pm, killed_pm);
    assert!(!runs(killed_pm), "the killed run's PostgreSQL was stopped");
    // SAFETY: as above.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    assert_eq!(child.wait().unwrap().code(), Some(0));
    assert!(!runs(pm));
}

#[test]
fn sweep_cancels_on_sigterm_and_stops_its_postgres() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let pg = tmp.path().join("data/postgres");
    let manifest = tmp.path().join("experiment.yaml");
    std::fs::write(
        &manifest,
        "experiment: hangs\ntasks:\n  include: [\"wordcount-001\"]\nagents:\n  conditions:\n    \
         - descriptor: hang\nrepetitions: 1\nexecution:\n  runtime: direct\n",
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_akbench"))
        .arg("sweep")
        .arg(&manifest)
        .arg("--data-dir")
        .arg(&pg)
        .args(["--workers", "1", "--slots", "1"])
        .arg("--tasks-root")
        .arg(examples().join("tasks"))
        .arg("--agents-root")
        .arg(examples().join("agents"))
        .arg("--store-root")
        .arg(tmp.path().join("runs"))
        .arg("--out")
        .arg(tmp.path().join("out"))
        .arg("--cache")
        .arg(tmp.path().join("cache"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut seen = Vec::new();
    // The first progress line with a running trial: the agent hangs from then on.
    loop {
        let Some(Ok(line)) = lines.next() else {
            let status = child.wait().unwrap();
            panic!(
                "akbench sweep ended {status:?} before running:\n{}",
                seen.join("\n")
            );
        };
        let running = line.contains("running=1") || line.contains("1 running");
        seen.push(line);
        if running {
            break;
        }
    }
    let pm = postmaster(&pg);
    // SAFETY: kill has no memory-safety preconditions.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    let status = child.wait().unwrap();
    let text = format!("{}\n{}", seen.join("\n"), rest.join("\n"));
    assert_eq!(status.code(), Some(1), "interrupted: {text}");
    assert!(text.contains("cancelling (SIGTERM)"), "{text}");
    assert!(!runs(pm), "PostgreSQL {pm} still runs: {text}");
    assert!(!pg.join("postmaster.pid").exists());
}
