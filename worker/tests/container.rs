//! The `container` runtime end to end: a real registry on loopback, a Debian image built
//! from packages (scripts/build-test-image) and pushed to it, pulled by digest, unpacked,
//! and attempts run in it: the oracle solves, a wrong agent does not, the agent sees the
//! image's files and not the host's, a tampered layer is refused with nothing of it cached,
//! and the sandbox's key escapes still fail.

mod common;

use akbench_core::image::ImageRef;
use akbench_core::record::RunRecord;
use akbench_worker::image::{ImageError, Store};
use common::container_trial::{
    first_attempt_file, registry_and_corpus, run_in_container, runs_here, DEBIAN_PATH,
};
use common::registry::{base_tar, layer, Registry};
use common::{Corpus, TEST_SH};
use std::fs;

const MARKER: &str = "only the image has this file";

/// The registry with the base image (Debian minbase, python3, git) plus a gzip layer with
/// a marker file and a zstd layer, and a corpus whose task `answer-image` runs in it.
struct Setup {
    reg: Registry,
    c: Corpus,
    digest: String,
}

fn setup() -> Setup {
    let (reg, c) = registry_and_corpus();
    let layers = c.root().join("layers");
    fs::create_dir_all(&layers).unwrap();
    let marker = layer(
        &layers,
        "marker",
        &[("etc/akbench-image-marker", MARKER)],
        "gzip",
    );
    let extra = layer(
        &layers,
        "extra",
        &[("opt/akbench/zstd-layer", "zstd\n")],
        "zstd",
    );
    let digest = reg.push(
        "akbench/base:bookworm",
        &[(&base_tar(), "tar"), (&marker, "gzip"), (&extra, "zstd")],
        &[DEBIAN_PATH, "IMAGE_VAR=from-the-image"],
        Some("/srv/work"),
        None,
    );
    c.add_task(
        "answer-image",
        &c.commit,
        TEST_SH,
        &format!(
            "[environment]\nimage = \"{}/akbench/base:bookworm\"\n[mutation]\npatch = \"mutation.patch\"\n",
            reg.addr
        ),
    );
    fs::copy(
        c.tasks().join("answer/mutation.patch"),
        c.tasks().join("answer-image/mutation.patch"),
    )
    .unwrap();
    Setup { reg, c, digest }
}

fn run(c: &Corpus, task: &str, agent: &str, name: &str) -> (RunRecord, String) {
    let record = run_in_container(c, task, agent, name, 60.0, 0);
    let stdout = first_attempt_file(c, name, "agent.stdout.log");
    let stderr = first_attempt_file(c, name, "agent.stderr.log");
    eprintln!(
        "{name}: state={} ok={:?} cause={:?}\nstdout={stdout}\nstderr={stderr}",
        record.outcome.state, record.outcome.ok, record.attempts[0].cause
    );
    (record, stdout)
}

#[test]
fn the_oracle_solves_in_the_image_and_a_wrong_agent_does_not() {
    if !runs_here("the_oracle_solves_in_the_image_and_a_wrong_agent_does_not") {
        return;
    }
    let s = setup();
    let (r, _) = run(&s.c, "answer-image", "oracle", "oracle");
    assert_eq!(r.outcome.ok, Some(true), "{:?}", r.attempts[0].cause);
    assert_eq!(r.options.runtime, "container");
    let facts = r.attempts[0]
        .agent_process
        .as_ref()
        .unwrap()
        .runtime
        .clone()
        .unwrap();
    assert_eq!(facts.name, "container");
    assert!(facts.isolated);
    let grade = r.attempts[0].grade.as_ref().unwrap();
    assert_eq!(grade.runtime.as_ref().unwrap().name, "container");
    // The record names the image by the digest it ran, not the tag.
    let pinned = format!("{}/akbench/base@{}", s.reg.addr, s.digest);
    let note = r.attempts[0].transitions[3].note.clone().unwrap();
    assert!(note.starts_with(&format!("container: {pinned}")), "{note}");
    let (r, _) = run(&s.c, "answer-image", "noop", "noop");
    assert_eq!(r.outcome.ok, Some(false), "{:?}", r.attempts[0].cause);
    assert_eq!(r.outcome.state.to_string(), "completed");
}

#[test]
fn the_agent_sees_the_image_not_the_host() {
    if !runs_here("the_agent_sees_the_image_not_the_host") {
        return;
    }
    let s = setup();
    let host_only = s.c.root().join("host-only-file");
    fs::write(&host_only, "host\n").unwrap();
    s.c.add_agent(
        "look",
        "adapter = \"scripted\"\nscript = \"look.sh\"\n",
        Some(&format!(
            "cat /etc/akbench-image-marker; echo\n\
             cat /opt/akbench/zstd-layer\n\
             echo \"pwd=$(pwd) uid=$(id -u) var=$IMAGE_VAR\"\n\
             test -f value.txt && echo workspace-here\n\
             python3 -c 'print(\"python-from-image\")'\n\
             for p in cargo rustc rustup; do command -v $p >/dev/null && echo \"HOST-TOOL $p\"; done\n\
             test -e /root/.cargo && echo HOST-CARGO-HOME\n\
             test -e {} && echo HOST-FILE\n\
             grep -q '^ID=debian' /etc/os-release && echo debian-release\n\
             echo written > /usr/local/bin/left-by-agent && echo cow-write-ok\n\
             echo log > /logs/agent/agent-log.txt && echo logs-ok\n\
             exit 0\n",
            host_only.display()
        )),
    );
    let (r, out) = run(&s.c, "answer-image", "look", "look1");
    assert_eq!(
        r.outcome.state.to_string(),
        "completed",
        "{:?}",
        r.attempts[0].cause
    );
    for want in [
        MARKER,
        "zstd",
        "pwd=/srv/work uid=0 var=from-the-image",
        "workspace-here",
        "python-from-image",
        "debian-release",
        "cow-write-ok",
        "logs-ok",
    ] {
        assert!(out.contains(want), "{want:?} missing: {out}");
    }
    for host in ["HOST-TOOL", "HOST-CARGO-HOME", "HOST-FILE"] {
        assert!(
            !out.contains(host),
            "the host leaked into the container: {out}"
        );
    }
    let log = s.c.root().join("out/look1/a1/logs/agent/agent-log.txt");
    assert_eq!(fs::read_to_string(log).unwrap(), "log\n");
    // A write to the image's file system stays in that attempt's copy-on-write layer.
    s.c.add_agent(
        "look2",
        "adapter = \"scripted\"\nscript = \"look2.sh\"\n",
        Some("test -e /usr/local/bin/left-by-agent && echo LEAKED || echo clean\nexit 0\n"),
    );
    let (_, out) = run(&s.c, "answer-image", "look2", "look2");
    assert!(out.contains("clean"), "{out}");
    // The cached image never changed.
    let roots = s.c.root().join("cache/images/roots");
    let hex = s.digest.strip_prefix("sha256:").unwrap();
    assert!(roots
        .join(hex)
        .join("rootfs/etc/akbench-image-marker")
        .is_file());
    assert!(!roots
        .join(hex)
        .join("rootfs/usr/local/bin/left-by-agent")
        .exists());
}

#[test]
fn escapes_still_fail_under_container() {
    if !runs_here("escapes_still_fail_under_container") {
        return;
    }
    let s = setup();
    let tasks = s.c.tasks().display().to_string();
    let script = format!(
        "cat \"{tasks}/answer/tests/test.sh\" && echo ESCAPED-read-tests\n\
         cat /proc/1/environ 2>/dev/null | grep -q AKBENCH_INSECURE && echo ESCAPED-environ\n\
         for s in kernel/hostname vm/swappiness kernel/core_pattern; do v=\"$(cat /proc/sys/$s)\"; if (printf '%s\\n' \"$v\" > /proc/sys/$s) 2>/dev/null; then echo \"ESCAPED wrote $s\"; else echo \"refused $s\"; fi; done\n\
         (echo 1 > /proc/sysrq-trigger) 2>/dev/null && echo ESCAPED-sysrq\n\
         ls /work >/dev/null 2>&1 && echo ESCAPED-host-root\n\
         echo 42 > value.txt; exit 0\n"
    );
    s.c.add_agent(
        "attack",
        "adapter = \"scripted\"\nscript = \"attack.sh\"\n",
        Some(&script),
    );
    let before: Vec<String> = ["kernel/hostname", "vm/swappiness", "kernel/core_pattern"]
        .iter()
        .map(|p| fs::read_to_string(format!("/proc/sys/{p}")).unwrap())
        .collect();
    let (r, out) = run(&s.c, "answer-image", "attack", "attack");
    assert!(!out.contains("ESCAPED"), "{out}");
    assert!(out.contains("refused kernel/core_pattern"), "{out}");
    let after: Vec<String> = ["kernel/hostname", "vm/swappiness", "kernel/core_pattern"]
        .iter()
        .map(|p| fs::read_to_string(format!("/proc/sys/{p}")).unwrap())
        .collect();
    assert_eq!(before, after);
    // Writing the answer is a legitimate fix here: the grade is honest about it.
    assert_eq!(r.outcome.ok, Some(true), "{:?}", r.attempts[0].cause);
}

#[test]
fn a_tampered_layer_is_refused_and_nothing_of_it_is_cached() {
    if !runs_here("a_tampered_layer_is_refused_and_nothing_of_it_is_cached") {
        return;
    }
    let reg = Registry::start();
    let dir = tempfile::tempdir().unwrap();
    let l = layer(dir.path(), "small", &[("etc/hello", "hello\n")], "gzip");
    let digest = reg.push("akbench/tampered:v1", &[(&l, "gzip")], &[], None, None);
    // The registry now serves other bytes for the layer.
    let layer_digest = akbench_core::digest::digest_bytes(&fs::read(&l).unwrap());
    let stored = reg.blob_file(&layer_digest);
    let mut bytes = fs::read(&stored).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    fs::write(&stored, bytes).unwrap();
    let mut store = Store::from_env(dir.path().join("images")).unwrap();
    store.insecure = vec![reg.addr.clone()];
    store.auth_file = None;
    let image = ImageRef::parse(&format!("{}/akbench/tampered@{digest}", reg.addr)).unwrap();
    let err = store.ensure(&image).unwrap_err();
    assert!(matches!(err, ImageError::Tampered { .. }), "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains(&layer_digest) && msg.contains("nothing of it is cached"),
        "{msg}"
    );
    let hex = layer_digest.strip_prefix("sha256:").unwrap();
    assert!(!dir.path().join("images/blobs/sha256").join(hex).exists());
    let leftovers: Vec<_> = fs::read_dir(dir.path().join("images/tmp"))
        .map(|rd| rd.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    let roots = dir.path().join("images/roots");
    assert!(!roots.join(digest.strip_prefix("sha256:").unwrap()).exists());
    // The intact image pulls and unpacks.
    let good = layer(dir.path(), "good", &[("etc/hello", "hello\n")], "tar");
    let d2 = reg.push("akbench/good:v1", &[(&good, "tar")], &[], None, None);
    let u = store
        .ensure(&ImageRef::parse(&format!("{}/akbench/good@{d2}", reg.addr)).unwrap())
        .unwrap();
    assert!(u.fetched);
    assert_eq!(
        fs::read_to_string(u.rootfs.join("etc/hello")).unwrap(),
        "hello\n"
    );
    // Plain HTTP to a registry not on the list is refused, naming the fix.
    let mut strict = store.clone();
    strict.insecure = Vec::new();
    let e = strict
        .resolve(&ImageRef::parse(&format!("{}/akbench/good:v1", reg.addr)).unwrap())
        .unwrap_err()
        .to_string();
    assert!(e.contains("failed TLS"), "{e}");
}

#[test]
fn the_cache_is_collected_least_recently_used_first_never_an_image_in_use() {
    if !runs_here("the_cache_is_collected_least_recently_used_first_never_an_image_in_use") {
        return;
    }
    let reg = Registry::start();
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::from_env(dir.path().join("images")).unwrap();
    store.insecure = vec![reg.addr.clone()];
    store.auth_file = None;
    let mut refs = Vec::new();
    for (i, name) in ["a", "b", "c"].iter().enumerate() {
        let l = layer(dir.path(), name, &[("data", &name.repeat(100_000))], "gzip");
        let d = reg.push(
            &format!("akbench/{name}:v1"),
            &[(&l, "gzip")],
            &[],
            None,
            None,
        );
        let r = ImageRef::parse(&format!("{}/akbench/{name}@{d}", reg.addr)).unwrap();
        drop(store.ensure(&r).unwrap());
        // Used in this order: a first (least recently), c last.
        let ready = dir
            .path()
            .join("images/roots")
            .join(d.strip_prefix("sha256:").unwrap())
            .join("ready");
        let t =
            std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000 + i as u64);
        fs::File::options()
            .write(true)
            .open(&ready)
            .unwrap()
            .set_modified(t)
            .unwrap();
        refs.push((r, d));
    }
    let blobs = || {
        fs::read_dir(dir.path().join("images/blobs/sha256"))
            .unwrap()
            .count()
    };
    assert_eq!(blobs(), 6, "3 configurations and 3 layers");
    // `a` is in use: it stays whatever the bound; `b` goes first, then `c`.
    let held = store.ensure(&refs[0].0).unwrap();
    let a_ready = held.rootfs.parent().unwrap().join("ready");
    fs::File::options()
        .write(true)
        .open(&a_ready)
        .unwrap()
        .set_modified(std::time::SystemTime::UNIX_EPOCH)
        .unwrap();
    let gone = store.gc(0).unwrap();
    assert_eq!(gone, vec![refs[1].1.clone(), refs[2].1.clone()]);
    assert!(
        held.rootfs.join("data").is_file(),
        "the image in use was removed"
    );
    assert_eq!(blobs(), 2, "only the kept image's blobs stay");
    drop(held);
    assert_eq!(store.gc(u64::MAX).unwrap(), Vec::<String>::new());
    assert_eq!(store.gc(0).unwrap(), vec![refs[0].1.clone()]);
    assert_eq!(blobs(), 0);
    // A removed image is pulled again when asked for.
    assert!(store.ensure(&refs[1].0).unwrap().fetched);
}

/// An image over its caps is refused by what its manifest says, before any blob is
/// downloaded: more layers than `AKBENCH_IMAGE_MAX_LAYERS` (the same blob pushed three
/// times), a configuration larger than `AKBENCH_IMAGE_MAX_CONFIG_BYTES`; the message names
/// the cap and its variable, and nothing is cached. The same image pulls under the defaults.
#[test]
fn an_image_over_its_layer_or_configuration_cap_is_refused_before_download() {
    if !runs_here("an_image_over_its_layer_or_configuration_cap_is_refused_before_download") {
        return;
    }
    let reg = Registry::start();
    let dir = tempfile::tempdir().unwrap();
    let l = layer(dir.path(), "same", &[("etc/same", "s\n")], "gzip");
    let big_env = format!("BIG={}", "x".repeat(4096));
    let layers = [(&*l, "gzip"), (&*l, "gzip"), (&*l, "gzip")];
    let digest = reg.push("akbench/capped:v1", &layers, &[&big_env], None, None);
    let image = ImageRef::parse(&format!("{}/akbench/capped@{digest}", reg.addr)).unwrap();
    let mut store = Store::from_env(dir.path().join("images")).unwrap();
    store.insecure = vec![reg.addr.clone()];
    store.auth_file = None;
    let mut few_layers = store.clone();
    few_layers.limits.layers = 2;
    let e = few_layers.ensure(&image).unwrap_err();
    assert!(matches!(e, ImageError::Unpack { .. }), "{e}");
    let e = e.to_string();
    assert!(
        e.contains("more than 2 layers") && e.contains("AKBENCH_IMAGE_MAX_LAYERS"),
        "{e}"
    );
    let mut small_config = store.clone();
    small_config.limits.config_bytes = 1024;
    let e = small_config.ensure(&image).unwrap_err().to_string();
    assert!(
        e.contains("more than 1024 configuration bytes")
            && e.contains("AKBENCH_IMAGE_MAX_CONFIG_BYTES"),
        "{e}"
    );
    let blobs = dir.path().join("images/blobs/sha256");
    let cached = fs::read_dir(&blobs).map_or(0, |rd| rd.count());
    assert_eq!(cached, 0, "nothing downloaded");
    let u = store.ensure(&image).unwrap();
    assert_eq!(
        fs::read_to_string(u.rootfs.join("etc/same")).unwrap(),
        "s\n"
    );

    // A gzip bomb (8 MiB of zeros, a few KiB pushed) stops at a 1 MiB unpacked cap, naming
    // it and its variable; the partial root is removed and the image is not ready.
    let zeros = "\0".repeat(8 << 20);
    let bomb = layer(dir.path(), "bomb", &[("zeros", &zeros)], "gzip");
    assert!(fs::metadata(&bomb).unwrap().len() < 1 << 20);
    let d = reg.push("akbench/bomb:v1", &[(&bomb, "gzip")], &[], None, None);
    let mut small = store.clone();
    small.limits.unpacked_bytes = 1 << 20;
    let e = small
        .ensure(&ImageRef::parse(&format!("{}/akbench/bomb@{d}", reg.addr)).unwrap())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("more than 1048576 unpacked bytes") && e.contains("AKBENCH_IMAGE_MAX_BYTES"),
        "{e}"
    );
    let hex = d.strip_prefix("sha256:").unwrap();
    assert!(!dir.path().join("images/roots").join(hex).exists());
    let partial: Vec<_> = fs::read_dir(dir.path().join("images/tmp"))
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("root-"))
        .collect();
    assert!(partial.is_empty(), "{partial:?}");
}
