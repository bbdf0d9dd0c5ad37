//! The real `gemini` (Gemini CLI), `qwen` (Qwen Code), `opencode`, `mini` (mini-swe-agent)
//! and `aider` CLIs, driven by akbench's adapters in the sandbox against the loopback fake
//! provider (`common/fake_provider.rs`, Gemini's `streamGenerateContent` and OpenAI Chat
//! Completions): solved, ran but fixed nothing, provider down and 429 (infrastructure), 500
//! (gemini-cli, opencode, aider) and 401 (configuration). Each solved run checks tokens, the
//! final message and a valid ATIF trajectory holding the shell call and its result (aider,
//! which has no tools: the file it edited); aider's cost is checked with a priced model, and
//! Gemini CLI's computed from its descriptor's `[price]`. Skipped, with a printed notice, where a CLI is not installed
//! (`.ci/run` installs them at pinned versions).
//!
//! Qwen Code retries a failing provider for about 100 s without printing anything (docs/
//! agents.md), so its outage and 429 cases take that long.

mod common;

use akbench_core::lifecycle::State;
use akbench_core::record::RunRecord;
use akbench_worker::orchestrator::Silent;
use akbench_worker::process::CancelToken;
use common::fake_provider::{FakeProvider, Mode, FINAL_ANSWER};
use common::Corpus;
use std::time::Duration;
use State::{Completed, InfrastructureError, InvalidConfiguration};

const FIX: &str = "echo 42 > value.txt";

/// The grace the tests give a failing provider before the agent is stopped.
const GRACE: Duration = Duration::from_secs(3);

#[derive(Clone, Copy, Debug)]
enum Cli {
    Gemini,
    Qwen,
    Opencode,
    Mini,
    Aider,
}

impl Cli {
    fn program(self) -> &'static str {
        match self {
            Cli::Gemini => "gemini",
            Cli::Qwen => "qwen",
            Cli::Opencode => "opencode",
            Cli::Mini => "mini",
            Cli::Aider => "aider",
        }
    }

    fn adapter(self) -> &'static str {
        match self {
            Cli::Gemini => "gemini-cli",
            Cli::Qwen => "qwen-code",
            Cli::Opencode => "opencode",
            Cli::Mini => "mini-swe-agent",
            Cli::Aider => "aider",
        }
    }

    fn shell_tool(self) -> &'static str {
        match self {
            Cli::Gemini | Cli::Qwen => "run_shell_command",
            Cli::Opencode | Cli::Mini => "bash",
            // aider has no tools: each file it changed is an `edit_file` call.
            Cli::Aider => "edit_file",
        }
    }

    fn installed(self) -> bool {
        // mini-swe-agent has no --version.
        let flag = match self {
            Cli::Mini => "--help",
            _ => "--version",
        };
        let found = std::process::Command::new(self.program())
            .arg(flag)
            .stdin(std::process::Stdio::null())
            .output()
            .is_ok_and(|o| o.status.success());
        if !found {
            akbench_core::testkit::skip(
                &format!("the real `{}` CLI test", self.program()),
                &format!(
                    "`{}` is not installed (.ci/run installs it from npm)",
                    self.program()
                ),
            );
        }
        found
    }

    fn add(self, c: &Corpus, name: &str, p: &FakeProvider) {
        let toml = match self {
            Cli::Gemini => format!(
                "adapter = \"gemini-cli\"\nmodel = \"gemini-2.5-pro\"\nnetwork = [\"{}\"]\n\
                 [env]\nGOOGLE_GEMINI_BASE_URL = \"{}\"\nGEMINI_API_KEY = \"sk-fake\"\n",
                p.endpoint(),
                p.base_url()
            ),
            Cli::Qwen => format!(
                "adapter = \"qwen-code\"\nmodel = \"qwen3-coder-plus\"\nnetwork = [\"{}\"]\n\
                 [env]\nOPENAI_BASE_URL = \"{}\"\nOPENAI_API_KEY = \"sk-fake\"\n",
                p.endpoint(),
                p.openai_base_url()
            ),
            // The OpenAI-compatible provider opencode bundles; no models.dev price fetch (no
            // network but the provider's).
            Cli::Opencode => format!(
                "adapter = \"opencode\"\nmodel = \"fake/m1\"\nnetwork = [\"{}\"]\n\
                 [env]\nOPENCODE_DISABLE_MODELS_FETCH = \"1\"\n\
                 OPENCODE_CONFIG_CONTENT = '{{\"provider\":{{\"fake\":{{\"npm\":\"@ai-sdk/openai-compatible\",\"name\":\"fake\",\"options\":{{\"baseURL\":\"{}\",\"apiKey\":\"sk-fake\"}},\"models\":{{\"m1\":{{\"name\":\"m1\"}}}}}}}}}}'\n",
                p.endpoint(),
                p.openai_base_url()
            ),
            // litellm's OpenAI provider, pointed at the fake.
            Cli::Mini => format!(
                "adapter = \"mini-swe-agent\"\nmodel = \"openai/m1\"\nnetwork = [\"{}\"]\n\
                 [env]\nOPENAI_API_BASE = \"{}\"\nOPENAI_API_KEY = \"sk-fake\"\n",
                p.endpoint(),
                p.openai_base_url()
            ),
            // litellm's OpenAI provider, pointed at the fake (aider's `whole` edit format,
            // its default for a model it does not know).
            Cli::Aider => format!(
                "adapter = \"aider\"\nmodel = \"openai/m1\"\nnetwork = [\"{}\"]\n\
                 [env]\nOPENAI_API_BASE = \"{}\"\nOPENAI_API_KEY = \"sk-fake\"\n",
                p.endpoint(),
                p.openai_base_url()
            ),
        };
        c.add_agent(name, &toml, None);
    }
}

fn run(c: &Corpus, agent: &str) -> RunRecord {
    let t = c.task("answer");
    let a = c.agent(agent);
    let mut req = c.request(&t, &a, agent);
    // Far beyond what any case may take: a case that waits it out fails on its state.
    req.options.agent_timeout_sec = Some(300.0);
    req.options.provider_grace = GRACE;
    req.infrastructure_retries = 0;
    let out = c
        .orchestrator()
        .run_trial(
            &req,
            &akbench_core::dispatch::Backoff::NONE,
            &Silent,
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

/// One case: the provider's mode, whether the scripted model fixes the task, and the state,
/// verdict and cause (prefix) the attempt must end with.
fn case(cli: Cli, mode: Mode, fix: bool, state: State, ok: Option<bool>, cause: Option<&str>) {
    if !cli.installed() {
        return;
    }
    let c = common::corpus();
    common::grade_quietly(&c, "answer");
    let p = FakeProvider::start(mode, fix.then_some(FIX));
    cli.add(&c, "agent", &p);
    let rec = run(&c, "agent");
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
    if state != Completed {
        assert!(obs.provider_error.is_some(), "{}", ctx());
        assert!(obs.error_text.is_some(), "{}", ctx());
        // Nothing reached the model: nothing was measured.
        assert_eq!((obs.cost_usd, obs.output_tokens), (None, None), "{}", ctx());
        return;
    }
    // One tool call and an answer (fix), or the answer alone; aider's one answer holds its
    // edits.
    let requests = if fix && !matches!(cli, Cli::Aider) {
        2
    } else {
        1
    };
    assert_eq!(obs.turns, Some(requests), "{}", ctx());
    // Every fake answer is 100 prompt tokens, 20 of them cached, and 10 output tokens; the
    // CLIs' side requests (Qwen Code's) are paid for too.
    let answered = p
        .log()
        .iter()
        .filter(|l| l.ends_with("-> 200"))
        .filter(|l| l.contains("enerateContent") || l.contains("/chat/completions"))
        .count() as u64;
    assert!(answered >= requests, "{}", ctx());
    // opencode reports the tokens of the agent's own requests, not of its side requests
    // (session titles).
    let answered = match cli {
        Cli::Opencode => requests,
        _ => answered,
    };
    // aider reads no cached count from an OpenAI usage: what it sent is the input.
    let (input, cached) = match cli {
        Cli::Aider => (Some(100 * answered), None),
        _ => (Some(80 * answered), Some(20 * answered)),
    };
    assert_eq!(obs.input_tokens, input, "{}", ctx());
    assert_eq!(obs.cached_input_tokens, cached, "{}", ctx());
    assert_eq!(obs.output_tokens, Some(10 * answered), "{}", ctx());
    assert_eq!(obs.cost_usd, None, "neither CLI reports a cost");
    // aider's answer is followed by the file it writes.
    assert!(
        obs.final_message.as_deref().is_some_and(
            |m| m == FINAL_ANSWER || (matches!(cli, Cli::Aider) && m.starts_with(FINAL_ANSWER))
        ),
        "{}",
        ctx()
    );
    assert_eq!(obs.reported_error, Some(false), "{}", ctx());
    assert_eq!(obs.provider_error, None);
    let g = a.grade.as_ref().unwrap();
    assert!(!g.tampered, "{}", ctx());
    // The agent's change is its edit alone: no aider file (repo-map cache, history,
    // `.gitignore` entry) left in the workspace.
    let diff =
        std::fs::read_to_string(c.root().join("out/agent/a1/agent.diff")).unwrap_or_default();
    assert!(!diff.contains(".aider"), "{diff}\n{}", ctx());
    if matches!(cli, Cli::Aider) && fix {
        assert!(diff.contains("+42"), "{diff}\n{}", ctx());
    }
    // The trajectory beside the logs: valid ATIF, the shell call with its result.
    let path = c.root().join("out/agent/a1/trajectory.json");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    akbench_core::trajectory::validate(&json).unwrap();
    let t: akbench_core::trajectory::Trajectory = serde_json::from_value(json).unwrap();
    assert_eq!(t.agent.name, cli.adapter());
    // The CLI's own version (from its output or the worker's probe), never a probe's error.
    let version = &t.agent.version;
    assert!(
        version.chars().next().is_some_and(|c| c.is_ascii_digit()),
        "agent version {version:?}\n{}",
        ctx()
    );
    // The fix's shell call, with its result (mini-swe-agent also calls the shell to submit).
    let calls: Vec<_> = t
        .steps
        .iter()
        .flat_map(|s| {
            s.tool_calls
                .iter()
                .flatten()
                .map(move |c| (c, s.observation.as_ref()))
        })
        .filter(|(c, _)| match cli {
            Cli::Aider => c.arguments.get("path").and_then(|v| v.as_str()) == Some("value.txt"),
            _ => c.arguments.get("command").and_then(|v| v.as_str()) == Some(FIX),
        })
        .collect();
    assert_eq!(calls.len(), usize::from(fix), "{}", ctx());
    for (call, observation) in &calls {
        assert_eq!(call.function_name, cli.shell_tool());
        assert!(observation.is_some(), "{}", ctx());
    }
    let fm = t.final_metrics.unwrap();
    assert_eq!(fm.total_prompt_tokens, Some(100 * answered));
    assert_eq!(fm.total_cached_tokens, cached);
    assert_eq!(fm.total_cost_usd, None);
}

#[test]
fn gemini_solved() {
    case(Cli::Gemini, Mode::Up, true, Completed, Some(true), None);
}
#[test]
fn gemini_ran_but_fixed_nothing() {
    case(Cli::Gemini, Mode::Up, false, Completed, Some(false), None);
}
#[test]
fn gemini_provider_down() {
    case(
        Cli::Gemini,
        Mode::Down,
        true,
        InfrastructureError,
        None,
        Some("provider: unreachable"),
    );
}
#[test]
fn gemini_provider_429() {
    case(
        Cli::Gemini,
        Mode::Status(429),
        true,
        InfrastructureError,
        None,
        Some("provider: rate limited (HTTP 429)"),
    );
}
#[test]
fn gemini_provider_500() {
    case(
        Cli::Gemini,
        Mode::Status(500),
        true,
        InfrastructureError,
        None,
        Some("provider: server error (HTTP 500)"),
    );
}
#[test]
fn gemini_provider_401() {
    case(
        Cli::Gemini,
        Mode::Status(401),
        true,
        InvalidConfiguration,
        None,
        Some("provider: the model provider refused the agent's credential: credential refused (HTTP 401)"),
    );
}
#[test]
fn qwen_solved() {
    case(Cli::Qwen, Mode::Up, true, Completed, Some(true), None);
}
#[test]
fn qwen_ran_but_fixed_nothing() {
    case(Cli::Qwen, Mode::Up, false, Completed, Some(false), None);
}
#[test]
fn qwen_provider_down() {
    case(
        Cli::Qwen,
        Mode::Down,
        true,
        InfrastructureError,
        None,
        Some("provider: unreachable"),
    );
}
#[test]
fn qwen_provider_429() {
    case(
        Cli::Qwen,
        Mode::Status(429),
        true,
        InfrastructureError,
        None,
        Some("provider: rate limited"),
    );
}
#[test]
fn qwen_provider_401() {
    case(
        Cli::Qwen,
        Mode::Status(401),
        true,
        InvalidConfiguration,
        None,
        Some("provider: the model provider refused the agent's credential: credential refused (HTTP 401)"),
    );
}

#[test]
fn opencode_solved() {
    case(Cli::Opencode, Mode::Up, true, Completed, Some(true), None);
}
#[test]
fn opencode_ran_but_fixed_nothing() {
    case(Cli::Opencode, Mode::Up, false, Completed, Some(false), None);
}
#[test]
fn opencode_provider_down() {
    case(
        Cli::Opencode,
        Mode::Down,
        true,
        InfrastructureError,
        None,
        Some("provider: unreachable"),
    );
}
#[test]
fn opencode_provider_429() {
    case(
        Cli::Opencode,
        Mode::Status(429),
        true,
        InfrastructureError,
        None,
        Some("provider: rate limited"),
    );
}
#[test]
fn opencode_provider_500() {
    case(
        Cli::Opencode,
        Mode::Status(500),
        true,
        InfrastructureError,
        None,
        Some("provider: server error"),
    );
}
#[test]
fn opencode_provider_401() {
    case(
        Cli::Opencode,
        Mode::Status(401),
        true,
        InvalidConfiguration,
        None,
        Some("provider: the model provider refused the agent's credential: credential refused (HTTP 401)"),
    );
}

#[test]
fn mini_solved() {
    case(Cli::Mini, Mode::Up, true, Completed, Some(true), None);
}
#[test]
fn mini_ran_but_fixed_nothing() {
    case(Cli::Mini, Mode::Up, false, Completed, Some(false), None);
}
#[test]
fn mini_provider_down() {
    case(
        Cli::Mini,
        Mode::Down,
        true,
        InfrastructureError,
        None,
        Some("provider: unreachable"),
    );
}
#[test]
fn mini_provider_429() {
    case(
        Cli::Mini,
        Mode::Status(429),
        true,
        InfrastructureError,
        None,
        Some("provider: rate limited (HTTP 429)"),
    );
}
#[test]
fn mini_provider_401() {
    case(
        Cli::Mini,
        Mode::Status(401),
        true,
        InvalidConfiguration,
        None,
        Some("provider: the model provider refused the agent's credential: credential refused"),
    );
}

#[test]
fn aider_solved() {
    case(Cli::Aider, Mode::Up, true, Completed, Some(true), None);
}
#[test]
fn aider_ran_but_fixed_nothing() {
    case(Cli::Aider, Mode::Up, false, Completed, Some(false), None);
}
#[test]
fn aider_provider_down() {
    case(
        Cli::Aider,
        Mode::Down,
        true,
        InfrastructureError,
        None,
        Some("provider: unreachable"),
    );
}
#[test]
fn aider_provider_429() {
    case(
        Cli::Aider,
        Mode::Status(429),
        true,
        InfrastructureError,
        None,
        Some("provider: rate limited (HTTP 429)"),
    );
}
#[test]
fn aider_provider_500() {
    case(
        Cli::Aider,
        Mode::Status(500),
        true,
        InfrastructureError,
        None,
        Some("provider: server error"),
    );
}
#[test]
fn aider_provider_401() {
    case(
        Cli::Aider,
        Mode::Status(401),
        true,
        InvalidConfiguration,
        None,
        Some("provider: the model provider refused the agent's credential: credential refused"),
    );
}

/// Gemini CLI reports no cost: with a `[price]` in its descriptor, akbench computes it from
/// the attempt's tokens and marks it computed; without one it stays absent (`case` above).
#[test]
fn gemini_cost_is_computed_from_the_descriptors_price() {
    if !Cli::Gemini.installed() {
        return;
    }
    let c = common::corpus();
    common::grade_quietly(&c, "answer");
    let p = FakeProvider::start(Mode::Up, None);
    Cli::Gemini.add(&c, "agent", &p);
    let file = c.agents().join("agent.toml");
    let mut toml = std::fs::read_to_string(&file).unwrap();
    toml.push_str(
        "[price]\ninput_per_mtok = 2.0\ncached_input_per_mtok = 0.5\noutput_per_mtok = 8.0\n",
    );
    std::fs::write(&file, toml).unwrap();
    let rec = run(&c, "agent");
    let ctx = || dump(&c, "agent", &rec);
    assert_eq!(rec.outcome.state, Completed, "{}", ctx());
    let obs = &rec.attempts[0].observations;
    let (input, output) = (obs.input_tokens.unwrap(), obs.output_tokens.unwrap());
    let cached = obs.cached_input_tokens.unwrap_or(0);
    assert!(input + output > 0, "{}", ctx());
    let want = (input as f64 * 2.0 + cached as f64 * 0.5 + output as f64 * 8.0) / 1e6;
    let got = obs.cost_usd.unwrap_or_else(|| panic!("no cost\n{}", ctx()));
    assert!((got - want).abs() < 1e-12, "{got} != {want}\n{}", ctx());
    assert!(obs.cost_computed, "{}", ctx());
    let json = serde_json::to_value(&rec.attempts[0].observations).unwrap();
    assert_eq!(json["cost_computed"], serde_json::json!(true));
}

/// A model litellm's bundled table prices (gpt-4o): aider's own cost is recorded, and is the
/// trajectory's total.
#[test]
fn aider_records_its_cost_for_a_priced_model() {
    if !Cli::Aider.installed() {
        return;
    }
    let c = common::corpus();
    common::grade_quietly(&c, "answer");
    let p = FakeProvider::start(Mode::Up, None);
    let toml = format!(
        "adapter = \"aider\"\nmodel = \"openai/gpt-4o\"\nnetwork = [\"{}\"]\n\
         [env]\nOPENAI_API_BASE = \"{}\"\nOPENAI_API_KEY = \"sk-fake\"\n",
        p.endpoint(),
        p.openai_base_url()
    );
    c.add_agent("agent", &toml, None);
    let rec = run(&c, "agent");
    let ctx = || dump(&c, "agent", &rec);
    assert_eq!(rec.outcome.state, Completed, "{}", ctx());
    let obs = &rec.attempts[0].observations;
    let cost = obs.cost_usd.unwrap_or_else(|| panic!("no cost\n{}", ctx()));
    // 110 tokens at gpt-4o's price: cents of a cent, never 0.
    assert!(cost > 0.0 && cost < 0.01, "{cost}\n{}", ctx());
    let path = c.root().join("out/agent/a1/trajectory.json");
    let t: akbench_core::trajectory::Trajectory =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(t.final_metrics.unwrap().total_cost_usd, Some(cost));
}

#[test]
fn a_cli_that_refuses_its_flags_is_invalid_configuration() {
    for cli in [Cli::Gemini, Cli::Qwen, Cli::Opencode, Cli::Mini, Cli::Aider] {
        let adapter = cli.adapter();
        if !cli.installed() {
            continue;
        }
        let c = common::corpus();
        c.add_agent(
            "bad",
            // Not `--no-...`: yargs reads that as the negation of `--such-flag-akbench`.
            &format!("adapter = \"{adapter}\"\nextra_args = [\"--bogus-flag-akbench\"]\n"),
            None,
        );
        let rec = run(&c, "bad");
        let ctx = || format!("{cli:?}: {}", dump(&c, "bad", &rec));
        assert_eq!(rec.outcome.state, InvalidConfiguration, "{}", ctx());
        let cause = rec.attempts[0].cause.as_deref().unwrap();
        assert!(
            cause.starts_with("the agent refused to start:"),
            "{cause}\n{}",
            ctx()
        );
        // opencode prints its usage without naming the flag; mini-swe-agent names it inside
        // a box whose first line is the word Error.
        if !matches!(cli, Cli::Opencode | Cli::Mini) {
            assert!(cause.contains("bogus-flag-akbench"), "{cause}\n{}", ctx());
        }
    }
}

/// The example descriptors of both agents load and pass the plan-time check.
#[test]
fn the_example_descriptors_load() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/agents");
    for name in [
        "gemini-cli",
        "qwen-code",
        "opencode",
        "mini-swe-agent",
        "aider",
    ] {
        let a = akbench_core::agent::Agent::load(&root, name).unwrap();
        assert_eq!(a.descriptor.adapter, name);
        akbench_core::agent::adapters::check(
            &a.descriptor,
            a.descriptor.model.as_deref(),
            &a.descriptor.parameters,
        )
        .unwrap();
    }
}
