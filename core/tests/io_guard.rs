//! One way to read a file and one way to write an output: a guard scans the workspace's
//! sources (each crate's `src/`, test code left out) and fails on a file read or write
//! outside the one reader (`akbench_core::bounded_read`), the one writer
//! (`akbench_core::output`) and the short list of exceptions below, each with its reason.
//! A second guard keeps `println!` out of the CLI: its output goes through `ctl/src/out.rs`,
//! which turns a failed write into one line and exit 3, never a panic.

use std::path::{Path, PathBuf};

/// What reads or writes a file directly.
const CALLS: &[&str] = &[
    "fs::read(",
    "fs::read_to_string(",
    "File::open(",
    "fs::write(",
    "File::create(",
    "OpenOptions::new(",
    "File::options(",
    "fs::copy(",
    "NamedTempFile",
];

/// The one reader and the one writer.
const HOMES: &[&str] = &["core/src/bounded_read.rs", "core/src/output.rs"];

/// Files allowed to read or write directly, and why. Kept short: a new entry needs a reason
/// a reviewer accepts (akbench's own private files, the kernel's, or a stream the one
/// reader and writer cannot express with the same guarantees).
const ALLOWED: &[(&str, &str)] = &[
    (
        "worker/src/agents.rs",
        "the agent cache, the worker's own folder: it builds an entry in a temporary folder it \
         creates (copies of the host's interpreter and the libraries ldd names, a launcher, \
         the marker written last), renames it into place, and locks with files of its own; \
         markers are read through bounded_read",
    ),
    (
        "worker/src/runtime/egress/store.rs",
        "the worker's egress cache, its own folder: bodies streamed (up to the cache's cap) \
         into temporary files it creates and renames into place, their sha256 checked on \
         every read, and its own metadata files",
    ),
    (
        "worker/src/runtime/trust.rs",
        "writes the merged certificate bundle into the attempt's scratch folder and its fresh \
         copy-on-write layer (files it makes there, a link in the way removed first); every \
         read goes through bounded_read (an image's bundle resolved inside the image's root)",
    ),
    (
        "core/src/testkit.rs",
        "test fixtures: writes task and agent trees into a test's temporary folder",
    ),
    (
        "core/src/evidence/plan_file.rs",
        "streams a plan (up to 2 GiB) into a temporary file it creates exclusively, seeks \
         back to write the digest, then links it into place without replacing anything",
    ),
    (
        "coordinator/src/pgcluster.rs",
        "the private PostgreSQL cluster's own data folder (certificates, pg_hba.conf, its \
         log) and /proc",
    ),
    (
        "coordinator/src/pgcluster/stale.rs",
        "the private cluster's postmaster.pid and owner file, and /proc/<pid>/{stat,comm}",
    ),
    (
        "coordinator/src/pgcluster/secret.rs",
        "/dev/urandom and the private cluster's password file, created 0600 in its own folder",
    ),
    (
        "ctl/src/cmd/harbor_export.rs",
        "writes and copies inside a staging folder it just created (tempfile::tempdir_in), \
         renamed onto --out as a whole; the task files it copies were loaded and checked",
    ),
    (
        "ctl/src/cmd/harbor_export/layout.rs",
        "the same export's Harbor-layout tasks: writes and copies inside the staging folder \
         harbor_export.rs created; the task folder it copies was loaded and checked (the task \
         loader refuses a link out of it, a FIFO or device, a file over its cap)",
    ),
    (
        "worker/src/evaluator/outputs.rs",
        "verifier outputs: opened O_NOFOLLOW|O_NONBLOCK, fstat-checked and capped like the \
         one reader, plus a single-link check, each failure a tampering verdict",
    ),
    (
        "worker/src/evaluator.rs",
        "writes over the workspace's own files (O_NOFOLLOW, regular files only) and copies \
         the task's checked tests into the grading folder it made",
    ),
    (
        "worker/src/scrub.rs",
        "streams files in constant memory: opened O_NOFOLLOW|O_NONBLOCK, written O_EXCL \
         beside them",
    ),
    (
        "worker/src/process.rs",
        "the capture files it creates for a child's output, and /proc/<pid>/{stat,environ}",
    ),
    (
        "worker/src/runtime/cgroup.rs",
        "cgroupfs control files and /proc/<pid>/{cgroup,stat,status}",
    ),
    (
        "worker/src/runtime/container.rs",
        "/proc/<pid>/{uid_map,gid_map,ns/user} of the sandbox it starts",
    ),
    (
        "worker/src/runtime/shared.rs",
        "the capture files it creates for an agent's output (as process.rs does), \
         /proc/<pid>/{status,comm,ns/*} of the environment it starts, \
         /proc/sys/kernel/cap_last_cap and /dev/null",
    ),
    (
        "worker/src/runtime/bwrap.rs",
        "/proc/sys probes and the sandbox's hosts file in its own folder",
    ),
    (
        "worker/src/runtime/mod.rs",
        "the sandbox's hosts file in its own folder and /proc/<pid>/comm",
    ),
    ("worker/src/runtime/net.rs", "/proc/thread-self/ns/net"),
    ("worker/src/daemon/preflight.rs", "/proc and /sys probes"),
    ("worker/src/spread.rs", "a folder opened to set its flags"),
    (
        "worker/src/orchestrator/attempt/phases.rs",
        "the instruction file in the agent's home folder it just created",
    ),
    (
        "worker/src/orchestrator/rebuild.rs",
        "diffs written into the scratch folder it created",
    ),
    (
        "worker/src/baseline.rs",
        "the worker's baseline cache: packs, HEAD, config and meta files it writes itself",
    ),
    (
        "worker/src/workspace.rs",
        "the git index of the workspace it created, and copies inside it",
    ),
    ("worker/src/mirror.rs", "the mirror cache's own git config"),
    ("worker/src/mirror/gc.rs", "the mirror cache's lock file"),
    (
        "worker/src/image/mod.rs",
        "the image store's own files (run.json, blobs, ready, locks) in its cache",
    ),
    (
        "worker/src/image/registry.rs",
        "a blob streamed into the image store's temporary file, digest-checked, renamed",
    ),
    (
        "worker/src/image/unpack.rs",
        "a layer blob from the image store, and the files a layer holds, created in the \
         rootfs it unpacks into",
    ),
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in rd.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if path.is_dir() {
            if name != "tests" {
                rust_files(&path, out);
            }
        } else if name.ends_with(".rs") && name != "tests.rs" && !name.ends_with("_tests.rs") {
            out.push(path);
        }
    }
}

/// The source without its test module (`#[cfg(test)] mod … {`, last in a file by the
/// workspace's convention) and without comment lines.
fn code_of(text: &str) -> String {
    let mut code = text;
    let mut from = 0;
    while let Some(at) = code[from..].find("#[cfg(test)]") {
        let start = from + at;
        let rest = code[start + "#[cfg(test)]".len()..].trim_start();
        if rest.starts_with("mod ") && rest.split('\n').next().is_some_and(|l| l.contains('{')) {
            code = &code[..start];
            break;
        }
        from = start + 1;
    }
    code.lines()
        .map(|l| {
            if l.trim_start().starts_with("//") {
                ""
            } else {
                l
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `(line, call)` of every direct read or write in `code`.
fn calls_in(code: &str) -> Vec<(usize, &'static str)> {
    let mut found = Vec::new();
    for (i, line) in code.lines().enumerate() {
        for call in CALLS {
            if line.contains(call) {
                found.push((i + 1, *call));
            }
        }
    }
    found
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("core sits in the workspace")
        .to_path_buf()
}

fn sources() -> Vec<(String, String)> {
    let root = workspace();
    let mut files = Vec::new();
    for krate in [
        "core",
        "proto",
        "worker",
        "coordinator",
        "ctl",
        "telemetry",
        "viewer",
    ] {
        rust_files(&root.join(krate).join("src"), &mut files);
    }
    files.sort();
    files
        .into_iter()
        .map(|f| {
            let rel = f
                .strip_prefix(&root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            let text = std::fs::read_to_string(&f).expect("reads a source file");
            (rel, text)
        })
        .collect()
}

#[test]
fn the_guard_finds_direct_reads_and_writes_outside_test_code() {
    let text = "fn a() { let b = std::fs::read(p); }\n// std::fs::write(p)\nfn c() { File::create(x); }\n#[cfg(test)]\nmod tests {\n    fn d() { std::fs::read_to_string(p); }\n}\n";
    assert_eq!(
        calls_in(&code_of(text)),
        vec![(1, "fs::read("), (3, "File::create(")]
    );
}

#[test]
fn every_file_read_and_output_write_goes_through_the_one_reader_and_writer() {
    let sources = sources();
    assert!(sources.len() > 200, "found the sources ({})", sources.len());
    let mut offenders = Vec::new();
    let mut used = std::collections::BTreeSet::new();
    for (rel, text) in &sources {
        if HOMES.contains(&rel.as_str()) {
            continue;
        }
        let code = code_of(text);
        let calls = calls_in(&code);
        if calls.is_empty() {
            continue;
        }
        if ALLOWED.iter().any(|(f, _)| f == rel) {
            used.insert(rel.clone());
            continue;
        }
        for (line, call) in calls {
            let shown = code.lines().nth(line - 1).unwrap_or("").trim();
            offenders.push(format!("{rel}:{line}: `{call}` in {shown}"));
        }
    }
    assert!(
        offenders.is_empty(),
        "direct file reads or writes (read a user's or the outside world's file with \
         akbench_core::bounded_read::ReadKind, write an output with akbench_core::output; an \
         exception goes in ALLOWED with its reason):\n{}",
        offenders.join("\n")
    );
    let stale: Vec<&str> = ALLOWED
        .iter()
        .map(|(f, _)| *f)
        .filter(|f| !used.contains(*f))
        .collect();
    assert!(
        stale.is_empty(),
        "ALLOWED lists files that no longer read or write directly; remove them: {stale:?}"
    );
}

#[test]
fn the_cli_prints_only_through_its_stdout_writer() {
    let mut offenders = Vec::new();
    for (rel, text) in sources() {
        if !rel.starts_with("ctl/src/") {
            continue;
        }
        for (i, line) in code_of(&text).lines().enumerate() {
            let bare = |m: &str| {
                line.match_indices(m)
                    .any(|(at, _)| !line[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_'))
            };
            if bare("println!(") || bare("print!(") {
                offenders.push(format!("{rel}:{}: {}", i + 1, line.trim()));
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "println!/print! in ctl/src (they panic when standard output fails; use outln!/out!, \
         ctl/src/out.rs):\n{}",
        offenders.join("\n")
    );
}
