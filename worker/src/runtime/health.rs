//! Docker's healthcheck semantics applied in a running environment: a command run inside
//! it ([`super::shared::Env::exec`], as a probe with the environment's network as it is)
//! until it passes, fails its retries, or the attempt is cancelled; the rule of when to try
//! again is `core::healthcheck::next`. Used for the task's `[environment] healthcheck`, a
//! step's, and a sidecar service's (`runtime::world`).

use std::path::Path;

/// Polls `hc` in `env` until it passes ([`akbench_core::healthcheck::next`]): the task's
/// healthcheck, or a step's (`[[steps]] healthcheck`, after the step's setup). The error
/// says why it is unhealthy, with the last try's output.
pub fn poll(
    env: &super::shared::Env,
    hc: &akbench_core::healthcheck::Healthcheck,
    template: &crate::process::ProcessSpec,
    scratch: &Path,
    cancel: &crate::process::CancelToken,
) -> Result<(), String> {
    use akbench_core::healthcheck::{next, Next};
    use std::time::{Duration, Instant};
    let start = Instant::now();
    let mut failures = 0;
    for n in 1u64.. {
        let started_at = start.elapsed().as_secs_f64();
        let mut spec = template.clone();
        spec.argv = vec!["sh".into(), "-c".into(), hc.command.clone()];
        spec.stdout_path = scratch.join("healthcheck.stdout.log");
        spec.stderr_path = scratch.join("healthcheck.stderr.log");
        spec.timeout = Duration::from_secs_f64(hc.timeout_sec);
        spec.grace = Duration::from_secs(1);
        spec.tag = format!("{}-health-{n}", template.tag);
        spec.output_cap = 64 * 1024;
        let prepared = env
            .exec(
                spec.clone(),
                super::shared::ExecAs::Grader {
                    mounts: Vec::new(),
                    writable: Vec::new(),
                    limits: super::Limits::default(),
                },
                // A probe: the environment's network as it is, no proxy of its own.
                None,
            )
            .map_err(|e| format!("failed to run the healthcheck: {e}"))?;
        let guard = prepared.guard;
        let running = match crate::process::spawn(prepared.spec) {
            Ok(r) => r,
            Err(e) => {
                guard.finish();
                return Err(format!("failed to run the healthcheck: {e}"));
            }
        };
        let end = running.wait(cancel);
        guard.finish();
        if cancel.is_cancelled() {
            return Err("cancelled while the healthcheck ran".into());
        }
        let passed = end.exit_code == Some(0) && !end.timed_out;
        match next(hc, started_at, passed, &mut failures) {
            Next::Healthy => return Ok(()),
            Next::Unhealthy(why) => {
                let said = [&spec.stdout_path, &spec.stderr_path]
                    .iter()
                    .map(|p| {
                        akbench_core::bounded_read::ReadKind::Log
                            .read_text(p, akbench_core::bounded_read::Links::Refuse)
                            .unwrap_or_default()
                    })
                    .collect::<Vec<_>>()
                    .join("");
                let last = if end.timed_out {
                    format!("the last try ran out of its {}s", hc.timeout_sec)
                } else if let Some(code) = end.exit_code {
                    format!("the last try exited {code}")
                } else {
                    format!("the last try was killed by signal {:?}", end.signal)
                };
                return Err(format!(
                    "{why}; {last}: {}",
                    akbench_core::limits::elide(said.trim())
                ));
            }
            Next::Retry(secs) => {
                let until = Instant::now() + Duration::from_secs_f64(secs);
                while Instant::now() < until {
                    if cancel.is_cancelled() {
                        return Err("cancelled while the healthcheck ran".into());
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
        }
    }
    Ok(())
}
