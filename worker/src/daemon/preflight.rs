//! The worker's start-up check: the `sandbox` runtime (the default) must work here before
//! the daemon takes work, else every attempt would end `invalid_configuration`. The probe is
//! the runtime's own ([`crate::runtime::sandbox_available`]); what is missing is named by
//! [`akbench_core::sandbox_needs::diagnose`] from the probe's message and what this process
//! sees of its confinement.

use akbench_core::sandbox_needs::{self, Confinement};

/// What this process sees of its own confinement.
pub fn confinement() -> Confinement {
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
    Confinement {
        seccomp_filter: sandbox_needs::seccomp_filter(&read("/proc/self/status")),
        proc_masked: sandbox_needs::proc_masked(&read("/proc/self/mountinfo")),
        // SAFETY: geteuid has no preconditions.
        uid: unsafe { libc::geteuid() },
    }
}

/// `Ok` when the sandbox runs here; otherwise the message to refuse the start with: what is
/// missing, the fix, and the probe's own words.
pub fn check_sandbox() -> Result<(), String> {
    let Err(reason) = crate::runtime::sandbox_available() else {
        return Ok(());
    };
    let c = confinement();
    let missing = sandbox_needs::diagnose(&reason, &c);
    Err(format!(
        "failed to start: the `sandbox` runtime cannot run here; {} (probe: {reason}); or start with --allow-unsandboxed to serve only `runtime: direct` plans (sandboxed attempts then end invalid_configuration)",
        missing.explain(&c)
    ))
}
