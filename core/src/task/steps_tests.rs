use super::*;
use crate::task::{Family, Task, TaskErrorKind};
use std::fs;

const IMAGE_TOML: &str = "version = \"1.0\"\n[environment]\nimage = \"reg.example/x:1\"\n";

/// An image-only task with `steps` (name, whether it has its own tests/test.sh), a
/// top-level tests/test.sh when `top_test`, and `extra` appended to task.toml.
fn steps_task(root: &Path, steps: &[(&str, bool)], top_test: bool, extra: &str) -> PathBuf {
    let dir = root.join("multi");
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    let mut toml = IMAGE_TOML.to_string();
    for (name, own) in steps {
        toml.push_str(&format!("[[steps]]\nname = \"{name}\"\n"));
        let s = dir.join("steps").join(name);
        fs::create_dir_all(&s).unwrap();
        fs::write(s.join("instruction.md"), format!("Do {name}.\n")).unwrap();
        if *own {
            fs::create_dir_all(s.join("tests")).unwrap();
            fs::write(s.join("tests/test.sh"), "exit 0\n").unwrap();
        }
    }
    toml.push_str(extra);
    fs::write(dir.join("task.toml"), toml).unwrap();
    if top_test {
        fs::create_dir_all(dir.join("tests")).unwrap();
        fs::write(dir.join("tests/test.sh"), "exit 0\n").unwrap();
    }
    dir
}

fn field_and_fix(e: TaskError) -> (String, String, PathBuf) {
    match e.kind {
        TaskErrorKind::Field { field, fix, .. } => (field, fix, e.file),
        other => panic!("not a field error: {other:?}"),
    }
}

#[test]
fn a_multi_step_task_loads_as_a_lifecycle_with_its_steps_in_order() {
    let tmp = tempfile::tempdir().unwrap();
    let extra = "[agent]\ntimeout_sec = 120.0\n";
    // TOML: the top-level keys must come before the [[steps]] tables.
    let dir = tmp.path().join("multi");
    steps_task(tmp.path(), &[("one", true), ("two", false)], true, "");
    let toml = format!(
        "multi_step_reward_strategy = \"final\"\n{IMAGE_TOML}{extra}[[steps]]\nname = \"one\"\nmin_reward = 1.0\nhealthcheck = {{ command = \"true\", retries = 2 }}\nartifacts = [\"/logs/artifacts/one.txt\"]\n[steps.agent]\ntimeout_sec = 30\n[[steps]]\nname = \"two\"\nmin_reward = {{ tests = 0.5 }}\n[steps.verifier]\ntimeout_sec = 45.0\nenv = {{ LEVEL = \"2\" }}\n"
    );
    fs::write(dir.join("task.toml"), toml).unwrap();
    fs::create_dir_all(dir.join("steps/one/workdir")).unwrap();
    fs::write(dir.join("steps/one/workdir/setup.sh"), "true\n").unwrap();
    fs::create_dir_all(dir.join("steps/two/solution")).unwrap();
    fs::write(dir.join("steps/two/solution/solve.sh"), "true\n").unwrap();
    let t = Task::load(&dir, tmp.path()).unwrap();
    assert_eq!(t.family, Family::Lifecycle);
    assert_eq!(t.reward_strategy, RewardStrategy::Final);
    assert_eq!(t.instruction, "Do one.\n", "the first step's instruction");
    let [one, two] = &t.steps[..] else {
        panic!("{:?}", t.steps)
    };
    assert_eq!(one.config.name, "one");
    assert_eq!(one.agent_timeout_sec, 30.0);
    assert_eq!(one.verifier_timeout_sec, STEP_VERIFIER_TIMEOUT_SEC);
    assert_eq!(one.config.min_reward, Some(MinReward::Reward(1.0)));
    assert_eq!(one.config.healthcheck.as_ref().unwrap().retries, 2);
    assert_eq!(one.config.artifacts, vec!["/logs/artifacts/one.txt"]);
    assert!(one.has_setup && one.workdir_dir.is_some() && one.tests_dir.is_some());
    assert!(one.solution_dir.is_none());
    assert_eq!(two.agent_timeout_sec, 120.0, "the task's");
    assert_eq!(two.verifier_timeout_sec, 45.0);
    assert_eq!(two.config.verifier_env["LEVEL"], "2");
    assert_eq!(
        two.config.min_reward,
        Some(MinReward::Keys(BTreeMap::from([("tests".into(), 0.5)])))
    );
    assert!(two.tests_dir.is_none() && two.solution_dir.is_some() && !two.has_setup);
    for f in [
        "steps",
        "multi_step_reward_strategy",
        "steps.min_reward",
        "steps.healthcheck",
    ] {
        let u = t.fields.iter().find(|u| u.field == f).unwrap();
        assert_eq!(u.handling, "applied", "{f}");
    }
    assert!(!t.fields.iter().any(|u| u.field == "instruction.md"));
    // A top-level instruction.md is not read, and listed as ignored.
    fs::write(dir.join("instruction.md"), "Top.\n").unwrap();
    let t = Task::load(&dir, tmp.path()).unwrap();
    assert_eq!(t.instruction, "Do one.\n");
    let u = t
        .fields
        .iter()
        .find(|u| u.field == "instruction.md")
        .unwrap();
    assert_eq!(u.handling, "ignored");
    // The task's digest covers the step files.
    let before = t.release.digest.clone();
    fs::write(dir.join("steps/two/instruction.md"), "Do two, again.\n").unwrap();
    let after = Task::load(&dir, tmp.path()).unwrap().release.digest;
    assert_ne!(before, after);
}

/// Steps and sidecar services together (Harbor runs the steps in one compose project): a
/// lifecycle with its world; each step's view keeps the world (its services live through
/// every step); a `family` naming `interactive` is refused, the steps making it a lifecycle.
#[test]
fn a_multi_step_task_with_sidecars_is_a_lifecycle_with_its_world() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = steps_task(tmp.path(), &[("one", true), ("two", true)], false, "");
    fs::create_dir_all(dir.join("environment")).unwrap();
    let hex = "a".repeat(64);
    fs::write(
        dir.join("environment/docker-compose.yaml"),
        format!("services:\n  main:\n    depends_on: [kv]\n  kv:\n    image: reg.example/kv@sha256:{hex}\n"),
    )
    .unwrap();
    let t = Task::load(&dir, tmp.path()).unwrap();
    assert_eq!(t.family, Family::Lifecycle);
    assert_eq!(t.world.as_ref().unwrap().services[0].name, "kv");
    let view = t.step_view(1, &dir.join("steps/two/tests")).unwrap();
    assert_eq!(
        view.world, t.world,
        "step two runs beside the same services"
    );
    let toml = fs::read_to_string(dir.join("task.toml")).unwrap();
    fs::write(
        dir.join("task.toml"),
        format!("family = \"interactive\"\n{toml}"),
    )
    .unwrap();
    let (field, fix, _) = field_and_fix(Task::load(&dir, tmp.path()).unwrap_err());
    assert_eq!(field, "family");
    assert!(fix.contains("the steps make the task a lifecycle"), "{fix}");
}

#[test]
fn a_one_step_task_keeps_the_strategy_as_ignored() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("one");
    fs::create_dir_all(dir.join("tests")).unwrap();
    fs::write(dir.join("tests/test.sh"), "exit 0\n").unwrap();
    fs::write(dir.join("instruction.md"), "x\n").unwrap();
    fs::write(
        dir.join("task.toml"),
        format!("multi_step_reward_strategy = \"mean\"\n{IMAGE_TOML}"),
    )
    .unwrap();
    let t = Task::load(&dir, tmp.path()).unwrap();
    assert_eq!(t.family, Family::Artefact);
    let u = t
        .fields
        .iter()
        .find(|u| u.field == "multi_step_reward_strategy")
        .unwrap();
    assert_eq!(u.handling, "ignored");
}

#[test]
fn bad_step_input_is_refused_naming_the_file_the_key_and_the_fix() {
    let tmp = tempfile::tempdir().unwrap();
    let cases: &[(&str, &str)] = &[
        ("[[steps]]\nname = \"a/b\"\n", "steps.name"),
        ("[[steps]]\nname = \"CON\"\n", "steps.name"),
        ("[[steps]]\nname = \"dot.\"\n", "steps.name"),
        ("[[steps]]\nname = \"\"\n", "steps.name"),
        ("[[steps]]\nmin_reward = 1\n", "steps.name"),
        (
            "[[steps]]\nname = \"one\"\n[[steps]]\nname = \"ONE\"\n",
            "steps.name",
        ),
        (
            "[[steps]]\nname = \"one\"\nmin_reward = \"high\"\n",
            "steps.min_reward",
        ),
        (
            "[[steps]]\nname = \"one\"\nmin_reward = { reward = \"x\" }\n",
            "steps.min_reward",
        ),
        (
            "[[steps]]\nname = \"one\"\nhealthcheck = { retries = 2 }\n",
            "steps.healthcheck",
        ),
        (
            "[[steps]]\nname = \"one\"\nartifacts = [\"/etc/x\"]\n",
            "steps.artifacts",
        ),
        (
            "[[steps]]\nname = \"one\"\n[steps.agent]\nuser = \"u\"\n",
            "steps.agent.user",
        ),
        (
            "[[steps]]\nname = \"one\"\n[steps.agent]\ntimeout_sec = -1\n",
            "steps.agent.timeout_sec",
        ),
        (
            "[[steps]]\nname = \"one\"\n[steps.verifier]\nenvironment_mode = \"separate\"\n",
            "steps.verifier.environment_mode",
        ),
        (
            "[[steps]]\nname = \"one\"\n[steps.verifier]\nenv = { \"1X\" = \"a\" }\n",
            "steps.verifier.env",
        ),
        (
            "[[steps]]\nname = \"one\"\n[steps.verifier]\ncollect = [{ command = \"x\" }]\n",
            "steps.verifier.collect",
        ),
        ("steps = 3\n", "steps"),
        (
            "multi_step_reward_strategy = \"max\"\n[[steps]]\nname = \"one\"\n",
            "multi_step_reward_strategy",
        ),
        (
            "family = \"artefact\"\n[[steps]]\nname = \"one\"\n",
            "family",
        ),
    ];
    for (toml, want) in cases {
        let dir = tmp.path().join("bad");
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(dir.join("steps/one")).unwrap();
        fs::write(dir.join("steps/one/instruction.md"), "x\n").unwrap();
        fs::create_dir_all(dir.join("tests")).unwrap();
        fs::write(dir.join("tests/test.sh"), "exit 0\n").unwrap();
        // Top-level keys first, then the steps (TOML puts later keys in the last table).
        let (top, steps) = match toml.find("[[steps]]") {
            Some(i) => toml.split_at(i),
            None => (*toml, ""),
        };
        fs::write(dir.join("task.toml"), format!("{top}{IMAGE_TOML}{steps}")).unwrap();
        let e = Task::load(&dir, tmp.path()).expect_err(toml);
        let (field, fix, file) = field_and_fix(e);
        assert_eq!(field, *want, "{toml}");
        assert!(!fix.is_empty(), "{toml}");
        assert_eq!(file, dir.join("task.toml"), "{toml}");
    }
}

#[test]
fn missing_step_files_are_refused_naming_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    // No folder for the step.
    let dir = steps_task(
        tmp.path(),
        &[("one", true)],
        false,
        "[[steps]]\nname = \"two\"\n",
    );
    let e = Task::load(&dir, tmp.path()).unwrap_err();
    assert_eq!(e.file, dir.join("steps/two"));
    // No test script for a step, neither its own nor the task's.
    let dir = steps_task(tmp.path(), &[("one", true), ("two", false)], false, "");
    let e = Task::load(&dir, tmp.path()).unwrap_err();
    assert_eq!(e.file, dir.join("steps/two/tests/test.sh"));
    assert!(e.to_string().contains("add steps/two/tests/test.sh"), "{e}");
    // The task's tests grade a step without its own.
    let dir = steps_task(tmp.path(), &[("one", true), ("two", false)], true, "");
    Task::load(&dir, tmp.path()).unwrap();
    // An empty instruction.
    fs::write(dir.join("steps/one/instruction.md"), " \n").unwrap();
    let e = Task::load(&dir, tmp.path()).unwrap_err();
    assert_eq!(e.file, dir.join("steps/one/instruction.md"));
    // A solution folder without solve.sh.
    let dir = steps_task(tmp.path(), &[("one", true)], false, "");
    fs::create_dir_all(dir.join("steps/one/solution")).unwrap();
    let e = Task::load(&dir, tmp.path()).unwrap_err();
    assert_eq!(e.file, dir.join("steps/one/solution/solve.sh"));
}

#[test]
fn step_names_follow_harbors_rule() {
    for ok in ["one", "step-1", "Über", "a.b", "COM0", "console"] {
        assert!(validate_name(ok).is_ok(), "{ok}");
    }
    for bad in [
        "", " ", ".", "..", "a/b", "a\\b", "a:b", "x.", "x ", "nul", "COM1", "lpt9.txt", "con .x",
        "a\u{7}",
    ] {
        assert!(validate_name(bad).is_err(), "{bad:?}");
    }
    assert!(validate_name(&"x".repeat(256)).is_err());
    assert_eq!(name_key("Step"), name_key("STEP"));
    assert_eq!(name_key("e\u{301}"), name_key("\u{e9}"), "NFC");
}

/// Rewards by key.
type Rewards = BTreeMap<String, f64>;
/// A strategy, the steps' rewards, the trial's expected.
type StrategyCase = (RewardStrategy, Vec<Option<Rewards>>, Option<Rewards>);

fn r(pairs: &[(&str, f64)]) -> Rewards {
    pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

#[test]
fn min_reward_gates_as_harbor_does() {
    let keys = MinReward::Keys(r(&[("a", 0.5), ("b", 1.0)]));
    let cases: &[(Option<Rewards>, &MinReward, bool)] = &[
        (Some(r(&[("reward", 1.0)])), &MinReward::Reward(1.0), true),
        (Some(r(&[("reward", 0.99)])), &MinReward::Reward(1.0), false),
        // A missing key, or no rewards (the grading crashed): minus infinity.
        (Some(r(&[("other", 1.0)])), &MinReward::Reward(0.0), false),
        (None, &MinReward::Reward(-1e300), false),
        (Some(r(&[("a", 0.5), ("b", 1.0)])), &keys, true),
        (Some(r(&[("a", 0.5)])), &keys, false),
        (Some(r(&[("a", 0.4), ("b", 1.0)])), &keys, false),
        (Some(r(&[])), &MinReward::Keys(BTreeMap::new()), true),
    ];
    for (rewards, min, passes) in cases {
        let got = min_reward_failure(rewards.as_ref(), min);
        assert_eq!(got.is_none(), *passes, "{rewards:?} {min:?}: {got:?}");
    }
    let why = min_reward_failure(None, &MinReward::Reward(1.0)).unwrap();
    assert_eq!(why, "reward=-inf below min_reward 1");
    // A failed, ungraded step stops the trial; a graded one is gated; no gate without
    // grading.
    assert!(stops_after(true, None, None, true).is_some());
    assert!(stops_after(true, Some(&r(&[("reward", 1.0)])), None, true).is_none());
    assert!(stops_after(
        false,
        Some(&r(&[("reward", 0.0)])),
        Some(&MinReward::Reward(1.0)),
        true
    )
    .is_some());
    assert!(stops_after(
        false,
        Some(&r(&[("reward", 0.0)])),
        Some(&MinReward::Reward(1.0)),
        false
    )
    .is_none());
}

#[test]
fn the_trial_reward_follows_the_strategy() {
    use RewardStrategy::{Final, Mean};
    let cases: &[StrategyCase] = &[
        (
            Mean,
            vec![Some(r(&[("reward", 1.0)])), Some(r(&[("reward", 0.0)]))],
            Some(r(&[("reward", 0.5)])),
        ),
        // Missing keys count 0; ungraded steps are left out of the denominator.
        (
            Mean,
            vec![
                Some(r(&[("a", 1.0)])),
                None,
                Some(r(&[("a", 1.0), ("b", 1.0)])),
            ],
            Some(r(&[("a", 1.0), ("b", 0.5)])),
        ),
        (Mean, vec![None, None], None),
        (Mean, vec![Some(r(&[]))], None),
        (Mean, vec![], None),
        (
            Final,
            vec![Some(r(&[("reward", 1.0)])), Some(r(&[("reward", 0.25)]))],
            Some(r(&[("reward", 0.25)])),
        ),
        (Final, vec![Some(r(&[("reward", 1.0)])), None], None),
        (Final, vec![], None),
    ];
    for (s, steps, want) in cases {
        assert_eq!(&trial_rewards(*s, steps), want, "{s:?} {steps:?}");
    }
}

#[test]
fn the_example_multi_step_task_loads_with_its_three_steps() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/tasks");
    let t = Task::load(&root.join("harbor-steps-001"), &root).unwrap();
    assert_eq!(t.family, Family::Lifecycle);
    assert!(t.image_unbuilt, "built from environment/Dockerfile");
    let names: Vec<&str> = t.steps.iter().map(|s| s.config.name.as_str()).collect();
    assert_eq!(names, ["open", "deposit", "report"]);
    let [open, deposit, report] = &t.steps[..] else {
        unreachable!()
    };
    assert_eq!(open.config.min_reward, Some(MinReward::Reward(1.0)));
    assert!(open.has_setup && open.config.healthcheck.is_some());
    assert!(deposit.has_setup && deposit.config.healthcheck.is_some());
    assert_eq!(deposit.agent_timeout_sec, 200.0);
    assert!(report.workdir_dir.is_none() && report.config.healthcheck.is_none());
    assert_eq!(report.verifier_timeout_sec, 60.0);
    for s in &t.steps {
        assert!(
            s.solution_dir.is_some() && s.tests_dir.is_some(),
            "{}",
            s.config.name
        );
    }
    assert_eq!(t.reward_strategy, RewardStrategy::Mean);
    // Every key of the steps takes effect.
    let steps_fields: Vec<_> = t
        .fields
        .iter()
        .filter(|u| u.field.starts_with("steps"))
        .collect();
    assert!(steps_fields.len() >= 6, "{steps_fields:?}");
    assert!(
        steps_fields.iter().all(|u| u.handling == "applied"),
        "{steps_fields:?}"
    );
}

#[test]
fn a_step_runs_as_a_one_step_view_of_the_task() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/tasks");
    let t = Task::load(&root.join("harbor-steps-001"), &root).unwrap();
    let report = &t.steps[2];
    let sources = test_sources(&t.tests_dir, report);
    assert_eq!(sources, vec![t.tests_dir.clone(), report.dir.join("tests")]);
    // The caller merges the sources (the step's test.sh over the task's lib.sh).
    let tmp = tempfile::tempdir().unwrap();
    let merged = tmp.path().join("tests");
    fs::create_dir_all(&merged).unwrap();
    for d in &sources {
        for e in fs::read_dir(d).unwrap() {
            let e = e.unwrap();
            fs::copy(e.path(), merged.join(e.file_name())).unwrap();
        }
    }
    let v = t.step_view(2, &merged).unwrap();
    assert_eq!(v.instruction, report.instruction);
    assert_eq!(v.tests_dir, merged);
    assert_ne!(v.tests_digest, t.tests_digest);
    assert_eq!(
        v.reference.as_ref().map(|(d, _)| d),
        Some(&report.dir.join("solution"))
    );
    assert_eq!(v.verifier_timeout_sec, 60.0);
    assert_eq!(v.agent_timeout_sec, 300.0, "the task's");
    assert_eq!(v.file.verifier.env["EXPECTED_BALANCE"], "150");
    assert_eq!(v.file.verifier.environment_mode.as_deref(), Some("shared"));
    assert!(v.steps.is_empty());
    assert_eq!(v.family, Family::Artefact);
    assert_eq!(
        v.release, t.release,
        "the step is part of the task's release"
    );
    // It knows which step it is, and replays the steps up to it for its reference.
    let of = v.step_of.as_ref().unwrap();
    assert_eq!(of.index, 2);
    assert_eq!(of.replay.len(), 3);
    for (r, s) in of.replay.iter().zip(&t.steps) {
        assert_eq!(r.config, s.config);
        let own = s.solution_dir.clone();
        let top = t.reference.as_ref().map(|(d, _)| d.clone());
        assert_eq!(r.solution_dir, own.or(top), "{}", s.config.name);
    }
    assert!(t.step_of.is_none());
    // What the worker learns once per grading key is per step, never per task.
    assert_eq!(t.grading_key(), t.release.digest);
    let first = t.step_view(0, &merged).unwrap();
    assert_ne!(first.grading_key(), v.grading_key());
    assert_ne!(v.grading_key(), t.grading_key());
    let e = t.step_view(3, &merged).unwrap_err();
    assert!(e.to_string().contains("not a step 4"), "{e}");
}
