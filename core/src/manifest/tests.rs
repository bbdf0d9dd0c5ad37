use super::*;

const GOOD: &str = "\
experiment: demo
tasks:
  include: [\"wordcount-*\"]
  exclude: [\"broken-*\"]
agents:
  conditions:
    - descriptor: oracle
    - descriptor: fail
      model: m1
repetitions: 2
evaluation:
  grade: true
";

fn parse(text: &str) -> Result<ExperimentManifest, ManifestError> {
    ExperimentManifest::parse(text, Path::new("experiment.yaml"))
}

#[test]
fn parses_a_minimal_manifest() {
    let m = parse(GOOD).unwrap();
    assert_eq!(m.experiment, "demo");
    assert_eq!(m.repetitions, Some(2));
    assert_eq!(m.agents.conditions[1].label(), "fail");
    assert_eq!(m.agents.conditions[1].model.as_deref(), Some("m1"));
}

#[test]
fn the_grading_environment_reads_as_written() {
    use crate::grading_env::GradingEnvironment;
    assert_eq!(parse(GOOD).unwrap().execution.grading_environment, None);
    for (text, want) in [
        ("task", GradingEnvironment::Task),
        ("separate", GradingEnvironment::Separate),
    ] {
        let m = parse(&GOOD.replace(
            "repetitions: 2",
            &format!("execution:\n  grading_environment: {text}"),
        ))
        .unwrap();
        assert_eq!(m.execution.grading_environment, Some(want));
    }
}

#[test]
fn unknown_field_names_the_field_and_the_line() {
    let text = GOOD.replace("repetitions: 2", "repetitions: 2\nrepetitons: 3");
    let e = parse(&text).unwrap_err();
    let s = e.to_string();
    assert!(s.contains("repetitons") && s.contains("line 11"), "{s}");
    assert!(matches!(e, ManifestError::Parse { line: Some(11), .. }));
    let text = GOOD.replace("      model: m1", "      modle: m1");
    let s = parse(&text).unwrap_err().to_string();
    assert!(s.contains("modle") && s.contains("line 9"), "{s}");
}

#[test]
fn bad_values_name_the_field() {
    let cases = [
        (
            GOOD.replace("repetitions: 2", "repetitions: 0"),
            "repetitions",
        ),
        (
            GOOD.replace("experiment: demo", "experiment: a/b"),
            "experiment",
        ),
        (
            GOOD.replace("repetitions: 2", "credentials: [\"sk-live 123\"]"),
            "credentials",
        ),
        (
            GOOD.replace("      model: m1", "      name: oracle"),
            "appears twice",
        ),
        (
            GOOD.replace("      model: m1", "      name: Oracle"),
            "differ only in case",
        ),
        (
            GOOD.replace("repetitions: 2", "execution:\n  candidates: 0"),
            "candidates",
        ),
        (
            GOOD.replace("repetitions: 2", "compute:\n  agent_timeout_sec: -1"),
            "agent_timeout_sec",
        ),
        (
            GOOD.replace(
                "repetitions: 2",
                "execution:\n  concurrency:\n    per_agent: {x: 1}",
            ),
            "per_agent",
        ),
        (
            GOOD.replace("repetitions: 2", "visibility: everyone"),
            "visibility",
        ),
        (
            GOOD.replace("repetitions: 2", "compute:\n  diff_mb: 0"),
            "compute.diff_mb",
        ),
        (
            GOOD.replace("repetitions: 2", "compute:\n  diff_mb: 1025"),
            "from 1 to 1024",
        ),
        (
            GOOD.replace("repetitions: 2", "execution:\n  weight: 0"),
            "execution.weight",
        ),
        (
            GOOD.replace("repetitions: 2", "execution:\n  weight: -3"),
            "give a whole number from 1 to 1000",
        ),
        (
            GOOD.replace("repetitions: 2", "execution:\n  priority: 1001"),
            "execution.priority",
        ),
        (
            GOOD.replace("repetitions: 2", "execution:\n  priority: -1001"),
            "from -1000 to 1000",
        ),
        (
            GOOD.replace(
                "repetitions: 2",
                "execution:\n  grading_environment: shared",
            ),
            "grading_environment",
        ),
    ];
    for (text, needle) in cases {
        let e = parse(&text).unwrap_err().to_string();
        assert!(e.contains(needle), "{needle}: {e}");
        assert!(e.starts_with("failed to"), "{e}");
    }
}

#[test]
fn every_number_has_a_range_with_its_unit() {
    // (section text replacing `repetitions: 2`, accepted?, field named, unit named)
    let cases: &[(&str, bool, &str, &str)] = &[
        (
            "compute:\n  memory_mb: 17592186044416",
            false,
            "compute.memory_mb",
            "MiB",
        ),
        (
            "compute:\n  memory_mb: 1",
            false,
            "compute.memory_mb",
            "MiB",
        ),
        (
            "compute:\n  memory_mb: 0",
            false,
            "compute.memory_mb",
            "MiB",
        ),
        ("compute:\n  memory_mb: 64", true, "", ""),
        ("compute:\n  memory_mb: 16777216", true, "", ""),
        (
            "compute:\n  memory_mb: 16777217",
            false,
            "compute.memory_mb",
            "MiB",
        ),
        ("compute:\n  cpus: 0", false, "compute.cpus", "CPUs"),
        (
            "compute:\n  cpus: 1000000000",
            false,
            "compute.cpus",
            "CPUs",
        ),
        ("compute:\n  cpus: 1024", true, "", ""),
        (
            "compute:\n  agent_timeout_sec: 1e-300",
            false,
            "compute.agent_timeout_sec",
            "seconds",
        ),
        (
            "compute:\n  verifier_timeout_sec: .inf",
            false,
            "compute.verifier_timeout_sec",
            "seconds",
        ),
        (
            "compute:\n  verifier_timeout_sec: .nan",
            false,
            "compute.verifier_timeout_sec",
            "seconds",
        ),
        (
            "compute:\n  agent_timeout_sec: 604801",
            false,
            "compute.agent_timeout_sec",
            "seconds",
        ),
        ("compute:\n  agent_timeout_sec: 0.5", true, "", ""),
        (
            "execution:\n  concurrency:\n    max_trials: 0",
            false,
            "execution.concurrency.max_trials",
            "trials",
        ),
        (
            "execution:\n  concurrency:\n    max_trials: 1",
            true,
            "",
            "",
        ),
        (
            "execution:\n  concurrency:\n    per_agent: {oracle: 0}",
            false,
            "execution.concurrency.per_agent.oracle",
            "trials",
        ),
        (
            "execution:\n  concurrency:\n    per_provider_route: {r: 0}",
            false,
            "execution.concurrency.per_provider_route.r",
            "trials",
        ),
        (
            "execution:\n  infrastructure_retries: 11",
            false,
            "execution.infrastructure_retries",
            "retries",
        ),
    ];
    for (section, ok, field, unit) in cases {
        let r = parse(&GOOD.replace("repetitions: 2", section));
        assert_eq!(r.is_ok(), *ok, "{section}: {r:?}");
        if let Err(e) = r {
            let s = e.to_string();
            assert!(
                s.contains(&format!("`{field}`")) && s.contains(unit),
                "{section}: {s}"
            );
            assert!(s.len() < 400, "{s}");
        }
    }
}

#[test]
fn globs() {
    assert!(glob_match("wordcount-*", "wordcount-001"));
    assert!(glob_match("*", "x"));
    assert!(glob_match("w?rd*", "word"));
    assert!(!glob_match("wordcount-*", "broken-1"));
    assert!(glob_match("*-00?", "pyslug-003"));
    assert!(!glob_match("a", "ab"));
}

#[test]
fn retries_and_repetitions_are_bounded() {
    let text = format!("{GOOD}execution:\n  infrastructure_retries: 4294967295\n");
    let s = parse(&text).unwrap_err().to_string();
    assert!(
        s.contains("execution.infrastructure_retries") && s.contains("0 to 10 retries"),
        "{s}"
    );
    let text = format!("{GOOD}execution:\n  infrastructure_retries: 10\n");
    assert_eq!(
        parse(&text).unwrap().execution.infrastructure_retries,
        Some(10)
    );
    let text = GOOD.replace("repetitions: 2", "repetitions: 1000000000");
    let s = parse(&text).unwrap_err().to_string();
    assert!(
        s.contains("`repetitions`") && s.contains("maximum 10000"),
        "{s}"
    );
}

#[test]
fn deep_or_huge_documents_are_refused_before_parsing() {
    let nested = format!("experiment: {}", "[".repeat(200_000));
    let s = parse(&nested).unwrap_err().to_string();
    assert!(s.contains("more than 64 deep"), "{s}");
    let big = format!("{GOOD}# {}\n", "x".repeat(MAX_MANIFEST_BYTES));
    let s = parse(&big).unwrap_err().to_string();
    assert!(s.contains("more than the maximum 1048576"), "{s}");
    // Brackets inside quotes and comments do not count.
    let quoted = format!(
        "{GOOD}description: \"{}\"\n# {}\n",
        "[".repeat(100),
        "{".repeat(100)
    );
    assert!(parse(&quoted).is_ok());
}
