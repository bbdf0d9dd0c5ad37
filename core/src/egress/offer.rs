//! Whether a worker gives tasks a network at all, and what a plan asks of its workers for
//! that (one rule for the plan, the claim and the worker):
//! - a worker gives the egress proxy unless its operator says `AKBENCH_EGRESS=off` (a
//!   cluster with no way out, or a policy); a worker that gives it advertises the label
//!   [`EGRESS_LABEL`];
//! - a plan holding a task whose agent or grading phase reaches anything
//!   ([`needs_egress`]) requires that label of its workers (`execution.worker_labels`, the
//!   claim's placement rule), so no such trial lands on a worker that would run it without
//!   its network and blame the agent;
//! - where the plan's workers are known when it is made (`akbench sweep` and local runs
//!   start their own), a plan needing the network on workers that give none is refused then
//!   ([`refusal`]), naming the tasks and the fix.

use super::PhaseNetworks;

/// The worker operator's switch: `on` (the default) or `off`.
pub const EGRESS_ENV: &str = "AKBENCH_EGRESS";

/// The label a worker that gives the egress proxy advertises, and that a plan with a task
/// needing the network requires.
pub const EGRESS_LABEL: &str = "akbench.egress";

/// Whether a worker whose environment holds `value` for [`EGRESS_ENV`] gives the egress
/// proxy; the error names the variable, the value and the fix.
pub fn gives_egress(value: Option<&str>) -> Result<bool, String> {
    match value.map(str::trim) {
        None | Some("") | Some("on") => Ok(true),
        Some("off") => Ok(false),
        Some(other) => Err(format!(
            "{EGRESS_ENV}: `{}` is not `on` or `off`; fix: set {EGRESS_ENV}=off for a worker that gives tasks no network, or unset it",
            crate::limits::elide(other)
        )),
    }
}

/// Whether a task with these phase networks needs a worker that gives the egress proxy.
pub fn needs_egress(networks: &PhaseNetworks) -> bool {
    networks.agent.reaches_anything() || networks.verifier.reaches_anything()
}

/// The plan's refusal when its workers give no network and some tasks need it (`needing`:
/// their ids); `None` when nothing needs it or the workers give it.
pub fn refusal(workers_give_egress: bool, needing: &[String]) -> Option<String> {
    if workers_give_egress || needing.is_empty() {
        return None;
    }
    let shown: Vec<&str> = needing.iter().take(5).map(String::as_str).collect();
    let more = match needing.len().saturating_sub(shown.len()) {
        0 => String::new(),
        n => format!(" and {n} more"),
    };
    Some(format!(
        "task(s) {}{more} need the network (their agent or grading phase is `public` or an allowlist), and the workers of this run give none ({EGRESS_ENV}=off); fix: run them on workers that give it (unset {EGRESS_ENV}), or select tasks whose network_mode is `no-network`",
        shown.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::egress::{AllowedHost, NetworkMode};

    #[test]
    fn the_switch_reads_on_off_and_nothing() {
        let table: &[(Option<&str>, Result<bool, ()>)] = &[
            (None, Ok(true)),
            (Some(""), Ok(true)),
            (Some("on"), Ok(true)),
            (Some(" off "), Ok(false)),
            (Some("off"), Ok(false)),
            (Some("no"), Err(())),
            (Some("OFF"), Err(())),
            (Some("0"), Err(())),
        ];
        for (value, want) in table {
            let got = gives_egress(*value);
            assert_eq!(got.clone().map_err(|_| ()), *want, "{value:?}");
            if let Err(e) = got {
                assert!(e.contains(EGRESS_ENV) && e.contains("fix:"), "{e}");
            }
        }
    }

    #[test]
    fn a_task_needs_egress_when_either_phase_reaches_anything() {
        let none = NetworkMode::NoNetwork;
        let public = NetworkMode::Public;
        let empty = NetworkMode::Allowlist(Vec::new());
        let one = NetworkMode::Allowlist(vec![AllowedHost::parse("pypi.org").unwrap()]);
        let table = [
            (&none, &none, false),
            (&empty, &none, false),
            (&empty, &empty, false),
            (&public, &none, true),
            (&none, &public, true),
            (&one, &none, true),
            (&none, &one, true),
            (&public, &public, true),
        ];
        for (agent, verifier, want) in table {
            let n = PhaseNetworks {
                agent: agent.clone(),
                verifier: verifier.clone(),
            };
            assert_eq!(needs_egress(&n), want, "{agent:?} / {verifier:?}");
        }
    }

    #[test]
    fn the_refusal_names_the_tasks_and_the_fix_only_when_it_applies() {
        let ids: Vec<String> = (1..=7).map(|i| format!("t{i}")).collect();
        assert_eq!(refusal(true, &ids), None);
        assert_eq!(refusal(false, &[]), None);
        let one = refusal(false, &ids[..1]).unwrap();
        assert!(one.starts_with("task(s) t1 need the network"), "{one}");
        assert!(one.contains("fix:") && one.contains(EGRESS_ENV), "{one}");
        let many = refusal(false, &ids).unwrap();
        assert!(many.contains("t1, t2, t3, t4, t5 and 2 more"), "{many}");
    }
}
