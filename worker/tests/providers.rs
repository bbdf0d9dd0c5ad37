//! The real `claude` and `codex` CLIs, driven by akbench's adapters against a loopback fake
//! provider (`common/fake_provider.rs`): solved, ran but fixed nothing, provider down, 500,
//! 429 and 401 each end in the right state. Skipped, with a printed notice, where a CLI is
//! not installed (`.ci/run` installs both at pinned versions).

mod common;

use akbench_core::lifecycle::State;
use akbench_core::record::RunRecord;
use akbench_core::record::{Identity, Transition};
use akbench_worker::orchestrator::{Observer, Silent};
use akbench_worker::process::CancelToken;
use common::fake_provider::{FakeProvider, Mode, FINAL_ANSWER};
use common::Corpus;
use std::time::Duration;

const FIX: &str = "echo 42 > value.txt";

fn installed(program: &str) -> bool {
    let found = std::process::Command::new(program)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        akbench_core::testkit::skip(
            &format!("the real `{program}` CLI test"),
            &format!("`{program}` is not installed (.ci/run installs it from npm)"),
        );
    }
    found
}

fn claude_agent(c: &Corpus, name: &str, p: &FakeProvider) {
    c.add_agent(
        name,
        &format!(
            "adapter = \"claude-code\"\nmodel = \"claude-sonnet-4-5\"\n\
             network = [\"{}\"]\n\
             [env]\nANTHROPIC_BASE_URL = \"{}\"\nANTHROPIC_API_KEY = \"sk-fake\"\n\
             CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC = \"1\"\n",
            p.endpoint(),
            p.base_url()
        ),
        None,
    );
}

fn codex_agent(c: &Corpus, name: &str, p: &FakeProvider) {
    let url = p.openai_base_url();
    let endpoint = p.endpoint();
    c.add_agent(
        name,
        &format!(
            "adapter = \"codex\"\nmodel = \"gpt-5-codex\"\n\
             network = [\"{endpoint}\"]\n\
             extra_args = [\"-c\", \"model_provider=\\\"fake\\\"\", \
             \"-c\", \"model_providers.fake={{ name = \\\"fake\\\", base_url = \\\"{url}\\\", env_key = \\\"FAKE_KEY\\\", wire_api = \\\"responses\\\" }}\"]\n\
             [parameters]\nsandbox = \"bypass\"\n\
             [env]\nFAKE_KEY = \"sk-fake\"\n"
        ),
        None,
    );
}

/// The grace the tests give a failing provider before the agent is stopped.
const GRACE: Duration = Duration::from_secs(3);

fn run_with(c: &Corpus, agent: &str, retries: u32, observer: &dyn Observer) -> RunRecord {
    let t = c.task("answer");
    let a = c.agent(agent);
    let mut req = c.request(&t, &a, agent);
    // Far beyond what any case may take: a case that waits it out fails on its state.
    req.options.agent_timeout_sec = Some(240.0);
    req.options.provider_grace = GRACE;
    req.infrastructure_retries = retries;
    let out = c
        .orchestrator()
        .run_trial(
            &req,
            &akbench_core::dispatch::Backoff::NONE,
            observer,
            &CancelToken::new(),
        )
        .unwrap();
    out.record.validate().unwrap();
    out.record
}

fn dump(c: &Corpus, agent: &str, rec: &RunRecord) -> String {
    let dir = c.root().join("out").join(agent).join("a1");
    format!(
        "record: {}\nstdout:\n{}\nstderr:\n{}",
        serde_json::to_string_pretty(&rec.attempts[0]).unwrap(),
        std::fs::read_to_string(dir.join("agent.stdout.log")).unwrap_or_default(),
        std::fs::read_to_string(dir.join("agent.stderr.log")).unwrap_or_default()
    )
}

#[derive(Clone, Copy)]
enum Cli {
    Claude,
    Codex,
}

impl Cli {
    fn program(self) -> &'static str {
        match self {
            Cli::Claude => "claude",
            Cli::Codex => "codex",
        }
    }
    fn add(self, c: &Corpus, name: &str, p: &FakeProvider) {
        match self {
            Cli::Claude => claude_agent(c, name, p),
            Cli::Codex => codex_agent(c, name, p),
        }
    }
}

/// One case: the provider's mode, whether the scripted model fixes the task, and the state,
/// verdict and cause (prefix) the attempt must end with.
fn case(cli: Cli, mode: Mode, fix: bool, state: State, ok: Option<bool>, cause: Option<&str>) {
    if !installed(cli.program()) {
        return;
    }
    let c = common::corpus();
    // Graded quietly, with a tripwire twin: the real CLI's fix must be solved, not flagged.
    common::grade_quietly(&c, "answer");
    let p = FakeProvider::start(mode, fix.then_some(FIX));
    cli.add(&c, "agent", &p);
    let rec = run_with(&c, "agent", 0, &Silent);
    let ctx = || format!("{}\nprovider log {:?}", dump(&c, "agent", &rec), p.log());
    assert_eq!(rec.outcome.state, state, "{}", ctx());
    assert_eq!(rec.outcome.ok, ok, "{}", ctx());
    let a = &rec.attempts[0];
    match cause {
        None => assert_eq!(a.cause, None, "{}", ctx()),
        Some(prefix) => assert!(
            a.cause.as_deref().is_some_and(|c| c.starts_with(prefix)),
            "cause should start with {prefix:?}\n{}",
            ctx()
        ),
    }
    let process = a.agent_process.as_ref().unwrap();
    assert!(!process.timed_out, "never the agent timeout: {}", ctx());
    let obs = &a.observations;
    if state == State::Completed {
        // One tool call and an answer (fix), or the answer alone.
        assert_eq!(obs.turns, Some(if fix { 2 } else { 1 }), "{}", ctx());
        assert!(obs.input_tokens.is_some() && obs.output_tokens.is_some());
        let g = a.grade.as_ref().unwrap();
        assert!(!g.tampered, "{}", ctx());
        let trip = g.tripwire.as_ref().map(|t| t.result.as_str());
        let want = if fix {
            akbench_core::record::TRIPWIRE_OK
        } else {
            "not run: the grade is not solved"
        };
        assert_eq!(trip, Some(want), "{}", ctx());
        assert_eq!(obs.final_message.as_deref(), Some(FINAL_ANSWER));
        assert_eq!(obs.provider_error, None);
        match cli {
            Cli::Claude => assert!(obs.cost_usd.is_some_and(|c| c > 0.0)),
            Cli::Codex => assert_eq!(obs.cost_usd, None, "codex reports no cost"),
        }
        // The trajectory beside the logs: valid ATIF, the shell call with its result.
        let path = c.root().join("out/agent/a1/trajectory.json");
        let json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        akbench_core::trajectory::validate(&json).unwrap();
        let t: akbench_core::trajectory::Trajectory = serde_json::from_value(json).unwrap();
        let calls: Vec<_> = t
            .steps
            .iter()
            .filter_map(|s| s.tool_calls.as_ref().map(|c| (c, s.observation.as_ref())))
            .collect();
        assert_eq!(calls.len(), usize::from(fix), "{}", ctx());
        assert!(calls.iter().all(|(_, o)| o.is_some()), "{}", ctx());
        assert_eq!(t.final_metrics.unwrap().total_cost_usd, obs.cost_usd);
    } else {
        assert!(obs.provider_error.is_some(), "{}", ctx());
        assert!(obs.error_text.is_some(), "{}", ctx());
        // Nothing reached the model: nothing was measured.
        assert_eq!(obs.cost_usd, None);
        assert_eq!(obs.output_tokens, None);
    }
}

use State::{Completed, InfrastructureError, InvalidConfiguration};

#[test]
fn claude_solved() {
    case(Cli::Claude, Mode::Up, true, Completed, Some(true), None);
}
#[test]
fn claude_ran_but_fixed_nothing() {
    case(Cli::Claude, Mode::Up, false, Completed, Some(false), None);
}
#[test]
fn claude_provider_down() {
    case(
        Cli::Claude,
        Mode::Down,
        true,
        InfrastructureError,
        None,
        Some("provider: unreachable"),
    );
}
#[test]
fn claude_provider_500() {
    case(
        Cli::Claude,
        Mode::Status(500),
        true,
        InfrastructureError,
        None,
        Some("provider: server error (HTTP 500)"),
    );
}
#[test]
fn claude_provider_429() {
    case(
        Cli::Claude,
        Mode::Status(429),
        true,
        InfrastructureError,
        None,
        Some("provider: rate limited (HTTP 429)"),
    );
}
#[test]
fn claude_provider_401() {
    case(Cli::Claude, Mode::Status(401), true, InvalidConfiguration, None, Some("provider: the model provider refused the agent's credential: credential refused (HTTP 401)"));
}
#[test]
fn codex_solved() {
    case(Cli::Codex, Mode::Up, true, Completed, Some(true), None);
}
#[test]
fn codex_ran_but_fixed_nothing() {
    case(Cli::Codex, Mode::Up, false, Completed, Some(false), None);
}
#[test]
fn codex_provider_down() {
    case(
        Cli::Codex,
        Mode::Down,
        true,
        InfrastructureError,
        None,
        Some("provider: unreachable"),
    );
}
#[test]
fn codex_provider_500() {
    case(
        Cli::Codex,
        Mode::Status(500),
        true,
        InfrastructureError,
        None,
        Some("provider: server error"),
    );
}
#[test]
fn codex_provider_429() {
    case(
        Cli::Codex,
        Mode::Status(429),
        true,
        InfrastructureError,
        None,
        Some("provider: rate limited (HTTP 429)"),
    );
}
#[test]
fn codex_provider_401() {
    case(Cli::Codex, Mode::Status(401), true, InvalidConfiguration, None, Some("provider: the model provider refused the agent's credential: credential refused (HTTP 401)"));
}

/// Brings the provider back up when the first attempt ends.
struct UpAfterFirstAttempt<'a>(&'a FakeProvider);

impl Observer for UpAfterFirstAttempt<'_> {
    fn transition(&self, _: &Identity, number: u32, t: &Transition) {
        if number == 1 && t.state.is_terminal() {
            self.0.set_mode(Mode::Up);
        }
    }
}

#[test]
fn an_outage_is_retried_as_infrastructure_and_solved_once_the_provider_is_back() {
    if !installed("claude") {
        return;
    }
    let c = common::corpus();
    let p = FakeProvider::start(Mode::Down, Some(FIX));
    claude_agent(&c, "claude", &p);
    let rec = run_with(&c, "claude", 1, &UpAfterFirstAttempt(&p));
    let states: Vec<State> = rec.attempts.iter().map(|a| a.state).collect();
    assert_eq!(
        states,
        [InfrastructureError, Completed],
        "{}",
        dump(&c, "claude", &rec)
    );
    assert_eq!(rec.outcome.ok, Some(true));
}

#[test]
fn a_cli_that_refuses_its_flags_is_invalid_configuration() {
    for cli in [Cli::Claude, Cli::Codex] {
        if !installed(cli.program()) {
            continue;
        }
        let c = common::corpus();
        c.add_agent(
            "bad",
            &format!(
                "adapter = \"{}\"\nextra_args = [\"--no-such-flag-akbench\"]\n",
                match cli {
                    Cli::Claude => "claude-code",
                    Cli::Codex => "codex",
                }
            ),
            None,
        );
        let rec = run_with(&c, "bad", 0, &Silent);
        assert_eq!(
            rec.outcome.state,
            InvalidConfiguration,
            "{}",
            dump(&c, "bad", &rec)
        );
        let cause = rec.attempts[0].cause.as_deref().unwrap();
        assert!(cause.starts_with("the agent refused to start:"), "{cause}");
        assert!(cause.contains("no-such-flag-akbench"), "{cause}");
    }
}

/// The real claude-code CLI fixes every example task that runs on the host (the scripted
/// model applies the task's own `solution/fix.patch` with one shell call): each is solved
/// by the task's own grader, its tripwire twin fails as it must, and nothing is flagged.
#[test]
fn claude_fixes_every_example_task_and_no_honest_fix_is_flagged() {
    if !installed(Cli::Claude.program()) {
        return;
    }
    let examples = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/tasks");
    let mut seen = 0;
    for id in [
        "pyslug-001",
        "pyslug-002",
        "pyslug-003",
        "pyslug-004",
        "wordcount-001",
        "wordcount-002",
        "wordcount-003",
        "wordcount-004",
    ] {
        let c = common::corpus();
        let patch = std::fs::read_to_string(examples.join(id).join("solution/fix.patch")).unwrap();
        let fix = format!("git apply <<'AKBEOF'\n{patch}AKBEOF");
        let p = FakeProvider::start(Mode::Up, Some(&fix));
        claude_agent(&c, "claude", &p);
        let t = akbench_core::task::load_by_id(&examples, id).unwrap();
        let a = c.agent("claude");
        let mut req = c.request(&t, &a, id);
        req.options.agent_timeout_sec = Some(240.0);
        req.options.provider_grace = GRACE;
        let rec = c
            .orchestrator()
            .run_trial(
                &req,
                &akbench_core::dispatch::Backoff::NONE,
                &Silent,
                &CancelToken::new(),
            )
            .unwrap()
            .record;
        let ctx = || format!("{id}: {}\nprovider log {:?}", dump(&c, id, &rec), p.log());
        assert_eq!(rec.outcome.state, Completed, "{}", ctx());
        assert_eq!(rec.outcome.ok, Some(true), "{}", ctx());
        let g = rec.attempts[0].grade.as_ref().unwrap();
        assert!(!g.tampered, "{}", ctx());
        assert_eq!(
            g.tripwire.as_ref().map(|t| t.result.as_str()),
            Some(akbench_core::record::TRIPWIRE_OK),
            "{}",
            ctx()
        );
        seen += 1;
    }
    assert_eq!(seen, 8);
}
