//! Where a task is graded: in the environment the agent left (Harbor's `shared`) or in a
//! fresh grading sandbox (akbench's clean room, `separate`). Owns the default of a task that
//! sets no `[verifier] environment_mode` (the same rule as [`crate::egress::unset_default`]:
//! Harbor's `shared` for a task in Harbor's layout, `separate` for an akbench task with a
//! `[source]`), the run's setting asking for the clean room (`execution.grading_environment`),
//! and the name the record gives the result (`grade.environment`).

use serde::{Deserialize, Serialize};

/// The record's name of a grade made in the agent's environment.
pub const SHARED: &str = "shared";
/// The record's name of a grade made in a fresh sandbox because the run asked for it on a
/// task that grades in the agent's environment.
pub const SEPARATE: &str = "separate";

/// A task's `[verifier] environment_mode`, resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EnvironmentMode {
    /// A fresh grading sandbox: the clean copy of the baseline plus the agent's diff.
    Separate,
    /// The environment the agent left: its changes anywhere, its processes still running.
    Shared,
}

/// The mode of a task that sets no `environment_mode`: Harbor's default `shared` for a
/// task in Harbor's layout (no `[source]`: its workspace is its image's, and its graders
/// may query what the agent left running); `separate` for an akbench task with a
/// `[source]` (its grade is the diff against a pinned commit, graded in the clean room).
pub fn unset_default(has_source: bool) -> EnvironmentMode {
    if has_source {
        EnvironmentMode::Separate
    } else {
        EnvironmentMode::Shared
    }
}

/// The task's mode: what `environment_mode` says (`shared` or `separate`; the loader
/// refused anything else), else [`unset_default`].
pub fn task_mode(environment_mode: Option<&str>, has_source: bool) -> EnvironmentMode {
    match environment_mode {
        Some(SHARED) => EnvironmentMode::Shared,
        Some(_) => EnvironmentMode::Separate,
        None => unset_default(has_source),
    }
}

/// The run's setting (`execution.grading_environment` in the manifest): `task` (default)
/// grades where each task says; `separate` asks for the clean room everywhere.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum GradingEnvironment {
    /// Where the task says ([`task_mode`]).
    #[default]
    Task,
    /// A fresh grading sandbox for every task.
    Separate,
}

impl GradingEnvironment {
    /// Whether it is the default (`task`): left out of plans and digests then.
    pub fn is_default(&self) -> bool {
        *self == Self::Task
    }
}

/// Where an attempt is graded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GradeIn {
    /// In the environment the agent left.
    Shared,
    /// In a fresh sandbox, as the task says.
    Separate,
    /// In a fresh sandbox because the run asked for it, though the task grades in the
    /// agent's environment.
    SeparateAsked,
}

impl GradeIn {
    /// Whether grading happens in the agent's environment (which must then be kept).
    pub fn shared(self) -> bool {
        self == Self::Shared
    }

    /// The record's `grade.environment`: `shared`, `separate` when the run asked for the
    /// clean room on a task graded in the agent's environment, absent for a task graded in
    /// a fresh sandbox by its own choice (as records have always said).
    pub fn recorded(self) -> Option<&'static str> {
        match self {
            Self::Shared => Some(SHARED),
            Self::SeparateAsked => Some(SEPARATE),
            Self::Separate => None,
        }
    }
}

/// Where an attempt of a task (its `environment_mode`, whether it has a `[source]`) is
/// graded under the run's setting.
pub fn decide(
    environment_mode: Option<&str>,
    has_source: bool,
    run: GradingEnvironment,
) -> GradeIn {
    match (task_mode(environment_mode, has_source), run) {
        (EnvironmentMode::Separate, _) => GradeIn::Separate,
        (EnvironmentMode::Shared, GradingEnvironment::Task) => GradeIn::Shared,
        (EnvironmentMode::Shared, GradingEnvironment::Separate) => GradeIn::SeparateAsked,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_task_its_layout_and_the_run_decide_where_grading_happens() {
        use GradeIn::*;
        use GradingEnvironment as R;
        // (environment_mode, has [source], run's setting) -> where, recorded
        type Row = (Option<&'static str>, bool, R, GradeIn, Option<&'static str>);
        let table: [Row; 12] = [
            // Harbor's layout, nothing set: Harbor's default `shared`.
            (None, false, R::Task, Shared, Some("shared")),
            (None, false, R::Separate, SeparateAsked, Some("separate")),
            // akbench's own task, nothing set: the clean room.
            (None, true, R::Task, Separate, None),
            (None, true, R::Separate, Separate, None),
            // Set explicitly: the task's word, whatever its layout.
            (Some("shared"), true, R::Task, Shared, Some("shared")),
            (Some("shared"), false, R::Task, Shared, Some("shared")),
            (
                Some("shared"),
                true,
                R::Separate,
                SeparateAsked,
                Some("separate"),
            ),
            (
                Some("shared"),
                false,
                R::Separate,
                SeparateAsked,
                Some("separate"),
            ),
            (Some("separate"), false, R::Task, Separate, None),
            (Some("separate"), true, R::Task, Separate, None),
            (Some("separate"), false, R::Separate, Separate, None),
            (Some("separate"), true, R::Separate, Separate, None),
        ];
        for (mode, source, run, want, recorded) in table {
            let got = decide(mode, source, run);
            assert_eq!(got, want, "{mode:?} source={source} run={run:?}");
            assert_eq!(
                got.recorded(),
                recorded,
                "{mode:?} source={source} run={run:?}"
            );
            assert_eq!(got.shared(), want == Shared);
        }
    }

    #[test]
    fn the_default_follows_the_network_rule() {
        // A task in Harbor's layout gets Harbor's defaults for both (public, shared); an
        // akbench task with a [source] gets akbench's (no-network, separate).
        assert_eq!(unset_default(false), EnvironmentMode::Shared);
        assert_eq!(
            crate::egress::unset_default(false),
            crate::egress::NetworkMode::HARBOR_DEFAULT
        );
        assert_eq!(unset_default(true), EnvironmentMode::Separate);
        assert_eq!(
            crate::egress::unset_default(true),
            crate::egress::NetworkMode::NoNetwork
        );
    }

    #[test]
    fn the_run_setting_reads_and_writes_as_the_manifest_spells_it() {
        for (text, want) in [
            ("task", GradingEnvironment::Task),
            ("separate", GradingEnvironment::Separate),
        ] {
            let v: GradingEnvironment = serde_json::from_str(&format!("\"{text}\"")).unwrap();
            assert_eq!(v, want);
            assert_eq!(serde_json::to_string(&v).unwrap(), format!("\"{text}\""));
        }
        assert!(serde_json::from_str::<GradingEnvironment>("\"shared\"").is_err());
        assert!(GradingEnvironment::default().is_default());
        assert!(!GradingEnvironment::Separate.is_default());
    }
}
