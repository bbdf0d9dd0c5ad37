//! What the `container` runtime suites share: whether they can run here, a loopback
//! registry holding the Debian test image, and one trial run in a container.

use super::registry::{base_tar, missing, Registry};
use super::{corpus, Corpus};
use akbench_core::record::RunRecord;
use akbench_worker::orchestrator::Silent;
use akbench_worker::process::CancelToken;
use akbench_worker::runtime::RuntimeKind;

/// The `PATH` of the Debian test image.
pub const DEBIAN_PATH: &str = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Whether the container tests can run here; when not, `test` is skipped saying why.
pub fn runs_here(test: &str) -> bool {
    runs_unless(test, missing())
}

/// Whether `test` can run with `why` (a reason it cannot, if any); when not, it is skipped
/// saying why.
pub fn runs_unless(test: &str, why: Option<String>) -> bool {
    match why {
        None => true,
        Some(why) => {
            akbench_core::testkit::skip(test, &why);
            false
        }
    }
}

/// A registry the worker may reach without TLS (`AKBENCH_INSECURE_REGISTRIES`), and a corpus.
pub fn registry_and_corpus() -> (Registry, Corpus) {
    let reg = Registry::start();
    // SAFETY: set before any thread of this test reads the environment.
    unsafe { std::env::set_var("AKBENCH_INSECURE_REGISTRIES", &reg.addr) };
    (reg, corpus())
}

/// The registry with the Debian base image as `akbench/base:bookworm` (working folder
/// `/app`), and a corpus.
pub fn base_registry() -> (Registry, Corpus) {
    let (reg, c) = registry_and_corpus();
    reg.push(
        "akbench/base:bookworm",
        &[(&base_tar(), "tar")],
        &[DEBIAN_PATH],
        Some("/app"),
        None,
    );
    (reg, c)
}

/// Runs task `task` with agent `agent` as trial `name` under the container runtime, the
/// agent given `agent_timeout_sec` and the trial `retries` infrastructure retries; its record.
pub fn run_in_container(
    c: &Corpus,
    task: &str,
    agent: &str,
    name: &str,
    agent_timeout_sec: f64,
    retries: u32,
) -> RunRecord {
    let t = c.task(task);
    let a = c.agent(agent);
    let mut req = c.request(&t, &a, name);
    req.options.runtime = RuntimeKind::Container;
    req.options.agent_timeout_sec = Some(agent_timeout_sec);
    req.infrastructure_retries = retries;
    c.orchestrator()
        .run_trial(
            &req,
            &akbench_core::dispatch::Backoff::NONE,
            &Silent,
            &CancelToken::new(),
        )
        .unwrap()
        .record
}

/// File `file` of trial `name`'s first attempt folder; empty when there is none.
pub fn first_attempt_file(c: &Corpus, name: &str, file: &str) -> String {
    std::fs::read_to_string(c.root().join("out").join(name).join("a1").join(file))
        .unwrap_or_default()
}
