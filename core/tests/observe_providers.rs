//! Provider failures read from event streams captured from the real CLIs (claude-code
//! 2.1.332, codex 0.171.0) against the loopback fake provider of worker/tests: every case
//! of the table ends with the right [`ProviderError`], tokens and cost are absent when no
//! model response arrived, and a solved run has none.

use akbench_core::observe::{parse_claude_code, parse_codex, ProviderErrorKind};
use akbench_core::record::Observations;
use std::path::Path;

fn fixture(agent: &str, name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/agents")
        .join(agent)
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

type Case = (
    &'static str,
    Option<ProviderErrorKind>,
    Option<u16>,
    u32,
    &'static str,
);

fn check(agent: &str, parse: fn(&str) -> Observations, cases: &[Case]) {
    for (file, kind, status, failures, message_has) in cases {
        let obs = parse(&fixture(agent, file));
        let got = obs.provider_error.as_ref();
        assert_eq!(got.map(|e| e.kind), *kind, "{file}: {obs:?}");
        assert_eq!(got.and_then(|e| e.status), *status, "{file}");
        assert_eq!(got.map_or(0, |e| e.failures), *failures, "{file}");
        if let Some(e) = got {
            assert!(e.message.contains(message_has), "{file}: {}", e.message);
            assert!(obs.error_text.is_some(), "{file}: error text");
        }
    }
}

#[test]
fn claude_code_provider_failures() {
    use ProviderErrorKind::*;
    check(
        "claude-code",
        parse_claude_code,
        &[
            ("captured_solved.jsonl", None, None, 0, ""),
            // Still retrying when stopped: the retry events alone classify it.
            (
                "captured_down_retrying.jsonl",
                Some(Unreachable),
                None,
                6,
                "unknown",
            ),
            (
                "captured_500_retrying.jsonl",
                Some(ServerError),
                Some(500),
                6,
                "server_error",
            ),
            (
                "captured_429_retrying.jsonl",
                Some(RateLimited),
                Some(429),
                6,
                "rate_limit",
            ),
            (
                "captured_401_retrying.jsonl",
                Some(Unauthorized),
                Some(401),
                6,
                "authentication_failed",
            ),
            // Retries exhausted: the result event's status and text.
            (
                "captured_down.jsonl",
                Some(Unreachable),
                None,
                1,
                "ECONNREFUSED",
            ),
            (
                "captured_500.jsonl",
                Some(ServerError),
                Some(500),
                1,
                "500 internal server error",
            ),
            (
                "captured_429.jsonl",
                Some(RateLimited),
                Some(429),
                1,
                "rate limit exceeded",
            ),
            (
                "captured_401.jsonl",
                Some(Unauthorized),
                Some(401),
                1,
                "Invalid API key",
            ),
        ],
    );
}

#[test]
fn codex_provider_failures() {
    use ProviderErrorKind::*;
    check(
        "codex",
        parse_codex,
        &[
            ("captured_solved.jsonl", None, None, 0, ""),
            (
                "captured_down.jsonl",
                Some(Unreachable),
                None,
                2,
                "Connection failed",
            ),
            (
                "captured_500.jsonl",
                Some(ServerError),
                None,
                5,
                "high demand",
            ),
            (
                "captured_429.jsonl",
                Some(RateLimited),
                Some(429),
                1,
                "429 Too Many Requests",
            ),
            (
                "captured_401.jsonl",
                Some(Unauthorized),
                Some(401),
                6,
                "invalid x-api-key",
            ),
        ],
    );
}

#[test]
fn claude_code_without_a_model_response_measures_nothing() {
    for file in [
        "captured_401.jsonl",
        "captured_down.jsonl",
        "captured_500.jsonl",
    ] {
        let obs = parse_claude_code(&fixture("claude-code", file));
        assert_eq!(obs.cost_usd, None, "{file}");
        assert_eq!(obs.input_tokens, None, "{file}");
        assert_eq!(obs.cached_input_tokens, None, "{file}");
        assert_eq!(obs.output_tokens, None, "{file}");
        assert_eq!(obs.reported_error, Some(true), "{file}");
        assert_eq!(
            obs.final_message, None,
            "{file}: the error is not an answer"
        );
    }
    let e = parse_claude_code(&fixture("claude-code", "captured_429.jsonl"));
    assert_eq!(
        e.error_text.as_deref(),
        Some("API Error: Request rejected (429) · rate limit exceeded, slow down")
    );
}

#[test]
fn solved_runs_count_model_requests_the_same_way() {
    // Both captures are the same two-request conversation (one tool call, one answer).
    let claude = parse_claude_code(&fixture("claude-code", "captured_solved.jsonl"));
    let codex = parse_codex(&fixture("codex", "captured_solved.jsonl"));
    assert_eq!(claude.turns, Some(2));
    assert_eq!(codex.turns, Some(2));
    assert_eq!(claude.cost_usd, Some(0.000912));
    assert_eq!(codex.cost_usd, None, "codex reports no cost");
    // 2 x (100 fresh + 20 cached) in, 2 x 10 out; codex's input includes the cached.
    assert_eq!(
        (
            claude.input_tokens,
            claude.cached_input_tokens,
            claude.output_tokens
        ),
        (Some(200), Some(40), Some(20))
    );
    assert_eq!(
        (
            codex.input_tokens,
            codex.cached_input_tokens,
            codex.output_tokens
        ),
        (Some(160), Some(40), Some(20))
    );
    for o in [&claude, &codex] {
        assert_eq!(o.reported_error, Some(false));
        assert_eq!(o.error_text, None);
        assert_eq!(
            o.final_message.as_deref(),
            Some("Done: value.txt now holds the answer.")
        );
    }
}
