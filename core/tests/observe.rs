//! The claude-code and codex adapters: argv builders and output parsers, against recorded
//! transcripts in tests/fixtures/agents/.

use akbench_core::observe::{
    claude_code_argv, codex_argv, parse_claude_code, parse_codex, ProviderError, ProviderErrorKind,
};
use akbench_core::record::Observations;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::Path;

fn fixture(agent: &str, name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/agents")
        .join(agent)
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn params(v: Value) -> BTreeMap<String, Value> {
    serde_json::from_value(v).unwrap()
}

/// model, parameters, extra_args, expected argv.
type ArgvCase = (
    Option<&'static str>,
    Value,
    Vec<&'static str>,
    Vec<&'static str>,
);

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

// ---------------------------------------------------------------- claude-code parser

const SONNET: &str = "claude-sonnet-4-5-20250929";

#[test]
fn claude_success_multi_turn_uses_the_result_event() {
    let obs = parse_claude_code(&fixture("claude-code", "success_multi_turn.jsonl"));
    assert_eq!(
        obs,
        Observations {
            turns: Some(5),
            // 20 fresh + 8734 cache writes.
            input_tokens: Some(8754),
            cached_input_tokens: Some(84179),
            output_tokens: Some(754),
            cost_usd: Some(0.0931275),
            cost_computed: false,
            final_message: Some(
                "Fixed the off-by-one in `tokenize()`: the loop stopped one character early, so \
                 the last token was dropped. `tests/test_parser.py` now passes (14 passed)."
                    .into()
            ),
            model: Some(SONNET.into()),
            reported_error: Some(false),
            error_text: None,
            provider_error: None,
        }
    );
}

#[test]
fn claude_max_turns_is_a_reported_error_without_result_text() {
    let obs = parse_claude_code(&fixture("claude-code", "max_turns.jsonl"));
    assert_eq!(
        obs,
        Observations {
            turns: Some(3),
            input_tokens: Some(13 + 5225),
            cached_input_tokens: Some(43083),
            output_tokens: Some(223),
            cost_usd: Some(0.0412908),
            cost_computed: false,
            // No `result` text on error subtypes: the last assistant text stands in.
            final_message: Some("Let me look at the build script first.".into()),
            model: Some(SONNET.into()),
            reported_error: Some(true),
            error_text: Some("error_max_turns".into()),
            provider_error: None,
        }
    );
}

#[test]
fn claude_api_error_is_reported_by_is_error() {
    let obs = parse_claude_code(&fixture("claude-code", "api_error.jsonl"));
    let text = "API Error: 529 {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\
                \"message\":\"Overloaded\"},\"request_id\":null}";
    assert_eq!(
        obs,
        Observations {
            turns: Some(1),
            // No model response arrived: the zeros Claude Code prints are not measurements.
            input_tokens: None,
            cached_input_tokens: None,
            output_tokens: None,
            cost_usd: None,
            cost_computed: false,
            // The error is not the agent's answer.
            final_message: None,
            // The `<synthetic>` message never becomes the model.
            model: Some(SONNET.into()),
            reported_error: Some(true),
            error_text: Some(text.into()),
            // The status is read from the text when no `api_error_status` is given.
            provider_error: Some(ProviderError {
                kind: ProviderErrorKind::ServerError,
                status: Some(529),
                message: text.into(),
                failures: 1,
            }),
        }
    );
}

#[test]
fn claude_killed_midway_sums_assistant_usage_once_per_message() {
    let obs = parse_claude_code(&fixture("claude-code", "killed_midway.jsonl"));
    assert_eq!(
        obs,
        Observations {
            // Three main-thread responses; the sub-agent's two are not turns.
            turns: Some(3),
            // Main: (3+4102) + (5+1320) + (4+655); sub-agent: (4+2890) + (6+188).
            input_tokens: Some(9177),
            cached_input_tokens: Some(11537 + 15639 + 16959 + 2890),
            // The repeated msg_01Bg7... counts once, with its last usage (97, not 5).
            output_tokens: Some(97 + 84 + 26 + 61 + 43),
            cost_usd: None,
            cost_computed: false,
            final_message: Some(
                "The timeout test expects at most 2 retries; I'll make the count configurable."
                    .into()
            ),
            model: Some(SONNET.into()),
            reported_error: None,
            error_text: None,
            provider_error: None,
        }
    );
}

#[test]
fn claude_junk_lines_are_skipped() {
    let obs = parse_claude_code(&fixture("claude-code", "junk_lines.jsonl"));
    assert_eq!(
        obs,
        Observations {
            turns: Some(3),
            input_tokens: Some(10 + 2498),
            cached_input_tokens: Some(31406),
            output_tokens: Some(184),
            cost_usd: Some(0.2140125),
            cost_computed: false,
            final_message: Some(
                "Done: `greet()` now returns \"Hello, World!\" and the doc test passes.".into()
            ),
            model: Some("claude-opus-4-1-20250805".into()),
            reported_error: Some(false),
            error_text: None,
            provider_error: None,
        }
    );
}

#[test]
fn claude_junk_lines_without_the_result_fall_back_to_the_messages() {
    let text = fixture("claude-code", "junk_lines.jsonl");
    let without_result: String = text
        .lines()
        .filter(|l| !l.starts_with("{\"type\":\"result\",\"subtype\""))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_ne!(without_result.len(), text.len());
    let obs = parse_claude_code(&without_result);
    assert_eq!(
        obs,
        Observations {
            turns: Some(3),
            input_tokens: Some((3 + 2048) + (5 + 310) + (2 + 140)),
            cached_input_tokens: Some(9000 + 11048 + 11358),
            output_tokens: Some(57 + 96 + 31),
            cost_usd: None,
            cost_computed: false,
            final_message: Some(
                "Done: `greet()` now returns \"Hello, World!\" and the doc test passes.".into()
            ),
            model: Some("claude-opus-4-1-20250805".into()),
            reported_error: None,
            error_text: None,
            provider_error: None,
        }
    );
}

#[test]
fn claude_model_falls_back_to_the_messages_and_empty_output_observes_nothing() {
    let lines = [
        r#"{"type":"assistant","message":{"id":"m1","model":"claude-haiku-4-5","content":[{"type":"text","text":"hi"}],"usage":{"input_tokens":1,"output_tokens":2}},"parent_tool_use_id":null}"#,
        r#"{"type":"assistant","message":{"id":"e1","model":"<synthetic>","content":[{"type":"text","text":"API Error: 500"}],"usage":{"input_tokens":0,"output_tokens":0}},"parent_tool_use_id":null}"#,
    ];
    let obs = parse_claude_code(&lines.join("\n"));
    assert_eq!(obs.model.as_deref(), Some("claude-haiku-4-5"));
    assert_eq!(obs.turns, Some(2));
    assert_eq!(obs.input_tokens, Some(1));
    assert_eq!(obs.cached_input_tokens, None);
    assert_eq!(obs.final_message.as_deref(), Some("API Error: 500"));
    for empty in ["", "\n\n", "plain text\n", "{\"type\":\"user\"}\n"] {
        assert_eq!(
            parse_claude_code(empty),
            Observations::default(),
            "{empty:?}"
        );
    }
}

// ---------------------------------------------------------------- codex parser

#[test]
fn codex_success() {
    let obs = parse_codex(&fixture("codex", "success.jsonl"));
    assert_eq!(
        obs,
        Observations {
            turns: Some(4),
            // Codex's input_tokens include the cached ones.
            input_tokens: Some(48213 - 39424),
            cached_input_tokens: Some(39424),
            output_tokens: Some(1877),
            cost_usd: None,
            cost_computed: false,
            final_message: Some(
                "Fixed `tokenize()` in src/parser.py: the loop skipped the last character and \
                 never appended the trailing token. `pytest tests/test_parser.py` now passes \
                 (14 passed)."
                    .into()
            ),
            model: None,
            reported_error: Some(false),
            error_text: None,
            provider_error: None,
        }
    );
}

#[test]
fn codex_turn_failed() {
    let obs = parse_codex(&fixture("codex", "turn_failed.jsonl"));
    assert_eq!(
        obs,
        Observations {
            turns: Some(1),
            input_tokens: None,
            cached_input_tokens: None,
            output_tokens: None,
            cost_usd: None,
            cost_computed: false,
            final_message: Some("I'll start by listing the existing migrations.".into()),
            model: None,
            reported_error: Some(true),
            error_text: Some("exceeded retry limit, last status: 429 Too Many Requests".into()),
            provider_error: Some(ProviderError {
                kind: ProviderErrorKind::RateLimited,
                status: Some(429),
                message: "exceeded retry limit, last status: 429 Too Many Requests".into(),
                failures: 3
            }),
        }
    );
}

#[test]
fn codex_killed_midway() {
    let obs = parse_codex(&fixture("codex", "killed_midway.jsonl"));
    assert_eq!(
        obs,
        Observations {
            turns: Some(2),
            input_tokens: None,
            cached_input_tokens: None,
            output_tokens: None,
            cost_usd: None,
            cost_computed: false,
            final_message: Some(
                "`RING_MAX` was removed from src/config.rs; restoring it as a constant.".into()
            ),
            model: None,
            reported_error: None,
            error_text: None,
            provider_error: None,
        }
    );
}

#[test]
fn codex_junk_lines_are_skipped_and_a_recovered_error_is_not_reported() {
    let obs = parse_codex(&fixture("codex", "junk_lines.jsonl"));
    assert_eq!(
        obs,
        Observations {
            turns: Some(2),
            input_tokens: Some(21907 - 17152),
            cached_input_tokens: Some(17152),
            output_tokens: Some(964),
            cost_usd: None,
            cost_computed: false,
            // The earlier `--json` item shape (`item_type`, `assistant_message`).
            final_message: Some(
                "Renamed `get_user` to `fetch_user` across 4 files; `cargo check` is clean.".into()
            ),
            model: None,
            reported_error: Some(false),
            error_text: None,
            provider_error: None,
        }
    );
}

#[test]
fn codex_usage_is_a_running_total_and_trailing_errors_count() {
    let text = [
        r#"{"type":"thread.started","thread_id":"t"}"#,
        r#"{"type":"turn.started"}"#,
        r#"{"type":"item.completed","item":{"id":"item_0","type":"agent_message","text":"one"}}"#,
        r#"{"type":"turn.completed","usage":{"input_tokens":100,"cached_input_tokens":40,"output_tokens":10}}"#,
        r#"{"type":"turn.started"}"#,
        r#"{"type":"item.completed","item":{"id":"item_1","type":"agent_message","text":"two"}}"#,
        r#"{"type":"turn.completed","usage":{"input_tokens":250,"cached_input_tokens":140,"output_tokens":30}}"#,
    ]
    .join("\n");
    let obs = parse_codex(&text);
    assert_eq!(obs.turns, Some(2));
    assert_eq!(obs.input_tokens, Some(110));
    assert_eq!(obs.cached_input_tokens, Some(140));
    assert_eq!(obs.output_tokens, Some(30));
    assert_eq!(obs.final_message.as_deref(), Some("two"));
    assert_eq!(obs.reported_error, Some(false));

    let trailing = format!("{text}\n{{\"type\":\"error\",\"message\":\"stream error\"}}\n");
    assert_eq!(parse_codex(&trailing).reported_error, Some(true));

    for empty in [
        "",
        "\n",
        "Reading prompt from stdin...\n",
        "{\"type\":\"future\"}",
    ] {
        assert_eq!(parse_codex(empty), Observations::default(), "{empty:?}");
    }
}

// ---------------------------------------------------------------- argv builders

#[test]
fn claude_code_argv_table() {
    let cases: Vec<ArgvCase> = vec![
        (
            None,
            json!({}),
            vec![],
            vec![
                "claude",
                "-p",
                "--output-format",
                "stream-json",
                "--verbose",
                "--permission-mode",
                "bypassPermissions",
                "--",
                "Fix the bug",
            ],
        ),
        (
            Some("claude-sonnet-4-5"),
            json!({"max_turns": 30}),
            vec!["--allowedTools", "Bash", "Edit"],
            vec![
                "claude",
                "-p",
                "--output-format",
                "stream-json",
                "--verbose",
                "--model",
                "claude-sonnet-4-5",
                "--max-turns",
                "30",
                "--permission-mode",
                "bypassPermissions",
                "--allowedTools",
                "Bash",
                "Edit",
                "--",
                "Fix the bug",
            ],
        ),
    ];
    for (model, p, extra, want) in cases {
        let got =
            claude_code_argv("claude", model, "Fix the bug", &params(p), &strings(&extra)).unwrap();
        assert_eq!(got, strings(&want));
    }
    // An instruction that looks like an option stays an operand.
    let got = claude_code_argv("/opt/claude", None, "- fix it", &BTreeMap::new(), &[]).unwrap();
    assert_eq!(got.first().map(String::as_str), Some("/opt/claude"));
    assert_eq!(&got[got.len() - 2..], &strings(&["--", "- fix it"]));
}

#[test]
fn claude_code_argv_rejects_bad_parameters() {
    let cases: Vec<(Value, &[&str])> = vec![
        (json!({"max_turns": 0}), &["max_turns", "positive integer"]),
        (json!({"max_turns": -3}), &["max_turns", "positive integer"]),
        (
            json!({"max_turns": 2.5}),
            &["max_turns", "positive integer"],
        ),
        (
            json!({"max_turns": "10"}),
            &["max_turns", "positive integer"],
        ),
        (
            json!({"max_turns": null}),
            &["max_turns", "positive integer"],
        ),
        (
            json!({"max_turn": 10}),
            &["`max_turn`", "supported", "`max_turns`"],
        ),
        (
            json!({"sandbox": "read-only", "temperature": 0}),
            &["`sandbox`", "`temperature`", "parameters", "`max_turns`"],
        ),
    ];
    for (p, needles) in cases {
        let e = claude_code_argv("claude", None, "x", &params(p.clone()), &[]).unwrap_err();
        for n in needles {
            assert!(e.contains(n), "{p}: {e}");
        }
    }
    assert!(claude_code_argv("", None, "x", &BTreeMap::new(), &[]).is_err());
    assert!(claude_code_argv("claude", Some(" "), "x", &BTreeMap::new(), &[]).is_err());
}

#[test]
fn codex_argv_table() {
    let cases: Vec<ArgvCase> = vec![
        (
            None,
            json!({}),
            vec![],
            vec![
                "codex",
                "exec",
                "--json",
                "--sandbox",
                "workspace-write",
                "--",
                "Fix it",
            ],
        ),
        (
            Some("gpt-5-codex"),
            json!({"sandbox": "danger-full-access"}),
            vec![
                "--skip-git-repo-check",
                "-c",
                "model_reasoning_effort=\"high\"",
            ],
            vec![
                "codex",
                "exec",
                "--json",
                "--model",
                "gpt-5-codex",
                "--sandbox",
                "danger-full-access",
                "--skip-git-repo-check",
                "-c",
                "model_reasoning_effort=\"high\"",
                "--",
                "Fix it",
            ],
        ),
        (
            None,
            json!({"sandbox": "read-only"}),
            vec![],
            vec![
                "codex",
                "exec",
                "--json",
                "--sandbox",
                "read-only",
                "--",
                "Fix it",
            ],
        ),
        (
            None,
            json!({"sandbox": "bypass"}),
            vec![],
            vec![
                "codex",
                "exec",
                "--json",
                "--dangerously-bypass-approvals-and-sandbox",
                "--",
                "Fix it",
            ],
        ),
    ];
    for (model, p, extra, want) in cases {
        let got = codex_argv("codex", model, "Fix it", &params(p), &strings(&extra)).unwrap();
        assert_eq!(got, strings(&want));
    }
}

#[test]
fn codex_argv_rejects_bad_parameters() {
    let cases: Vec<(Value, &[&str])> = vec![
        (
            json!({"sandbox": "full-auto"}),
            &["sandbox", "workspace-write", "bypass"],
        ),
        (json!({"sandbox": true}), &["sandbox", "read-only"]),
        (
            json!({"max_turns": 5}),
            &["`max_turns`", "supported", "`sandbox`"],
        ),
    ];
    for (p, needles) in cases {
        let e = codex_argv("codex", None, "x", &params(p.clone()), &[]).unwrap_err();
        for n in needles {
            assert!(e.contains(n), "{p}: {e}");
        }
    }
    assert!(codex_argv(" ", None, "x", &BTreeMap::new(), &[]).is_err());
    assert!(codex_argv("codex", Some(""), "x", &BTreeMap::new(), &[]).is_err());
}
