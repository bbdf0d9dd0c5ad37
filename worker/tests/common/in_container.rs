//! The escape suite again under the `container` runtime: [`rerun_suite`] starts a loopback
//! registry, pushes the Debian test image to it (`scripts/build-test-image`: python3, git,
//! pytest; no Rust toolchain), and re-executes the running test binary, every test but the
//! caller and the ones it names, with [`IMAGE_ENV`] set to the image pinned by digest. In
//! that child every task the corpus makes names that image ([`image`]) and every attack runs
//! under [`isolated`] = `container`, so each attack meets the container's root file system,
//! its copy-on-write layer and its grading in a fresh container instead of the host's.
//!
//! Needs what the container tests need (`registry::missing`: a root worker, the registry,
//! mmdebstrap); a test the child skipped makes this one skip too, saying which.

use super::registry::{base_tar, missing, Registry};
use akbench_worker::runtime::RuntimeKind;

/// The pinned image every corpus task names in the re-executed child.
pub const IMAGE_ENV: &str = "AKBENCH_TEST_CONTAINER_IMAGE";

/// The image cache every test of the re-executed suite shares.
pub const IMAGES_ENV: &str = "AKBENCH_TEST_CONTAINER_IMAGES";

/// The tests that do not apply in a container (comma-separated), for an unprivileged rerun
/// inside the re-executed child (`common::unprivileged` skips them too).
pub const SKIP_ENV: &str = "AKBENCH_TEST_CONTAINER_SKIP";

/// The shared image cache, in the re-executed child; `None` elsewhere.
pub fn images_dir() -> Option<std::path::PathBuf> {
    image()?;
    std::env::var_os(IMAGES_ENV).map(std::path::PathBuf::from)
}

/// The image the corpus's tasks run in, in the re-executed child; `None` elsewhere.
pub fn image() -> Option<String> {
    std::env::var(IMAGE_ENV).ok().filter(|v| !v.is_empty())
}

/// The runtime an attack is isolated by: `container` in the re-executed child, else
/// `sandbox`.
pub fn isolated() -> RuntimeKind {
    if image().is_some() {
        RuntimeKind::Container
    } else {
        RuntimeKind::Sandbox
    }
}

/// Re-executes this test binary, every test but `this` and `also_skip` (each with why it
/// does not apply in a container), under the `container` runtime; fails with the child's
/// output when a test failed there. Call it from a test named `this`.
pub fn rerun_suite(this: &str, also_skip: &[(&str, &str)]) {
    if image().is_some() || super::unprivileged::is_child() {
        return;
    }
    if let Some(why) = missing() {
        akbench_core::testkit::skip(this, &why);
        return;
    }
    let reg = Registry::start();
    eprintln!("in a container: pushing the test image to {}", reg.addr);
    let digest = reg.push(
        "akbench/escape:bookworm",
        &[(&base_tar(), "tar")],
        &["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
        Some("/srv/work"),
        None,
    );
    let pinned = format!("{}/akbench/escape@{digest}", reg.addr);
    let images = tempfile::tempdir().unwrap();
    let skip: Vec<&str> = also_skip.iter().map(|(t, _)| *t).collect();
    let tests = super::rerun::listed(this, &skip);
    let mut failed = Vec::new();
    let mut text = String::new();
    for test in &tests {
        let started = std::time::Instant::now();
        eprintln!("in a container: {test} ...");
        let (ok, t) = run_child(test, &pinned, images.path(), &reg.addr, &skip);
        eprintln!(
            "in a container: {test}: {} in {:.1} s",
            if ok { "passed" } else { "FAILED" },
            started.elapsed().as_secs_f64()
        );
        if !ok {
            failed.push(test.clone());
        }
        text.push_str(&t);
    }
    for (t, why) in also_skip {
        eprintln!("not rerun in a container: {t}: {why}");
    }
    super::rerun::conclude(
        this,
        &format!("under the container runtime ({pinned})"),
        &text,
        &failed,
    );
}

/// How long one re-executed test may take before it is killed and counted as failed (a
/// hang then names its test instead of timing the whole suite out).
const CHILD_LIMIT: std::time::Duration = std::time::Duration::from_secs(600);

/// Runs `test` alone in a child under the container runtime; `(passed, its output)`.
/// `skip`: the tests that do not apply in a container, for the unprivileged rerun the child
/// may run ([`SKIP_ENV`]).
fn run_child(
    test: &str,
    pinned: &str,
    images: &std::path::Path,
    registry: &str,
    skip: &[&str],
) -> (bool, String) {
    let dir = tempfile::tempdir().unwrap();
    let (out_path, err_path) = (dir.path().join("stdout"), dir.path().join("stderr"));
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test, "--nocapture"])
        .env(IMAGE_ENV, pinned)
        .env(IMAGES_ENV, images)
        .env(SKIP_ENV, skip.join(","))
        .env("AKBENCH_INSECURE_REGISTRIES", registry)
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + CHILD_LIMIT;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    let mut t = format!(
        "{}{}",
        std::fs::read_to_string(&out_path).unwrap_or_default(),
        std::fs::read_to_string(&err_path).unwrap_or_default()
    );
    if status.is_none() {
        t.push_str(&format!(
            "\n{test}: killed after {} s under the container runtime\n",
            CHILD_LIMIT.as_secs()
        ));
    }
    let ok = status.is_some_and(|s| s.success()) && t.contains("1 passed; 0 failed");
    (ok, t)
}
