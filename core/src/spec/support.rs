//! What akbench can execute today: the gate between a resolved condition and a plan.
//!
//! A manifest field either changes what runs, is recorded for provenance only (and the docs
//! say so), or is refused here. This module owns the refusals: [`check_executable`] looks at
//! a [`RunCondition`] and names every field whose value akbench would otherwise accept and
//! then ignore (a record would state an isolation, a reviewer or a selection rule that never
//! happened). `resolve` calls it, so `run plan`, `sweep` and `sweep --local` all refuse the
//! same things, before anything is written. docs/manifest.md has the full table of fields.

use super::{RunCondition, SpecAgent, DEFAULT_PROFILE};
use crate::manifest::Runtime;
use crate::selection::Selection;
use crate::task::Family;
use std::fmt;

/// One field whose value akbench cannot honour.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unsupported {
    /// The manifest field (dotted path), or the task file field.
    pub field: String,
    /// The value that was asked for.
    pub value: String,
    /// Why it cannot run and what to do instead.
    pub fix: String,
}

impl fmt::Display for Unsupported {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "`{}: {}` is not supported; {}",
            self.field, self.value, self.fix
        )
    }
}

/// Every value of `condition` that akbench would accept and then not honour, in field order.
pub fn unsupported(condition: &RunCondition) -> Vec<Unsupported> {
    let mut out = Vec::new();
    let mut refuse = |field: &str, value: String, fix: &str| {
        out.push(Unsupported {
            field: field.to_string(),
            value,
            fix: fix.to_string(),
        })
    };
    if condition.execution.runtime == Runtime::Container {
        let without: Vec<&str> = condition
            .tasks
            .iter()
            .filter(|t| t.image.is_none())
            .map(|t| t.release.id.as_str())
            .collect();
        if !without.is_empty() {
            refuse(
                "execution.runtime",
                "container".into(),
                &format!(
                    "the container runtime runs each task in its image, and {} name{} none; fix: set `environment.image` in their task.toml, or use `sandbox` (bubblewrap) or `direct`",
                    crate::limits::elide(&without.join(", ")),
                    if without.len() == 1 { "s" } else { "" }
                ),
            );
        }
    }
    if condition.execution.candidates > MAX_CANDIDATES {
        refuse(
            "execution.candidates",
            condition.execution.candidates.to_string(),
            &format!("at most {MAX_CANDIDATES} candidates per trial run; lower it"),
        );
    }
    if condition.evaluation.profile != DEFAULT_PROFILE {
        refuse(
            "evaluation.profile",
            condition.evaluation.profile.clone(),
            "only the `default` profile (the task's own tests) exists; remove the field",
        );
    }
    if let Some(reviewer) = &condition.evaluation.reviewer {
        refuse(
            "evaluation.reviewer",
            reviewer.clone(),
            "no reviewer grades trials yet; remove the field",
        );
    }
    for task in &condition.tasks {
        // A task with `[[steps]]` (core::task::steps) runs its steps in one environment of
        // its image, which only the container runtime gives.
        let runs = match task.family {
            Family::Artefact => true,
            Family::Lifecycle => condition.execution.runtime == Runtime::Container,
            // Sidecars (core::task::world) start only under the container runtime, and
            // a fresh grading sandbox cannot reach them (the task's own `environment_mode`
            // is checked by `Task::check_runtime`).
            Family::Interactive => {
                condition.execution.runtime == Runtime::Container
                    && condition.execution.grading_environment
                        != crate::grading_env::GradingEnvironment::Separate
            }
        };
        if !runs {
            refuse(
                &format!("family (task {})", task.release.id),
                task.family.to_string(),
                match task.family {
                    Family::Lifecycle => "a multi-step (`[[steps]]`) task runs its steps in one environment of its image, which only the container runtime provides; fix: set `execution.runtime: container`, or exclude the task (tasks.exclude)",
                    _ if condition.execution.runtime != Runtime::Container => "a task with sidecar services (`interactive`, environment/docker-compose.yaml) runs only under the container runtime, which starts them; fix: set `execution.runtime: container`, or exclude the task (tasks.exclude)",
                    _ => "a task with sidecar services (`interactive`) is graded in the agent's environment, the only one that reaches them; fix: remove `execution.grading_environment: separate`, or exclude the task (tasks.exclude)",
                },
            );
        }
        // MCP servers are tools the agent is given (core::task::mcp): an adapter that takes
        // none would run the task without them, and its failure would be counted as the
        // agent's (Harbor refuses such an agent too).
        if !task.mcp_servers.is_empty() {
            for agent in &condition.agents {
                let adapter = agent.descriptor.adapter.as_str();
                let mcp = crate::task::mcp::TAKES_MCP.contains(&adapter)
                    || crate::task::mcp::IGNORES_MCP.contains(&adapter);
                if !mcp {
                    refuse(
                        &format!("agents (task {}, agent {})", task.release.id, agent.label),
                        adapter.to_string(),
                        &format!(
                            "the task gives its agent MCP servers ({}), and the `{adapter}` adapter takes none (those that do: {}); fix: use one of them, or exclude the task (tasks.exclude)",
                            crate::limits::elide(&task.mcp_servers.join(", ")),
                            crate::task::mcp::TAKES_MCP.join(", ")
                        ),
                    );
                }
            }
        }
        if task.family != Family::Artefact && condition.execution.candidates > 1 {
            refuse(
                &format!("execution.candidates (task {})", task.release.id),
                condition.execution.candidates.to_string(),
                &format!(
                    "best-of-N candidates run only for `artefact` tasks (a `{}` task has no diff to select); exclude the task or remove the field",
                    task.family
                ),
            );
        }
    }
    out
}

/// The most candidates a trial may ask for (each is a full agent run).
pub const MAX_CANDIDATES: u32 = 100;

/// The selection rule a manifest asks for (`None`: the default, `first_solved`), or the
/// refusal of an unknown one.
pub fn selection(raw: Option<&str>) -> Result<Selection, Unsupported> {
    let Some(raw) = raw else {
        return Ok(Selection::default());
    };
    Selection::parse(raw).ok_or_else(|| Unsupported {
        field: "execution.selection".into(),
        value: raw.to_string(),
        fix: format!(
            "the selection rules are {}; use one of them (default first_solved)",
            crate::selection::SELECTION_RULES.join(", ")
        ),
    })
}

/// Manifest-level `credentials` that no agent of the run declares: nothing would check or pass
/// them (an attempt checks and passes exactly its agent's declared credentials), so listing one
/// is refused rather than recorded as if it mattered.
pub fn undeclared_credentials(manifest_names: &[String], agents: &[SpecAgent]) -> Vec<Unsupported> {
    manifest_names
        .iter()
        .filter(|n| !agents.iter().any(|a| a.descriptor.credentials.contains(n)))
        .map(|n| Unsupported {
            field: "credentials".into(),
            value: n.clone(),
            fix: format!(
                "no agent of the run declares `{n}`; declare it in the `credentials` of the agent descriptor that needs it (attempts check and pass only their agent's credentials)"
            ),
        })
        .collect()
}

/// `Ok` when every value of `condition` is one akbench honours; else the first refusal and a
/// count of the others (the message lists them all).
pub fn check_executable(condition: &RunCondition) -> Result<(), String> {
    let all = unsupported(condition);
    refusal(&all)
}

/// `Ok` for no refusals, else one message listing them all.
pub fn refusal(all: &[Unsupported]) -> Result<(), String> {
    if all.is_empty() {
        return Ok(());
    }
    let listed: Vec<String> = all.iter().map(|u| u.to_string()).collect();
    Err(listed.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::synthetic_condition;

    fn base() -> RunCondition {
        synthetic_condition(2, 1, 1)
    }

    #[test]
    fn the_defaults_run() {
        assert_eq!(unsupported(&base()), vec![]);
        assert!(check_executable(&base()).is_ok());
    }

    #[test]
    fn each_field_that_would_be_ignored_is_named() {
        type Edit = fn(&mut RunCondition);
        let table: &[(&str, Edit, &str)] = &[
            (
                "execution.runtime",
                |c| c.execution.runtime = Runtime::Container,
                "container",
            ),
            (
                "execution.candidates",
                |c| c.execution.candidates = MAX_CANDIDATES + 1,
                "101",
            ),
            (
                "evaluation.profile",
                |c| c.evaluation.profile = "strict".into(),
                "strict",
            ),
            (
                "evaluation.reviewer",
                |c| c.evaluation.reviewer = Some("gpt".into()),
                "gpt",
            ),
            (
                "family (task task-00000)",
                |c| c.tasks[0].family = Family::Interactive,
                "interactive",
            ),
            (
                "family (task task-00001)",
                |c| c.tasks[1].family = Family::Lifecycle,
                "lifecycle",
            ),
        ];
        for (field, edit, value) in table {
            let mut c = base();
            edit(&mut c);
            let got = unsupported(&c);
            assert_eq!(got.len(), 1, "{field}: {got:?}");
            assert_eq!(got[0].field, *field);
            assert_eq!(got[0].value, *value);
            let msg = check_executable(&c).unwrap_err();
            assert!(
                msg.contains(field) && msg.contains("not supported"),
                "{msg}"
            );
        }
    }

    #[test]
    fn a_multi_step_task_runs_under_the_container_runtime_only() {
        let mut c = base();
        c.tasks[1].family = Family::Lifecycle;
        let got = unsupported(&c);
        assert_eq!(got.len(), 1, "{got:?}");
        assert!(
            got[0].fix.contains("execution.runtime: container"),
            "{got:?}"
        );
        c.execution.runtime = Runtime::Container;
        for t in &mut c.tasks {
            t.image = Some("reg.example/t@sha256:0".into());
        }
        assert_eq!(unsupported(&c), vec![]);
    }

    #[test]
    fn a_task_with_sidecars_runs_under_container_graded_where_the_agent_was() {
        let mut c = base();
        c.tasks[0].family = Family::Interactive;
        let got = unsupported(&c);
        assert_eq!(got.len(), 1, "{got:?}");
        assert!(
            got[0].fix.contains("execution.runtime: container"),
            "{got:?}"
        );
        c.execution.runtime = Runtime::Container;
        for t in &mut c.tasks {
            t.image = Some("reg.example/t@sha256:0".into());
        }
        assert_eq!(unsupported(&c), vec![]);
        c.execution.grading_environment = crate::grading_env::GradingEnvironment::Separate;
        let got = unsupported(&c);
        assert_eq!(got.len(), 1, "{got:?}");
        assert!(
            got[0].field == "family (task task-00000)"
                && got[0].fix.contains("grading_environment: separate"),
            "{got:?}"
        );
    }

    #[test]
    fn a_task_with_mcp_servers_refuses_each_agent_that_takes_none() {
        let mut c = base();
        c.tasks[1].mcp_servers = vec!["warehouse".into()];
        let takes = |c: &RunCondition| unsupported(c).is_empty();
        for (adapter, ok) in [
            ("claude-code", true),
            ("codex", true),
            ("command", true),
            ("scripted", true),
            ("oracle", true),
            ("gemini-cli", true),
            ("qwen-code", true),
            ("opencode", true),
            ("mini-swe-agent", true),
            ("aider", false),
        ] {
            c.agents[0].descriptor.adapter = adapter.into();
            assert_eq!(takes(&c), ok, "{adapter}");
            if !ok {
                let got = unsupported(&c);
                assert_eq!(got.len(), 1, "{got:?}");
                assert_eq!(got[0].field, "agents (task task-00001, agent agent-00)");
                assert!(got[0].fix.contains("warehouse") && got[0].fix.contains("fix:"));
            }
        }
        // Only the task with servers refuses it.
        c.tasks[1].mcp_servers.clear();
        assert!(takes(&c));
    }

    #[test]
    fn recorded_only_fields_and_the_other_runtimes_pass() {
        let mut c = base();
        c.execution.runtime = Runtime::Sandbox;
        c.visibility = crate::manifest::Visibility::Public;
        c.references.authority = Some("TICKET-1".into());
        assert_eq!(unsupported(&c), vec![]);
    }

    #[test]
    fn a_manifest_credential_no_agent_declares_is_refused() {
        let mut c = base();
        c.agents[0].descriptor.credentials = vec!["API_KEY".into()];
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            undeclared_credentials(&names(&["API_KEY"]), &c.agents),
            vec![]
        );
        let got = undeclared_credentials(&names(&["API_KEY", "OTHER"]), &c.agents);
        assert_eq!(got.len(), 1);
        assert_eq!(
            (got[0].field.as_str(), got[0].value.as_str()),
            ("credentials", "OTHER")
        );
    }

    #[test]
    fn every_refusal_is_listed() {
        let mut c = base();
        c.execution.candidates = 200;
        c.evaluation.reviewer = Some("r".into());
        let msg = check_executable(&c).unwrap_err();
        assert!(msg.contains("execution.candidates") && msg.contains("evaluation.reviewer"));
    }

    #[test]
    fn candidates_run_for_artefact_tasks_and_name_the_others() {
        let mut c = base();
        c.execution.candidates = 3;
        assert_eq!(
            unsupported(&c),
            vec![],
            "three candidates of artefact tasks run"
        );
        c.tasks[1].family = Family::Lifecycle;
        let fields: Vec<String> = unsupported(&c).into_iter().map(|u| u.field).collect();
        assert_eq!(
            fields,
            [
                "family (task task-00001)",
                "execution.candidates (task task-00001)"
            ]
        );
    }

    #[test]
    fn an_unknown_selection_rule_is_refused() {
        assert_eq!(selection(None), Ok(Selection::FirstSolved));
        assert_eq!(selection(Some("best_score")), Ok(Selection::BestScore));
        assert_eq!(selection(Some("all")), Ok(Selection::All));
        let u = selection(Some("majority")).unwrap_err();
        assert_eq!(
            (u.field.as_str(), u.value.as_str()),
            ("execution.selection", "majority")
        );
        assert!(
            u.to_string().contains("first_solved, best_score, all"),
            "{u}"
        );
    }
}
