//! ATIF trajectories from the recorded agent transcripts in tests/fixtures/agents/: every
//! trajectory validates, every tool call of the transcript is a tool call with its result,
//! and the totals agree with what the observation parsers compute.

use akbench_core::observe::{parse_claude_code, parse_codex};
use akbench_core::record::Observations;
use akbench_core::trajectory::{
    convert, from_claude_code, from_codex, validate, Source, Trajectory, SCHEMA_VERSION,
};
use serde_json::Value;
use std::path::Path;

fn fixture(agent: &str, name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/agents")
        .join(agent)
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn fixtures(agent: &str) -> Vec<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/agents")
        .join(agent);
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".jsonl"))
        .collect();
    names.sort();
    assert!(names.len() >= 5, "{agent}: {names:?}");
    names
}

fn lines(text: &str) -> Vec<Value> {
    text.lines()
        .filter_map(|l| serde_json::from_str(l.trim().trim_start_matches('\u{feff}')).ok())
        .collect()
}

/// The step holding the tool call `id`, with the call's result content when it has one.
fn call<'t>(t: &'t Trajectory, id: &str) -> Option<(usize, Option<&'t str>)> {
    t.steps.iter().enumerate().find_map(|(i, s)| {
        s.tool_calls
            .as_ref()?
            .iter()
            .find(|c| c.tool_call_id == id)?;
        let content = s.observation.as_ref().and_then(|o| {
            o.results
                .iter()
                .find(|r| r.source_call_id.as_deref() == Some(id))
                .map(|r| r.content.as_deref().unwrap_or_default())
        });
        Some((i, content))
    })
}

fn check_valid(name: &str, t: &Trajectory) {
    assert_eq!(t.schema_version, SCHEMA_VERSION);
    let v = serde_json::to_value(t).unwrap();
    if let Err(e) = validate(&v) {
        panic!("{name}: {e}");
    }
    // What is written can be read back unchanged.
    let back: Trajectory = serde_json::from_value(v).unwrap();
    assert_eq!(&back, t, "{name}");
    let ids: Vec<u64> = t.steps.iter().map(|s| s.step_id).collect();
    assert_eq!(
        ids,
        (1..=t.steps.len() as u64).collect::<Vec<_>>(),
        "{name}"
    );
    let fm = t.final_metrics.as_ref().unwrap();
    assert_eq!(fm.total_steps, Some(t.steps.len() as u64), "{name}");
    // For a check with Harbor's own models (scripts/check-atif.py, docs/trajectory.md).
    if let Some(dir) = std::env::var_os("ATIF_DUMP_DIR") {
        let file = format!("{}-{}.json", t.agent.name, name.trim_end_matches(".jsonl"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            Path::new(&dir).join(file),
            serde_json::to_vec_pretty(t).unwrap(),
        )
        .unwrap();
    }
}

/// The final metrics agree with the parser: prompt tokens are uncached + cached input.
fn check_totals(name: &str, t: &Trajectory, obs: &Observations) {
    let fm = t.final_metrics.as_ref().unwrap();
    let prompt = match (obs.input_tokens, obs.cached_input_tokens) {
        (None, None) => None,
        (i, c) => Some(i.unwrap_or(0) + c.unwrap_or(0)),
    };
    assert_eq!(fm.total_prompt_tokens, prompt, "{name}: prompt tokens");
    assert_eq!(
        fm.total_cached_tokens, obs.cached_input_tokens,
        "{name}: cached"
    );
    assert_eq!(
        fm.total_completion_tokens, obs.output_tokens,
        "{name}: completion"
    );
    assert_eq!(fm.total_cost_usd, obs.cost_usd, "{name}: cost");
}

#[test]
fn claude_code_transcripts_give_valid_trajectories_with_every_tool_call() {
    for name in fixtures("claude-code") {
        let text = fixture("claude-code", &name);
        let t = from_claude_code(&text, Some("the instruction"));
        check_valid(&name, &t);
        assert_eq!(t.steps[0].source, Source::User, "{name}");
        assert_eq!(t.steps[0].message, "the instruction", "{name}");
        assert_eq!(t.agent.name, "claude-code");
        for event in lines(&text) {
            let blocks = event["message"]["content"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            for b in blocks {
                match (event["type"].as_str(), b["type"].as_str()) {
                    (Some("assistant"), Some("tool_use")) => {
                        let id = b["id"].as_str().unwrap();
                        let (i, _) = call(&t, id)
                            .unwrap_or_else(|| panic!("{name}: tool call {id} missing"));
                        assert_eq!(t.steps[i].source, Source::Agent);
                        let c = &t.steps[i].tool_calls.as_ref().unwrap();
                        let c = c.iter().find(|c| c.tool_call_id == id).unwrap();
                        assert_eq!(c.function_name, b["name"].as_str().unwrap(), "{name}");
                        assert_eq!(Value::Object(c.arguments.clone()), b["input"], "{name}");
                    }
                    (Some("user"), Some("tool_result")) => {
                        let id = b["tool_use_id"].as_str().unwrap();
                        let (_, content) = call(&t, id).unwrap();
                        let content =
                            content.unwrap_or_else(|| panic!("{name}: no result for {id}"));
                        if let Some(s) = b["content"].as_str() {
                            assert_eq!(content, s, "{name}: {id}");
                        }
                    }
                    _ => {}
                }
            }
        }
        check_totals(&name, &t, &parse_claude_code(&text));
    }
}

#[test]
fn claude_code_steps_follow_the_api_responses() {
    let text = fixture("claude-code", "success_multi_turn.jsonl");
    let t = from_claude_code(&text, None);
    let obs = parse_claude_code(&text);
    // Five API responses, one of them streamed as two lines: five agent steps.
    let agent: Vec<_> = t
        .steps
        .iter()
        .filter(|s| s.source == Source::Agent)
        .collect();
    assert_eq!(agent.len() as u64, obs.turns.unwrap());
    assert_eq!(
        t.steps.len(),
        agent.len(),
        "no other steps: the result repeats the last text"
    );
    assert_eq!(
        agent[0].message,
        "I'll start by running the failing test to see the error."
    );
    assert_eq!(
        agent[0].tool_calls.as_ref().unwrap()[0].function_name,
        "Bash"
    );
    assert_eq!(
        agent.last().unwrap().message,
        obs.final_message.clone().unwrap()
    );
    assert_eq!(t.agent.model_name, obs.model);
    assert_eq!(t.agent.version, "2.0.14");
    assert_eq!(
        t.session_id.as_deref(),
        Some("5f2c8e1a-93b4-4d07-a6e2-0c1f7b9d4e38")
    );
    // Hand-written totals: the per-step metrics add up to the run's.
    let sum = |f: fn(&akbench_core::trajectory::Metrics) -> Option<u64>| {
        t.steps
            .iter()
            .filter_map(|s| s.metrics.as_ref().and_then(f))
            .sum::<u64>()
    };
    let fm = t.final_metrics.as_ref().unwrap();
    assert_eq!(Some(sum(|m| m.prompt_tokens)), fm.total_prompt_tokens);
    assert_eq!(Some(sum(|m| m.cached_tokens)), fm.total_cached_tokens);
    assert_eq!(
        Some(sum(|m| m.completion_tokens)),
        fm.total_completion_tokens
    );
    // The failing test's output is an error result.
    let first = agent[0].observation.as_ref().unwrap();
    assert_eq!(
        first.results[0].extra.as_ref().unwrap()["is_error"],
        Value::Bool(true)
    );
}

#[test]
fn claude_code_errors_and_sub_agents_are_kept() {
    let t = from_claude_code(&fixture("claude-code", "api_error.jsonl"), None);
    assert!(
        t.steps.iter().any(|s| s.source == Source::System),
        "the synthetic API error is a system step: {:#?}",
        t.steps
    );
    let t = from_claude_code(&fixture("claude-code", "killed_midway.jsonl"), None);
    assert!(t.steps.iter().any(|s| s
        .extra
        .as_ref()
        .is_some_and(|e| e.contains_key("parent_tool_use_id"))));
}

#[test]
fn codex_transcripts_give_valid_trajectories_with_every_tool_call() {
    for name in fixtures("codex") {
        let text = fixture("codex", &name);
        let t = from_codex(&text, Some("the instruction"));
        check_valid(&name, &t);
        assert_eq!(t.steps[0].message, "the instruction");
        let mut completed = std::collections::BTreeMap::new();
        for event in lines(&text) {
            let item = &event["item"];
            let kind = item["type"].as_str().or(item["item_type"].as_str());
            if event["type"] == "item.completed" {
                if let (Some(id), Some(kind)) = (item["id"].as_str(), kind) {
                    completed.insert(id.to_string(), (kind.to_string(), item.clone()));
                }
            }
        }
        for (id, (kind, item)) in &completed {
            if !matches!(kind.as_str(), "command_execution" | "file_change") {
                continue;
            }
            let (_, content) =
                call(&t, id).unwrap_or_else(|| panic!("{name}: tool call {id} missing"));
            let content = content.unwrap_or_else(|| panic!("{name}: no result for {id}"));
            if kind == "command_execution" {
                assert_eq!(
                    content,
                    item["aggregated_output"].as_str().unwrap(),
                    "{name}"
                );
            }
        }
        check_totals(&name, &t, &parse_codex(&text));
    }
}

#[test]
fn codex_messages_and_reasoning_are_steps() {
    let text = fixture("codex", "success.jsonl");
    let t = from_codex(&text, None);
    let obs = parse_codex(&text);
    let last_message = t
        .steps
        .iter()
        .rev()
        .find(|s| s.source == Source::Agent && !s.message.is_empty())
        .unwrap();
    assert_eq!(Some(last_message.message.clone()), obs.final_message);
    assert!(t.steps.iter().any(|s| s.reasoning_content.is_some()));
    // The turn's tokens sit on its last agent step.
    let with_metrics: Vec<_> = t.steps.iter().filter(|s| s.metrics.is_some()).collect();
    assert_eq!(with_metrics.len(), 1);
    let fm = t.final_metrics.as_ref().unwrap();
    assert_eq!(
        with_metrics[0].metrics.as_ref().unwrap().prompt_tokens,
        fm.total_prompt_tokens
    );
}

#[test]
fn scripted_agents_get_the_instruction_and_their_output() {
    let t = convert(
        "command",
        "working...\nall done\n",
        Some("do the task"),
        Some("v9"),
    );
    check_valid("command", &t);
    assert_eq!(t.steps.len(), 2);
    assert_eq!(t.steps[1].message, "working...\nall done");
    assert_eq!(t.agent.version, "v9");
}

#[test]
fn a_tool_use_repeated_by_the_stream_is_one_call_with_its_result() {
    let line = r#"{"type":"assistant","message":{"id":"m1","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"ls"}}],"usage":{"input_tokens":1,"output_tokens":2}}}"#;
    let result = r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t1","content":"a.txt"}]}}"#;
    let t = from_claude_code(&format!("{line}\n{line}\n{result}\n"), None);
    check_valid("repeated", &t);
    assert_eq!(t.steps.len(), 1);
    assert_eq!(t.steps[0].tool_calls.as_ref().unwrap().len(), 1);
    assert_eq!(t.steps[0].observation.as_ref().unwrap().results.len(), 1);
    assert_eq!(t.steps[0].metrics.as_ref().unwrap().prompt_tokens, Some(1));
}
