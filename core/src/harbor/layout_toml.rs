//! The `task.toml` of an exported Harbor-layout task (a multi-step task, or one with
//! sidecar services): the task's own `task.toml` as written, so every key Harbor reads
//! (`[[steps]]` with each step's `min_reward`, timeouts, healthcheck, artifacts, verifier
//! env; `multi_step_reward_strategy`; `artifacts`; the network) travels unchanged, with what
//! the plan fixed written over it: `[task] name` and `version`, the akbench identity in
//! `[metadata]`, the top-level agent and verifier timeouts, and `[environment] cpus` and
//! `memory_mb`. The image keys (`docker_image`, `image`) are dropped: the exported
//! environment's Dockerfile starts `FROM` the image the plan pinned.

use serde::Serialize;

/// What the plan fixes for one exported trial.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlannedToml<'a> {
    /// Task id (Harbor's name is `akbench/<id>`).
    pub task_id: &'a str,
    /// Task version.
    pub version: &'a str,
    /// Run key.
    pub run_key: &'a str,
    /// Planned trial UUID.
    pub trial_id: String,
    /// Planned trial key.
    pub trial_key: &'a str,
    /// Task release digest.
    pub task_digest: &'a str,
    /// Repetition.
    pub repetition: u32,
    /// Top-level agent timeout, seconds.
    pub agent_timeout_sec: f64,
    /// Top-level verifier timeout, seconds.
    pub verifier_timeout_sec: f64,
    /// CPUs.
    pub cpus: u32,
    /// Memory, MiB.
    pub memory_mb: u64,
}

/// The task's `task.toml` (`text`, as written) with what the plan fixes written over it;
/// an error when it does not parse as a TOML table.
pub fn layout_toml(text: &str, p: &PlannedToml) -> Result<String, String> {
    let mut doc: toml::Table = toml::from_str(text).map_err(|e| e.to_string())?;
    let task = table(&mut doc, "task");
    task.insert("name".into(), format!("akbench/{}", p.task_id).into());
    task.insert("version".into(), p.version.into());
    // The top-level `version` names the same thing; `[task] version` wins in both readers.
    doc.remove("version");
    let meta = table(&mut doc, "metadata");
    meta.insert("akbench_run_key".into(), p.run_key.into());
    meta.insert("akbench_trial_id".into(), p.trial_id.clone().into());
    meta.insert("akbench_trial_key".into(), p.trial_key.into());
    meta.insert("akbench_task_digest".into(), p.task_digest.into());
    meta.insert(
        "akbench_repetition".into(),
        toml::Value::Integer(p.repetition.into()),
    );
    table(&mut doc, "agent").insert("timeout_sec".into(), p.agent_timeout_sec.into());
    table(&mut doc, "verifier").insert("timeout_sec".into(), p.verifier_timeout_sec.into());
    let env = table(&mut doc, "environment");
    env.insert("cpus".into(), toml::Value::Integer(p.cpus.into()));
    env.insert(
        "memory_mb".into(),
        toml::Value::Integer(i64::try_from(p.memory_mb).unwrap_or(i64::MAX)),
    );
    env.remove("docker_image");
    env.remove("image");
    toml::to_string(&doc).map_err(|e| e.to_string())
}

/// The table `key` of `doc`, made when absent (a non-table value there is replaced).
fn table<'a>(doc: &'a mut toml::Table, key: &str) -> &'a mut toml::Table {
    let v = doc
        .entry(key.to_string())
        .or_insert_with(|| toml::Value::Table(toml::Table::new()));
    if !v.is_table() {
        *v = toml::Value::Table(toml::Table::new());
    }
    v.as_table_mut().expect("made a table")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn planned() -> PlannedToml<'static> {
        PlannedToml {
            task_id: "t-001",
            version: "2",
            run_key: "hb-1",
            trial_id: "0190a000-0000-7000-8000-000000000001".into(),
            trial_key: "hb-1/t-001/oracle/r1",
            task_digest: "sha256:ab",
            repetition: 3,
            agent_timeout_sec: 300.0,
            verifier_timeout_sec: 120.0,
            cpus: 2,
            memory_mb: 2048,
        }
    }

    /// (dotted path, the exported value as TOML, or `None`: absent).
    type Check = (&'static str, Option<&'static str>);

    /// Each case: the task.toml written, then the checks on the exported one.
    #[test]
    fn the_plan_is_written_over_the_task_and_the_rest_kept() {
        let cases: &[(&str, &[Check])] = &[
            (
                // A multi-step task: steps and strategy kept, plan written over it.
                "schema_version = \"1.4\"\nversion = \"9\"\nmulti_step_reward_strategy = \"final\"\n[task]\nname = \"org/x\"\n[agent]\ntimeout_sec = 10.0\n[environment]\nworkdir = \"/app\"\ncpus = 1\nallow_internet = false\ndocker_image = \"r/x@sha256:00\"\n[[steps]]\nname = \"open\"\nmin_reward = { reward = 1.0 }\n[steps.agent]\ntimeout_sec = 20.0\n[[steps]]\nname = \"close\"\n",
                &[
                    ("schema_version", Some("\"1.4\"")),
                    ("version", None),
                    ("multi_step_reward_strategy", Some("\"final\"")),
                    ("task.name", Some("\"akbench/t-001\"")),
                    ("task.version", Some("\"2\"")),
                    ("metadata.akbench_run_key", Some("\"hb-1\"")),
                    ("metadata.akbench_trial_key", Some("\"hb-1/t-001/oracle/r1\"")),
                    ("metadata.akbench_repetition", Some("3")),
                    ("agent.timeout_sec", Some("300.0")),
                    ("verifier.timeout_sec", Some("120.0")),
                    ("environment.cpus", Some("2")),
                    ("environment.memory_mb", Some("2048")),
                    ("environment.workdir", Some("\"/app\"")),
                    ("environment.allow_internet", Some("false")),
                    ("environment.docker_image", None),
                    ("steps.0.name", Some("\"open\"")),
                    ("steps.0.min_reward.reward", Some("1.0")),
                    ("steps.0.agent.timeout_sec", Some("20.0")),
                    ("steps.1.name", Some("\"close\"")),
                ],
            ),
            (
                // Sections the task leaves out are made; its metadata is kept.
                "[metadata]\ndifficulty = \"easy\"\n[environment]\nimage = \"r/y@sha256:00\"\n",
                &[
                    ("metadata.difficulty", Some("\"easy\"")),
                    ("metadata.akbench_task_digest", Some("\"sha256:ab\"")),
                    ("task.name", Some("\"akbench/t-001\"")),
                    ("agent.timeout_sec", Some("300.0")),
                    ("environment.image", None),
                    ("steps", None),
                ],
            ),
        ];
        for (written, checks) in cases {
            let out: toml::Value =
                toml::from_str(&layout_toml(written, &planned()).unwrap()).unwrap();
            for (path, want) in *checks {
                let mut v = Some(&out);
                for part in path.split('.') {
                    v = v.and_then(|v| match part.parse::<usize>() {
                        Ok(i) => v.get(i),
                        Err(_) => v.get(part),
                    });
                }
                let got = v.map(|v| v.to_string());
                assert_eq!(got.as_deref(), *want, "{path} of {written}");
            }
        }
        assert!(layout_toml("[task", &planned()).is_err());
    }
}
