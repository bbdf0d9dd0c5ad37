use super::*;
use serde_json::json;

fn steps() -> Vec<StepResult> {
    serde_json::from_value(json!([
        {"name": "one<script>", "verdict": "solved", "rewards": {"reward": 1.0, "<b>x</b>": 0.5},
         "started_at": "2026-01-01T00:00:00Z", "ended_at": "2026-01-01T00:01:30Z",
         "agent_exit": 0, "input_tokens": 900, "output_tokens": 10, "cost_usd": 0.5,
         "artifacts": ["a1/steps/one/artifacts/out.txt"],
         "tripwire": {"name": "", "file": "test_x.py", "result": "failed as it must"}},
        {"name": "two", "verdict": "failed", "rewards": {"reward": 0.0},
         "gated_stop": "min_reward <gate>", "cause": "step `two`: <oops>"},
        {"name": "three", "verdict": "not_run"}
    ]))
    .unwrap()
}

#[test]
fn every_step_is_a_section_with_its_facts_escaped() {
    let mut b = String::new();
    render(
        &mut b,
        2,
        &steps(),
        &Artifacts::Unavailable("no <folder>".into()),
        crate::pages::artifact,
    );
    for want in [
        "<h3>Steps (1 of 3 solved)</h3>",
        "id=\"attempt-2-step-1\"",
        "id=\"attempt-2-step-3\"",
        "<code>one&lt;script&gt;</code>",
        "b-solved",
        "b-failed",
        "b-not_run",
        "&lt;b&gt;x&lt;/b&gt; = 0.5, reward = 1",
        "<dt>duration</dt><dd>90.0s</dd>",
        "<dt>started</dt><dd>2026-01-01 00:00:00.000 UTC</dd>",
        "<dt>agent exit</dt><dd>0</dd>",
        "<dt>input tokens</dt><dd>900</dd>",
        "<dt>output tokens</dt><dd>10</dd>",
        "<dt>cost</dt>",
        "<dt>tripwire</dt><dd>failed as it must</dd>",
        "<dt>stopped the rest</dt><dd>min_reward &lt;gate&gt;</dd>",
        "<dt>cause</dt><dd>step `two`: &lt;oops&gt;</dd>",
        "Step one&lt;script&gt; artifact a1/steps/one/artifacts/out.txt",
        "not shown: no &lt;folder&gt;",
    ] {
        assert!(b.contains(want), "missing {want}: {b}");
    }
    assert!(
        !b.contains("<script>") && !b.contains("<b>x") && !b.contains("<oops>"),
        "{b}"
    );
    // The step that did not run shows no facts.
    let three = &b[b.find("attempt-2-step-3").unwrap()..];
    assert!(!three.contains("<dl"), "{three}");
}

#[test]
fn a_one_step_attempt_shows_no_steps() {
    let mut b = String::new();
    render(
        &mut b,
        1,
        &[],
        &Artifacts::Unavailable(String::new()),
        crate::pages::artifact,
    );
    assert!(b.is_empty());
}
