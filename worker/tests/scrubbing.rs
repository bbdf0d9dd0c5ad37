//! Scrubbing credentials from stored files in constant memory: a file of hundreds of MB is
//! scrubbed by a child process whose peak resident memory (`VmHWM`) stays small. Before,
//! the scrubber read each file whole (a 3.5 GB artifact took the worker to 3.6 GB).

use akbench_core::redact::Redactor;
use std::collections::BTreeSet;
use std::io::Write;
use std::path::Path;

mod common;

const SECRET: &str = "sk-test-9f8e7d6c5b4a39281706";
const CHILD_ENV: &str = "AKBENCH_TEST_SCRUB_FILE";
const FILE_MB: usize = 256;

fn redactor() -> Redactor {
    Redactor::new([("API_KEY".to_string(), SECRET.to_string())])
}

/// Writes `FILE_MB` MiB of text with the secret in it: plainly, across every 1 MiB
/// boundary, and base32-encoded.
fn write_big(path: &Path) {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let line = b"the quick brown fox jumps over the lazy dog 0123456789 abcdefghijklmnopq\n";
    let mut written = 0usize;
    let mut next_boundary = 1 << 20;
    while written < FILE_MB << 20 {
        if written + line.len() + SECRET.len() > next_boundary {
            // Straddle the boundary: half the secret before it.
            let pad = next_boundary - written - SECRET.len() / 2;
            f.write_all(&vec![b'.'; pad]).unwrap();
            f.write_all(SECRET.as_bytes()).unwrap();
            written += pad + SECRET.len();
            next_boundary += 1 << 20;
            continue;
        }
        f.write_all(line).unwrap();
        written += line.len();
    }
    f.flush().unwrap();
}

fn vm_hwm_kb() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// The child's part: scrubs the file named by `CHILD_ENV` and prints its peak memory.
#[test]
fn helper_scrub_a_file() {
    let Some(path) = std::env::var_os(CHILD_ENV) else {
        return;
    };
    let before = vm_hwm_kb();
    let mut found = BTreeSet::new();
    let changed =
        akbench_worker::scrub::scrub_file(&redactor(), Path::new(&path), &mut found).unwrap();
    println!(
        "SCRUBBED changed={changed} found={found:?} hwm_before_kb={before} hwm_kb={}",
        vm_hwm_kb()
    );
}

#[test]
fn scrubbing_a_file_of_hundreds_of_mb_keeps_memory_small() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.log");
    write_big(&path);
    let size = std::fs::metadata(&path).unwrap().len();
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "helper_scrub_a_file",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, &path)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = stdout
        .lines()
        .find_map(|l| l.find("SCRUBBED").map(|i| &l[i..]))
        .unwrap_or_else(|| panic!("the child printed no result: {stdout}"));
    eprintln!("{line} (file {} MiB)", size >> 20);
    assert!(
        line.contains("changed=true") && line.contains("API_KEY"),
        "{line}"
    );
    let hwm: u64 = line
        .rsplit("hwm_kb=")
        .next()
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no peak memory in {line}"));
    assert!(
        hwm < 64 * 1024,
        "peak memory {hwm} kB scrubbing a {} MiB file",
        size >> 20
    );
    // The secret is gone everywhere, the boundaries included; the rest is unchanged.
    let text = std::fs::read(&path).unwrap();
    let s = String::from_utf8(text).unwrap();
    assert!(!s.contains(SECRET));
    assert_eq!(s.matches("[REDACTED:API_KEY]").count(), FILE_MB);
    assert!(s.starts_with("the quick brown fox"));
}

/// The agent's `/logs` (the `container` runtime mounts `/logs/agent` and `/logs/artifacts`
/// from the attempt's work folder, `<work>/logs/...`) are collected into the attempt's
/// artifacts when it ends, a failed attempt too: regular files only (a link to a host file
/// and a FIFO are skipped, with a note), at most `CAP_BYTES` in all (a 300 MB sparse file is
/// truncated at the cap, a later file skipped, with notes), every file scrubbed (the
/// credential plainly and base32-encoded). The agent runs under `direct` here (the only
/// runtime these machines run without a registry and mmdebstrap): unisolated, it writes to
/// `<work>/logs` by path, as a container agent writes to its `/logs`. Before, those folders
/// were bound straight into the results folder: links stayed in it, nothing was capped.
#[test]
fn the_agents_logs_are_collected_after_a_failed_attempt_without_links_and_capped() {
    use akbench_core::artifacts::CAP_BYTES;
    use akbench_core::lifecycle::State;
    use akbench_worker::orchestrator::Silent;
    use akbench_worker::process::CancelToken;
    use akbench_worker::runtime::RuntimeKind;
    let secret = "sk-logs-collect-5e3f2a19b7c4";
    let name = "AKBENCH_TEST_LOGS_KEY";
    std::env::set_var(name, secret);
    let c = common::corpus();
    let host = c.root().join("host-file.txt");
    std::fs::write(&host, format!("host {secret}\n")).unwrap();
    let script = format!(
        r#"set -e
logs="$(dirname "$PWD")/logs"
mkdir -p "$logs/agent" "$logs/artifacts/sub"
echo "key ${name}" > "$logs/agent/agent.log"
printf %s "${name}" | base32 > "$logs/artifacts/b32.txt"
ln -s {host} "$logs/artifacts/link"
mkfifo "$logs/artifacts/fifo"
truncate -s 300000000 "$logs/artifacts/sub/huge.bin"
echo later > "$logs/artifacts/z.txt"
exit 3
"#,
        host = host.display()
    );
    c.add_agent(
        "logger",
        &format!("adapter = \"scripted\"\nscript = \"logger.sh\"\ncredentials = [\"{name}\"]\n"),
        Some(&script),
    );
    let t = c.task("answer");
    let a = c.agent("logger");
    let mut req = c.request(&t, &a, "logger");
    req.options.runtime = RuntimeKind::Direct;
    let record = c
        .orchestrator()
        .run_trial(
            &req,
            &akbench_core::dispatch::Backoff::NONE,
            &Silent,
            &CancelToken::new(),
        )
        .unwrap()
        .record;
    let at = &record.attempts[0];
    assert_eq!(at.state, State::Failed, "{:?}", at.cause);
    assert_eq!(at.redacted, vec![name.to_string()]);
    let logs = req.out_dir.join(&at.artifacts_dir).join("logs");
    let agent_log = std::fs::read_to_string(logs.join("agent/agent.log")).unwrap();
    assert_eq!(agent_log, format!("key [REDACTED:{name}]\n"));
    let b32 = std::fs::read_to_string(logs.join("artifacts/b32.txt")).unwrap();
    assert!(b32.contains(&format!("[REDACTED:{name}]")), "{b32}");
    for skipped in ["link", "fifo", "z.txt"] {
        assert!(
            std::fs::symlink_metadata(logs.join("artifacts").join(skipped)).is_err(),
            "{skipped} was kept"
        );
    }
    let huge = std::fs::metadata(logs.join("artifacts/sub/huge.bin"))
        .unwrap()
        .len();
    let small = (agent_log.len() + b32.len()) as u64;
    assert!(huge + small <= CAP_BYTES + 64, "{huge} + {small}");
    assert!(huge + small >= CAP_BYTES - 64, "{huge} + {small}");
    let notes = std::fs::read_to_string(logs.join("collected.txt")).unwrap();
    for n in [
        "skipped `artifacts/link`: a symbolic link",
        "skipped `artifacts/fifo`: not a regular file",
        "truncated `artifacts/sub/huge.bin`",
        "skipped `artifacts/z.txt`",
    ] {
        assert!(notes.contains(n), "{n} not in {notes}");
    }
    // Nothing stored holds the credential, nor its base32.
    let mut stack = vec![req.out_dir.clone()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let ft = e.file_type().unwrap();
            if ft.is_dir() {
                stack.push(e.path());
            } else if ft.is_file() && e.metadata().unwrap().len() < (1 << 20) {
                let text = String::from_utf8_lossy(&std::fs::read(e.path()).unwrap()).into_owned();
                assert!(!text.contains(secret), "{}", e.path().display());
            }
        }
    }
}
