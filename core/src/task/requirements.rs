//! Harbor's `[environment] cpus`, `memory_mb` and `storage_mb` as requirements: what a task
//! needs from the run, checked against what the run gives when it is planned (a run that
//! gives less is refused, naming the task, the field, both values and the fix), recorded in
//! the plan when it gives enough. akbench never gives a task more than the run's limits: a
//! run's limits are the same for all its tasks.

use serde::{Deserialize, Serialize};

/// The disk limit of an attempt whose task names no `storage_mb`, in MiB (the worker's
/// `disk_mb`: worktree, home, private /tmp and /dev/shm together); not a setting of a run.
pub const DISK_MB: u64 = 4096;

/// What a task asks of the run (`[environment] cpus`, `memory_mb`, `storage_mb`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Requirements {
    /// CPUs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<u64>,
    /// Memory in MiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_mb: Option<u64>,
    /// Space the task may write, in MiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_mb: Option<u64>,
}

impl Requirements {
    /// True when the task asks for nothing.
    pub fn is_empty(&self) -> bool {
        *self == Requirements::default()
    }
}

/// What a run gives each attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Offered {
    /// `compute.cpus`.
    pub cpus: u64,
    /// `compute.memory_mb`.
    pub memory_mb: u64,
    /// The disk limit ([`DISK_MB`]).
    pub disk_mb: u64,
}

impl Offered {
    /// What a run of one task without a manifest (`akbench run single`) gives: `self` (the
    /// defaults of a manifest naming no compute), raised to what the task asks for CPUs and
    /// memory. The disk limit is not raised.
    pub fn raised_to(self, needs: &Requirements) -> Offered {
        Offered {
            cpus: self.cpus.max(needs.cpus.unwrap_or(0)),
            memory_mb: self.memory_mb.max(needs.memory_mb.unwrap_or(0)),
            disk_mb: self.disk_mb,
        }
    }
}

/// Refuses a run that gives `task` less than it asks: one line per short field, naming the
/// task, the field, both values and the fix. `Ok`: the run gives at least what is asked.
pub fn check(task: &str, needs: &Requirements, offered: &Offered) -> Result<(), String> {
    let mut short = Vec::new();
    let fix_for = |key: &str, want: u64| {
        format!(
            "set `compute.{key}: {want}` (or more) in the manifest, or leave the task out of this run"
        )
    };
    if let Some(want) = needs.cpus.filter(|w| *w > offered.cpus) {
        short.push(format!(
            "task `{task}` asks for `environment.cpus` = {want} but the run gives compute.cpus = {}; fix: {}",
            offered.cpus,
            fix_for("cpus", want)
        ));
    }
    if let Some(want) = needs.memory_mb.filter(|w| *w > offered.memory_mb) {
        short.push(format!(
            "task `{task}` asks for `environment.memory_mb` = {want} but the run gives compute.memory_mb = {}; fix: {}",
            offered.memory_mb,
            fix_for("memory_mb", want)
        ));
    }
    if short.is_empty() {
        Ok(())
    } else {
        Err(short.join("; "))
    }
}

/// The disk limit of one attempt of the task, in MiB: what the agent may add to every place
/// it can write. The task's `storage_mb` when it names one, any size (Harbor gives the
/// container that storage); else `run_disk_mb`, the run's own limit ([`DISK_MB`] unless
/// the operator set another).
pub fn attempt_disk_mb(needs: &Requirements, run_disk_mb: u64) -> u64 {
    needs.storage_mb.map_or(run_disk_mb, |s| s.max(1))
}

/// The disk limit of one grading run, in MiB: what the run may add, over what its writable
/// places held when it started, to the grading workspace, the verifier folder, the home,
/// the private `/tmp` and `/dev/shm` and (under `container`) the image's copy-on-write layer
/// together: the same as an attempt's ([`attempt_disk_mb`]; Harbor gives its verifier the
/// same container storage). A grading run that goes over it is stopped and recorded as the
/// agent's doing (`limit_hit: disk_mb`).
pub fn grading_disk_mb(needs: &Requirements) -> u64 {
    attempt_disk_mb(needs, DISK_MB)
}

/// The memory limit of one grading run, in MiB: `floor` (the worker's grading memory,
/// enough for a test suite's build and run), raised to the task's `memory_mb` when it asks
/// for more.
pub fn grading_memory_mb(needs: &Requirements, floor: u64) -> u64 {
    floor.max(needs.memory_mb.unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_that_gives_less_than_a_task_asks_is_refused_naming_field_values_and_fix() {
        let run = Offered {
            cpus: 2,
            memory_mb: 4096,
            disk_mb: DISK_MB,
        };
        let r = |cpus, memory_mb, storage_mb| Requirements {
            cpus,
            memory_mb,
            storage_mb,
        };
        // (asks, refused fields)
        let cases: &[(Requirements, &[&str])] = &[
            (r(None, None, None), &[]),
            (r(Some(1), Some(1024), Some(10)), &[]),
            // Exactly what the run gives is enough.
            (r(Some(2), Some(4096), Some(DISK_MB)), &[]),
            (r(Some(3), None, None), &["cpus"]),
            (r(None, Some(4097), None), &["memory_mb"]),
            // Any storage: it becomes the attempt's disk limit.
            (r(None, None, Some(DISK_MB + 1)), &[]),
            (r(Some(8), Some(8192), Some(10240)), &["cpus", "memory_mb"]),
        ];
        for (needs, refused) in cases {
            {
                let got = check("tb-x", needs, &run);
                if refused.is_empty() {
                    assert_eq!(got, Ok(()), "{needs:?}");
                    continue;
                }
                let msg = got.unwrap_err();
                for field in ["cpus", "memory_mb", "storage_mb"] {
                    let named = msg.contains(&format!("`environment.{field}`"));
                    assert_eq!(named, refused.contains(&field), "{field}: {msg}");
                }
                assert!(msg.contains("task `tb-x`") && msg.contains("fix:"), "{msg}");
                if refused.contains(&"cpus") {
                    assert!(
                        msg.contains(&format!(
                            "= {} but the run gives compute.cpus = 2",
                            needs.cpus.unwrap()
                        )),
                        "{msg}"
                    );
                    let knob = format!("set `compute.cpus: {}`", needs.cpus.unwrap());
                    assert!(msg.contains(&knob), "{msg}");
                }
                if refused.contains(&"memory_mb") {
                    assert!(msg.contains("compute.memory_mb = 4096"), "{msg}");
                }
                if refused.contains(&"storage_mb") {
                    assert!(msg.contains(&format!("may write {DISK_MB} MiB")), "{msg}");
                }
            }
            // A run of the task alone gives it what it asks, but never more disk.
            let single = run.raised_to(needs);
            let got = check("tb-x", needs, &single);
            assert_eq!(
                got.is_err(),
                refused.contains(&"storage_mb"),
                "{needs:?}: {got:?}"
            );
            assert_eq!(single.cpus, run.cpus.max(needs.cpus.unwrap_or(0)));
            assert_eq!(
                single.memory_mb,
                run.memory_mb.max(needs.memory_mb.unwrap_or(0))
            );
            assert_eq!(single.disk_mb, DISK_MB);
        }
    }

    #[test]
    fn attempts_and_grading_runs_get_the_tasks_storage_of_any_size() {
        let r = |memory_mb, storage_mb| Requirements {
            cpus: None,
            memory_mb,
            storage_mb,
        };
        // (asks, grading disk_mb, grading memory_mb with a floor of 8192)
        let cases = [
            (r(None, None), DISK_MB, 8192),
            (r(None, Some(32)), 32, 8192),
            (r(None, Some(DISK_MB)), DISK_MB, 8192),
            (r(None, Some(DISK_MB + 1)), DISK_MB + 1, 8192),
            (r(None, Some(10240)), 10240, 8192),
            (r(None, Some(0)), 1, 8192),
            (r(Some(1024), None), DISK_MB, 8192),
            (r(Some(16384), Some(64)), 64, 16384),
        ];
        for (needs, disk, memory) in cases {
            assert_eq!(grading_disk_mb(&needs), disk, "{needs:?}");
            assert_eq!(attempt_disk_mb(&needs, DISK_MB), disk, "{needs:?}");
            // A run's own limit stands unless the task names its storage.
            let run = attempt_disk_mb(&needs, 64);
            assert_eq!(run, needs.storage_mb.map_or(64, |s| s.max(1)), "{needs:?}");
            assert_eq!(grading_memory_mb(&needs, 8192), memory, "{needs:?}");
        }
    }
}
