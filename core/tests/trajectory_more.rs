//! ATIF trajectories and observations from transcripts captured from the real gemini-cli
//! 0.61.0, qwen-code 0.24.4, opencode 1.18.33, mini-swe-agent 2.4.6 and aider 0.86.2 (as their adapters run
//! them, against a loopback fake provider; tests/fixtures/agents/README.md): every
//! trajectory validates, the fake model's one shell call is a tool call with its result, the
//! totals agree with the parsers, and a refused credential is a configuration failure.
//! `ATIF_DUMP_DIR` writes the trajectories out for a check with Harbor's own models
//! (scripts/check-atif.py).

use akbench_core::observe::{
    parse_aider, parse_gemini_cli, parse_mini_swe_agent, parse_opencode, parse_qwen_code,
    ProviderErrorKind,
};
use akbench_core::record::Observations;
use akbench_core::trajectory::{convert, validate, Trajectory};
use std::path::Path;

const FIX: &str = "echo 42 > value.txt";

fn fixture(agent: &str, name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/agents")
        .join(agent)
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn parse(agent: &str, text: &str) -> Observations {
    match agent {
        "gemini-cli" => parse_gemini_cli(text),
        "qwen-code" => parse_qwen_code(text),
        "opencode" => parse_opencode(text),
        "mini-swe-agent" => parse_mini_swe_agent(text),
        "aider" => parse_aider(text),
        other => panic!("{other}"),
    }
}

fn trajectory(agent: &str, name: &str) -> (Trajectory, Observations) {
    let text = fixture(agent, name);
    let t = convert(agent, &text, Some("write 42 to value.txt"), Some("9.9.9"));
    let v = serde_json::to_value(&t).unwrap();
    if let Err(e) = validate(&v) {
        panic!("{agent}/{name}: {e}");
    }
    if let Some(dir) = std::env::var_os("ATIF_DUMP_DIR") {
        std::fs::create_dir_all(&dir).unwrap();
        let file = format!("{agent}-{}.json", name.trim_end_matches(".jsonl"));
        std::fs::write(
            Path::new(&dir).join(file),
            serde_json::to_vec_pretty(&t).unwrap(),
        )
        .unwrap();
    }
    (t, parse(agent, &text))
}

const AGENTS: &[&str] = &["gemini-cli", "qwen-code", "opencode", "mini-swe-agent"];

#[test]
fn solved_runs_give_valid_trajectories_with_the_shell_call_and_its_result() {
    for agent in AGENTS {
        let (t, obs) = trajectory(agent, "captured_solved.jsonl");
        assert_eq!(t.agent.name, *agent);
        assert!(!t.agent.version.is_empty());
        let calls: Vec<_> = t
            .steps
            .iter()
            .flat_map(|s| {
                s.tool_calls
                    .iter()
                    .flatten()
                    .map(move |c| (c, s.observation.as_ref()))
            })
            .filter(|(c, _)| c.arguments.get("command").and_then(|v| v.as_str()) == Some(FIX))
            .collect();
        assert_eq!(calls.len(), 1, "{agent}: {t:#?}");
        let (call, observation) = calls[0];
        let result = observation
            .unwrap()
            .results
            .iter()
            .find(|r| r.source_call_id.as_deref() == Some(&call.tool_call_id));
        assert!(result.is_some(), "{agent}: the call's result");
        // The fake answers every request with 100 prompt tokens (20 cached) and 10 output.
        let fm = t.final_metrics.as_ref().unwrap();
        let prompt = obs.input_tokens.unwrap() + obs.cached_input_tokens.unwrap();
        assert_eq!(fm.total_prompt_tokens, Some(prompt), "{agent}");
        assert_eq!(fm.total_cached_tokens, obs.cached_input_tokens, "{agent}");
        assert_eq!(fm.total_completion_tokens, obs.output_tokens, "{agent}");
        assert_eq!(
            prompt * 20,
            obs.cached_input_tokens.unwrap() * 100,
            "{agent}"
        );
        assert_eq!((fm.total_cost_usd, obs.cost_usd), (None, None), "{agent}");
        assert_eq!(obs.reported_error, Some(false), "{agent}");
        assert_eq!(obs.provider_error, None, "{agent}");
        assert_eq!(
            obs.final_message.as_deref(),
            Some("Done: value.txt now holds the answer."),
            "{agent}"
        );
        assert!(
            obs.turns.is_some_and(|n| n >= 2),
            "{agent}: {:?}",
            obs.turns
        );
    }
}

#[test]
fn a_refused_credential_is_a_configuration_failure() {
    for agent in ["gemini-cli", "qwen-code", "opencode"] {
        let (t, obs) = trajectory(agent, "captured_401.jsonl");
        let e = obs.provider_error.as_ref().expect(agent);
        assert_eq!(
            (e.kind, e.status),
            (ProviderErrorKind::Unauthorized, Some(401)),
            "{agent}"
        );
        assert_eq!(obs.reported_error, Some(true), "{agent}");
        assert_eq!(obs.output_tokens, None, "{agent}: nothing was measured");
        assert!(
            t.steps
                .iter()
                .any(|s| s.message.contains("401") || s.message.contains("Incorrect API key")),
            "{agent}: the error is a step"
        );
    }
}

/// aider has no tools: its answer holds the file, and the file it changed is an `edit_file`
/// call; it reads no cached count from an OpenAI usage.
#[test]
fn aider_solved_gives_the_edit_as_a_tool_call_and_its_tokens() {
    let (t, obs) = trajectory("aider", "captured_solved.jsonl");
    assert_eq!(t.agent.name, "aider");
    let edits: Vec<_> = t
        .steps
        .iter()
        .flat_map(|s| s.tool_calls.iter().flatten().map(move |c| (c, s)))
        .collect();
    assert_eq!(edits.len(), 1, "{t:#?}");
    let (call, step) = edits[0];
    assert_eq!(call.function_name, "edit_file");
    assert_eq!(call.arguments["path"], "value.txt");
    assert_eq!(call.arguments["edit_format"], "whole");
    let r = &step.observation.as_ref().unwrap().results[0];
    assert_eq!(
        r.source_call_id.as_deref(),
        Some(call.tool_call_id.as_str())
    );
    assert!(
        step.message.contains("value.txt\n```\n42\n```"),
        "{}",
        step.message
    );
    let fm = t.final_metrics.as_ref().unwrap();
    assert_eq!(
        (
            fm.total_prompt_tokens,
            fm.total_cached_tokens,
            fm.total_completion_tokens
        ),
        (Some(100), None, Some(10))
    );
    assert_eq!(
        (
            obs.turns,
            obs.input_tokens,
            obs.cached_input_tokens,
            obs.output_tokens
        ),
        (Some(1), Some(100), None, Some(10))
    );
    assert_eq!((fm.total_cost_usd, obs.cost_usd), (None, None));
    assert_eq!(obs.reported_error, Some(false));
    assert_eq!(obs.provider_error, None);
    assert_eq!(obs.model.as_deref(), Some("openai/m1"));
    assert!(obs
        .final_message
        .as_deref()
        .is_some_and(|m| m.starts_with("Done: value.txt now holds the answer.")));
}

/// Stopped at once by the worker (a refused credential): no history, the output's tail.
#[test]
fn aider_refused_credential() {
    let (t, obs) = trajectory("aider", "captured_401.jsonl");
    let e = obs.provider_error.as_ref().unwrap();
    assert_eq!(e.kind, ProviderErrorKind::Unauthorized);
    assert_eq!(obs.reported_error, Some(true));
    assert_eq!(obs.output_tokens, None);
    assert!(t
        .steps
        .iter()
        .any(|s| s.message.contains("AuthenticationError")));
}
