use super::*;
use crate::clock::ManualClock;
use crate::testkit::{write_agent, write_task};
use chrono::TimeZone;

pub(crate) fn clock() -> ManualClock {
    ManualClock::new(Utc.with_ymd_and_hms(2026, 3, 4, 5, 6, 7).unwrap())
}

/// tasks a-001, a-002, a-003, broken-1 (no tests folder); agents oracle, fail.
pub(crate) fn fixture(root: &Path) -> (PathBuf, PathBuf) {
    let tasks = root.join("tasks");
    let agents = root.join("agents");
    for id in ["a-001", "a-002", "a-003"] {
        write_task(&tasks, id, "1.0");
    }
    std::fs::create_dir_all(tasks.join("broken-1")).unwrap();
    write_agent(&agents, "oracle", "oracle");
    // The manifest's run-level credential is one an agent declares (see `manifest`).
    std::fs::write(
        agents.join("oracle.toml"),
        "adapter = \"oracle\"\ncredentials = [\"API_TOKEN\"]\n",
    )
    .unwrap();
    write_agent(&agents, "fail", "scripted");
    (tasks, agents)
}

pub(crate) fn manifest(reps: u32) -> ExperimentManifest {
    let text = format!(
        "experiment: demo\ntasks:\n  include: [\"a-*\"]\n  exclude: [\"broken-*\"]\n\
         agents:\n  conditions:\n    - descriptor: oracle\n    - descriptor: fail\n\
         repetitions: {reps}\ncredentials: [API_TOKEN]\n"
    );
    ExperimentManifest::parse(&text, Path::new("experiment.yaml")).unwrap()
}

pub(crate) fn inputs(tasks: &Path, agents: &Path) -> ResolveInputs {
    ResolveInputs {
        manifest_path: None,
        tasks_root: Some(tasks.to_path_buf()),
        agents_root: Some(agents.to_path_buf()),
    }
}

#[test]
fn resolves_exact_releases_and_explicit_defaults() {
    let tmp = tempfile::tempdir().unwrap();
    let (tasks, agents) = fixture(tmp.path());
    let spec = resolve(&manifest(3), &inputs(&tasks, &agents), &clock()).unwrap();
    let c = &spec.condition;
    let ids: Vec<&str> = c.tasks.iter().map(|t| t.release.id.as_str()).collect();
    assert_eq!(ids, ["a-001", "a-002", "a-003"]);
    assert!(c
        .tasks
        .iter()
        .all(|t| t.release.digest.starts_with("sha256:")));
    assert_eq!(
        c.tasks[0].agent_timeout_sec,
        crate::task::DEFAULT_AGENT_TIMEOUT_SEC
    );
    assert_eq!(c.agents.len(), 2);
    assert_eq!(c.repetitions, 3);
    assert_eq!(c.execution.runtime, Runtime::Sandbox);
    assert_eq!(c.execution.infrastructure_retries, 0);
    assert_eq!(c.execution.candidates, 1);
    assert!(c.evaluation.grade);
    assert_eq!(c.evaluation.profile, "default");
    assert_eq!(c.credentials, ["API_TOKEN"]);
    assert!(crate::ids::is_uuid_v7(&spec.identity.run_id));
    assert!(spec.identity.run_key.starts_with("demo-20260304-"));
    assert!(spec.verify());
    // The canonical JSON round-trips to the same digest.
    let back: ResolvedRunSpec =
        serde_json::from_str(&crate::digest::canonical_json(&spec)).unwrap();
    assert!(back.verify());
    assert_eq!(back, spec);
}

#[test]
fn same_manifest_same_day_same_key_fresh_uuid() {
    let tmp = tempfile::tempdir().unwrap();
    let (tasks, agents) = fixture(tmp.path());
    let a = resolve(&manifest(3), &inputs(&tasks, &agents), &clock()).unwrap();
    let b = resolve(&manifest(3), &inputs(&tasks, &agents), &clock()).unwrap();
    assert_eq!(a.identity.run_key, b.identity.run_key);
    assert_ne!(a.identity.run_id, b.identity.run_id);
    assert_eq!(a.condition_digest, b.condition_digest);
    let c = resolve(&manifest(2), &inputs(&tasks, &agents), &clock()).unwrap();
    assert_ne!(a.condition_digest, c.condition_digest);
}

#[test]
fn a_run_level_credential_no_agent_declares_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let (tasks, agents) = fixture(tmp.path());
    let mut m = manifest(1);
    m.credentials.push("NOBODY_USES_IT".into());
    let err = resolve(&m, &inputs(&tasks, &agents), &clock()).unwrap_err();
    assert!(matches!(err, ResolveError::Unsupported(_)), "{err}");
    assert!(err.to_string().contains("NOBODY_USES_IT"), "{err}");
}

#[test]
fn a_value_akbench_would_ignore_is_refused_before_anything_is_written() {
    let tmp = tempfile::tempdir().unwrap();
    let (tasks, agents) = fixture(tmp.path());
    let mut m = manifest(1);
    m.execution.selection = Some("majority".into());
    let err = resolve(&m, &inputs(&tasks, &agents), &clock()).unwrap_err();
    assert!(matches!(err, ResolveError::Unsupported(_)), "{err}");
    assert!(err.to_string().contains("execution.selection"), "{err}");
}

#[test]
fn candidates_and_selection_are_in_the_spec_and_its_digest() {
    let tmp = tempfile::tempdir().unwrap();
    let (tasks, agents) = fixture(tmp.path());
    let mut m = manifest(1);
    m.execution.candidates = Some(3);
    let first = resolve(&m, &inputs(&tasks, &agents), &clock()).unwrap();
    assert_eq!(first.condition.execution.candidates, 3);
    assert_eq!(first.condition.execution.selection, Selection::FirstSolved);
    m.execution.selection = Some("first_solved".into());
    let explicit = resolve(&m, &inputs(&tasks, &agents), &clock()).unwrap();
    assert_eq!(
        explicit.condition, first.condition,
        "the default, named or not"
    );
    m.execution.selection = Some("best_score".into());
    let best = resolve(&m, &inputs(&tasks, &agents), &clock()).unwrap();
    assert_eq!(best.condition.execution.selection, Selection::BestScore);
    assert_ne!(
        crate::digest::digest_of(&best.condition),
        crate::digest::digest_of(&first.condition)
    );
}

#[test]
fn manifest_timeouts_override_the_tasks() {
    let tmp = tempfile::tempdir().unwrap();
    let (tasks, agents) = fixture(tmp.path());
    let mut m = manifest(1);
    m.compute.agent_timeout_sec = Some(42.0);
    let spec = resolve(&m, &inputs(&tasks, &agents), &clock()).unwrap();
    assert!(spec
        .condition
        .tasks
        .iter()
        .all(|t| t.agent_timeout_sec == 42.0));
}

#[test]
fn a_broken_task_or_unknown_agent_fails_with_the_loaders_error() {
    let tmp = tempfile::tempdir().unwrap();
    let (tasks, agents) = fixture(tmp.path());
    let mut m = manifest(1);
    m.tasks.exclude.clear();
    m.tasks.include.push("broken-*".into());
    let e = resolve(&m, &inputs(&tasks, &agents), &clock()).unwrap_err();
    assert!(matches!(e, ResolveError::Task(_)), "{e}");
    assert!(e.to_string().contains("broken-1"), "{e}");

    let mut m = manifest(1);
    m.agents.conditions[1].descriptor = "nobody".into();
    let e = resolve(&m, &inputs(&tasks, &agents), &clock()).unwrap_err();
    assert!(matches!(e, ResolveError::Agent(_)), "{e}");

    let mut m = manifest(1);
    m.tasks.include = vec!["zzz-*".into()];
    let e = resolve(&m, &inputs(&tasks, &agents), &clock()).unwrap_err();
    assert!(e.to_string().contains("zzz-*"), "{e}");
}

#[test]
fn roots_come_from_the_manifest_relative_to_its_folder() {
    let tmp = tempfile::tempdir().unwrap();
    fixture(tmp.path());
    let mut m = manifest(1);
    m.tasks.root = Some("tasks".into());
    m.agents.root = Some("agents".into());
    let inputs = ResolveInputs {
        manifest_path: Some(tmp.path().join("experiment.yaml")),
        ..ResolveInputs::default()
    };
    let spec = resolve(&m, &inputs, &clock()).unwrap();
    assert_eq!(spec.condition.tasks.len(), 3);
    m.tasks.root = None;
    let e = resolve(&m, &inputs, &clock()).unwrap_err();
    assert!(e.to_string().contains("--tasks-root"), "{e}");
}

#[test]
fn container_runtime_is_refused_for_tasks_without_an_image() {
    let tmp = tempfile::tempdir().unwrap();
    let (tasks, agents) = fixture(tmp.path());
    let mut m = manifest(1);
    m.execution.runtime = Some(Runtime::Container);
    let e = resolve(&m, &inputs(&tasks, &agents), &clock()).unwrap_err();
    assert!(
        e.to_string().contains("execution.runtime") && e.to_string().contains("sandbox"),
        "{e}"
    );
    m.execution.runtime = Some(Runtime::Direct);
    let spec = resolve(&m, &inputs(&tasks, &agents), &clock()).unwrap();
    assert_eq!(spec.condition.execution.runtime, Runtime::Direct);
}

#[test]
fn the_budget_is_in_the_spec_and_its_digest_and_absent_without_one() {
    let tmp = tempfile::tempdir().unwrap();
    let (tasks, agents) = fixture(tmp.path());
    let plain = resolve(&manifest(1), &inputs(&tasks, &agents), &clock()).unwrap();
    // Without a budget the spec JSON has no `budget` key: older specs keep their digests.
    assert!(!crate::digest::canonical_json(&plain).contains("budget"));
    let mut m = manifest(1);
    let text = "experiment: demo\ntasks:\n  include: [\"a-*\"]\nagents:\n  conditions:\n    - descriptor: oracle\nexecution:\n  budget: {usd: 12.5, tokens: 2000000}\n";
    let parsed = ExperimentManifest::parse(text, Path::new("experiment.yaml")).unwrap();
    m.execution.budget = parsed.execution.budget;
    let capped = resolve(&m, &inputs(&tasks, &agents), &clock()).unwrap();
    assert_eq!(
        capped.condition.execution.budget,
        Some(crate::budget::Budget {
            usd: Some(12.5),
            tokens: Some(2_000_000)
        })
    );
    assert_ne!(plain.condition_digest, capped.condition_digest);
    let back: ResolvedRunSpec =
        serde_json::from_str(&crate::digest::canonical_json(&capped)).unwrap();
    assert!(back.verify());
    assert_eq!(back, capped);
    // Unusable caps and unknown keys are refused at parse time, naming the field.
    for bad in ["{usd: 0}", "{tokens: 0}", "{usd: -1}", "{}", "{dollars: 3}"] {
        let text = format!("experiment: demo\ntasks:\n  include: [\"a-*\"]\nagents:\n  conditions:\n    - descriptor: oracle\nexecution:\n  budget: {bad}\n");
        let err = ExperimentManifest::parse(&text, Path::new("experiment.yaml")).unwrap_err();
        assert!(err.to_string().contains("budget"), "{bad}: {err}");
    }
}

#[test]
fn priority_and_weight_are_in_the_spec_only_when_not_the_default() {
    let tmp = tempfile::tempdir().unwrap();
    let (tasks, agents) = fixture(tmp.path());
    let plain = resolve(&manifest(1), &inputs(&tasks, &agents), &clock()).unwrap();
    // The defaults are left out of the JSON: older specs keep their digests.
    let json = crate::digest::canonical_json(&plain);
    assert!(
        !json.contains("priority") && !json.contains("weight"),
        "{json}"
    );
    assert_eq!(
        plain.condition.execution.share(),
        crate::dispatch::share::Share::default()
    );
    let mut m = manifest(1);
    m.execution.priority = Some(-2);
    m.execution.weight = Some(5);
    let shared = resolve(&m, &inputs(&tasks, &agents), &clock()).unwrap();
    assert_eq!(
        shared.condition.execution.share(),
        crate::dispatch::share::Share {
            priority: -2,
            weight: 5
        }
    );
    assert_ne!(plain.condition_digest, shared.condition_digest);
    let back: ResolvedRunSpec =
        serde_json::from_str(&crate::digest::canonical_json(&shared)).unwrap();
    assert!(back.verify());
    assert_eq!(back, shared);
    // A manifest built in code is checked again at resolve, naming the field.
    m.execution.weight = Some(0);
    let e = resolve(&m, &inputs(&tasks, &agents), &clock()).unwrap_err();
    assert!(e.to_string().contains("execution.weight"), "{e}");
}

#[test]
fn the_diff_limit_is_in_the_spec_and_the_plan_only_when_not_the_default() {
    let tmp = tempfile::tempdir().unwrap();
    let (tasks, agents) = fixture(tmp.path());
    let plain = resolve(&manifest(1), &inputs(&tasks, &agents), &clock()).unwrap();
    assert_eq!(plain.condition.compute.diff_mb, DEFAULT_DIFF_MB);
    // The default is left out of the JSON: older specs and plans keep their digests.
    assert!(!crate::digest::canonical_json(&plain).contains("diff_mb"));
    let mut m = manifest(1);
    m.compute.diff_mb = Some(1);
    let small = resolve(&m, &inputs(&tasks, &agents), &clock()).unwrap();
    assert_eq!(small.condition.compute.diff_mb, 1);
    assert!(crate::digest::canonical_json(&small).contains("\"diff_mb\":1"));
    assert_ne!(plain.condition_digest, small.condition_digest);
    let back: ResolvedRunSpec =
        serde_json::from_str(&crate::digest::canonical_json(&small)).unwrap();
    assert!(back.verify());
    assert_eq!(back, small);
    // Every planned trial carries it to the worker (its compute condition).
    for (spec, want) in [(&plain, DEFAULT_DIFF_MB), (&small, 1)] {
        let plan = crate::plan::plan(spec, &clock());
        assert!(plan.trials.iter().all(|t| t.compute.diff_mb == want));
        let json = serde_json::to_string(&plan.trials[0]).unwrap();
        assert_eq!(json.contains("diff_mb"), want != DEFAULT_DIFF_MB, "{json}");
        let t: crate::plan::PlannedTrial = serde_json::from_str(&json).unwrap();
        assert_eq!(t.compute.diff_mb, want);
    }
}

#[test]
fn the_grading_environment_is_in_the_spec_and_the_plan_only_when_asked() {
    use crate::grading_env::GradingEnvironment;
    let tmp = tempfile::tempdir().unwrap();
    let (tasks, agents) = fixture(tmp.path());
    let plain = resolve(&manifest(1), &inputs(&tasks, &agents), &clock()).unwrap();
    assert_eq!(
        plain.condition.execution.grading_environment,
        GradingEnvironment::Task
    );
    // The default is left out of the JSON: older specs and plans keep their digests.
    assert!(!crate::digest::canonical_json(&plain).contains("grading_environment"));
    let mut m = manifest(1);
    m.execution.grading_environment = Some(GradingEnvironment::Separate);
    let clean = resolve(&m, &inputs(&tasks, &agents), &clock()).unwrap();
    assert!(crate::digest::canonical_json(&clean).contains("\"grading_environment\":\"separate\""));
    assert_ne!(plain.condition_digest, clean.condition_digest);
    let back: ResolvedRunSpec =
        serde_json::from_str(&crate::digest::canonical_json(&clean)).unwrap();
    assert!(back.verify());
    assert_eq!(back, clean);
    // Every planned trial carries it to the worker (its compute condition).
    for (spec, want) in [
        (&plain, GradingEnvironment::Task),
        (&clean, GradingEnvironment::Separate),
    ] {
        let plan = crate::plan::plan(spec, &clock());
        assert!(plan
            .trials
            .iter()
            .all(|t| t.compute.grading_environment == want));
        let json = serde_json::to_string(&plan.trials[0]).unwrap();
        assert_eq!(
            json.contains("grading_environment"),
            !want.is_default(),
            "{json}"
        );
        let t: crate::plan::PlannedTrial = serde_json::from_str(&json).unwrap();
        assert_eq!(t.compute.grading_environment, want);
    }
}

#[test]
fn container_plans_pin_each_tag_to_a_digest_and_the_digest_changes_the_spec() {
    let tmp = tempfile::tempdir().unwrap();
    let (tasks, agents) = fixture(tmp.path());
    let mut m = manifest(1);
    m.execution.runtime = Some(Runtime::Container);
    for dir in std::fs::read_dir(&tasks).unwrap().flatten() {
        let toml = dir.path().join("task.toml");
        if toml.is_file() {
            let mut s = std::fs::read_to_string(&toml).unwrap();
            s.push_str("\n[environment]\nimage = \"reg.example:5000/team/img:v1\"\n");
            std::fs::write(&toml, s).unwrap();
        }
    }
    let spec = resolve(&m, &inputs(&tasks, &agents), &clock()).unwrap();
    assert_eq!(
        spec.condition.tasks[0].image.as_deref(),
        Some("reg.example:5000/team/img:v1")
    );
    let d1 = format!("sha256:{}", "1".repeat(64));
    let d2 = format!("sha256:{}", "2".repeat(64));
    let mut asked = Vec::new();
    let a = spec
        .clone()
        .pin_images(
            |r| {
                asked.push(r.to_string());
                Ok::<_, String>(d1.clone())
            },
            &clock(),
        )
        .unwrap();
    assert_eq!(asked[0], "reg.example:5000/team/img:v1");
    let pinned = format!("reg.example:5000/team/img@{d1}");
    assert!(a
        .condition
        .tasks
        .iter()
        .all(|t| t.image.as_deref() == Some(pinned.as_str())));
    let b = spec
        .clone()
        .pin_images(|_| Ok::<_, String>(d2.clone()), &clock())
        .unwrap();
    assert_ne!(
        a.condition_digest, b.condition_digest,
        "the digest is part of the spec"
    );
    assert_ne!(a.condition_digest, spec.condition_digest);
    // Pinned images are not asked again; errors name the task and the image.
    let again = a
        .clone()
        .pin_images(
            |_| -> Result<String, String> { panic!("asked again") },
            &clock(),
        )
        .unwrap();
    assert_eq!(again.condition_digest, a.condition_digest);
    let e = spec
        .clone()
        .pin_images(|_| Err("no such tag".to_string()), &clock())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("no such tag")
            && e.contains("reg.example:5000/team/img:v1")
            && e.contains("task `"),
        "{e}"
    );
    let e = spec
        .pin_images(|_| Ok::<_, String>("latest".into()), &clock())
        .unwrap_err()
        .to_string();
    assert!(e.contains("not a sha256 digest"), "{e}");
}

#[test]
fn a_plan_refuses_a_run_that_gives_less_than_a_task_asks_and_records_what_it_asks() {
    let tmp = tempfile::tempdir().unwrap();
    let (tasks, agents) = fixture(tmp.path());
    let toml = tasks.join("a-002/task.toml");
    let mut text = std::fs::read_to_string(&toml).unwrap();
    text.push_str("\n[environment]\ncpus = 2\nmemory_mb = 4096\n");
    std::fs::write(&toml, text).unwrap();
    let with_compute = |cpus: u32, memory_mb: u64| {
        let mut m = manifest(1);
        m.compute.cpus = Some(cpus);
        m.compute.memory_mb = Some(memory_mb);
        resolve(&m, &inputs(&tasks, &agents), &clock())
    };
    // The defaults (1 CPU, 2048 MiB) give less than a-002 asks: both fields named.
    let e = resolve(&manifest(1), &inputs(&tasks, &agents), &clock())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("task `a-002`")
            && e.contains("`environment.cpus` = 2 but the run gives compute.cpus = 1")
            && e.contains(
                "`environment.memory_mb` = 4096 but the run gives compute.memory_mb = 2048"
            )
            && e.contains("nothing was written"),
        "{e}"
    );
    let e = with_compute(2, 2048).unwrap_err().to_string();
    assert!(
        e.contains("environment.memory_mb") && !e.contains("environment.cpus"),
        "{e}"
    );
    // Enough: planned, and the plan records what the task asks (nothing for the others).
    let spec = with_compute(2, 4096).unwrap();
    let asks: Vec<_> = spec.condition.tasks.iter().map(|t| t.requires).collect();
    assert_eq!(asks[0], Requirements::default());
    assert_eq!(
        asks[1],
        Requirements {
            cpus: Some(2),
            memory_mb: Some(4096),
            storage_mb: None
        }
    );
    assert!(spec.verify());
}

#[test]
fn a_plan_refuses_an_image_only_task_outside_the_container_runtime() {
    let tmp = tempfile::tempdir().unwrap();
    let (tasks, agents) = fixture(tmp.path());
    let dir = tasks.join("a-004");
    std::fs::create_dir_all(dir.join("tests")).unwrap();
    std::fs::write(
        dir.join("task.toml"),
        "version = \"1.0\"\n[environment]\ndocker_image = \"reg.example:5000/tb/x@sha256:0000000000000000000000000000000000000000000000000000000000000000\"\n",
    )
    .unwrap();
    std::fs::write(dir.join("instruction.md"), "Fix it.\n").unwrap();
    std::fs::write(dir.join("tests/test.sh"), "exit 0\n").unwrap();
    let e = resolve(&manifest(1), &inputs(&tasks, &agents), &clock())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("task `a-004` has no [source]") && e.contains("runtime: container"),
        "{e}"
    );
    // Under `container` (with the image tasks only: the others name no image).
    let mut m = manifest(1);
    m.execution.runtime = Some(Runtime::Container);
    m.tasks.include = vec!["a-004".into()];
    let spec = resolve(&m, &inputs(&tasks, &agents), &clock()).unwrap();
    let t = spec
        .condition
        .tasks
        .iter()
        .find(|t| t.release.id == "a-004")
        .unwrap();
    // Its identity: the task's digest and the pinned image; no repository, no commit.
    assert_eq!(t.source_commit, "");
    assert_eq!(t.source_repo, "");
    assert!(t
        .image
        .as_deref()
        .unwrap()
        .ends_with("@sha256:0000000000000000000000000000000000000000000000000000000000000000"));
}

#[test]
fn the_plan_keeps_ignored_keys_and_says_why_the_runtime_was_picked() {
    let tmp = tempfile::tempdir().unwrap();
    let (tasks, agents) = fixture(tmp.path());
    // a-001 with keys Harbor ignores; the others unchanged.
    let toml = tasks.join("a-001/task.toml");
    let text = std::fs::read_to_string(&toml).unwrap();
    std::fs::write(
        &toml,
        format!("colour = \"red\"\n{text}[task]\nname = \"o/a-001\"\ndescription = \"d\"\n[metadata]\nx = 1\n"),
    )
    .unwrap();
    let spec = resolve(&manifest(1), &inputs(&tasks, &agents), &clock()).unwrap();
    let c = &spec.condition;
    assert_eq!(c.tasks[0].ignored_fields, ["colour", "task.description"]);
    assert!(c.tasks[1].ignored_fields.is_empty());
    assert_eq!(c.execution.runtime, Runtime::Sandbox);
    assert_eq!(spec.provenance.runtime_picked, None);
    // Every task image-only and no runtime named: `container`, and why.
    for id in ["a-001", "a-002", "a-003"] {
        std::fs::write(
            tasks.join(id).join("task.toml"),
            "schema_version = \"1.1\"\n[environment]\ndocker_image = \"reg.example/x:1\"\n",
        )
        .unwrap();
    }
    let spec = resolve(&manifest(1), &inputs(&tasks, &agents), &clock()).unwrap();
    assert_eq!(spec.condition.execution.runtime, Runtime::Container);
    assert!(spec
        .provenance
        .runtime_picked
        .as_deref()
        .is_some_and(|w| w.contains("image-only")));
}
