//! aider's chat history and analytics log (printed by the adapter's wrapper after its run) to
//! ATIF (the format is described in [`crate::observe::aider`]).
//!
//! - Each answer of the model's is one `agent` step holding its text (the edits are written
//!   in it); the n-th answer gets the n-th `message_send` event's tokens, cost (when above 0)
//!   and time as its metrics and timestamp.
//! - aider has no tool calls: each file it changed from an answer (`Applied edit to F`) is a
//!   tool call `edit_file` `{path, edit_format}` of that answer's step, with aider's line as
//!   its result, so the trajectory shows every change the agent made.
//! - The provider failures aider printed (`litellm.<Class>: ...`) are `system` steps.
//! - The first request is the instruction (the first `user` step, as for every agent);
//!   aider's later requests of its own (reflections: a failed edit, lint errors) are `user`
//!   steps; its other lines (questions it answered itself, token reports) are not steps.
//! - `final_metrics.total_cost_usd` is the session's cost when above 0; `extra.exit` and
//!   `extra.edit_format` are kept.
//! - Without a chat history (the agent was killed), the output's tail is kept as a scripted
//!   agent's.

use super::{from_scripted, object, Builder, FinalMetrics, Metrics, Observation};
use super::{Agent, ObservationResult, Source, Step, ToolCall, Trajectory, UNKNOWN};
use crate::observe::aider::{answers, failure_of_line, Entry};
use serde_json::{Map, Value};

/// Converts the wrapper's output; `instruction` becomes the first `user` step.
pub fn from_aider(stdout: &str, instruction: Option<&str>) -> Trajectory {
    let (a, history, model) = answers(stdout);
    if history.is_empty() {
        return from_scripted("aider", stdout, instruction);
    }
    let edit_format = a.edit_format.clone();
    let mut b = Builder::new(instruction);
    let mut sends = a.sends.iter();
    let mut last_agent: Option<usize> = None;
    let mut first_request = true;
    for e in history {
        match e {
            Entry::User(text) => {
                if !first_request {
                    b.push(Step::new(Source::User, text));
                }
                first_request = false;
                last_agent = None;
            }
            Entry::Assistant(text) => {
                let mut step = Step::new(Source::Agent, text);
                step.model_name = model.clone();
                if let Some(s) = sends.next() {
                    step.timestamp = s
                        .time
                        .and_then(|t| chrono::DateTime::from_timestamp(t, 0))
                        .map(|d| d.to_rfc3339_opts(chrono::SecondsFormat::Secs, true));
                    step.metrics = Some(Metrics {
                        prompt_tokens: s.prompt,
                        completion_tokens: s.completion,
                        cached_tokens: None,
                        cost_usd: s.cost,
                        extra: None,
                    });
                }
                last_agent = Some(b.push(step));
            }
            Entry::Note(note) => {
                if let Some(path) = note.strip_prefix("Applied edit to ") {
                    let Some(i) = last_agent else { continue };
                    let step = &mut b.steps[i];
                    let calls = step.tool_calls.get_or_insert_with(Vec::new);
                    let id = format!("edit_{}_{}", step.step_id, calls.len() + 1);
                    let mut args = object([("path", Value::from(path))]);
                    if let Some(f) = &edit_format {
                        args.insert("edit_format".into(), Value::from(f.as_str()));
                    }
                    calls.push(ToolCall {
                        tool_call_id: id.clone(),
                        function_name: "edit_file".into(),
                        arguments: args,
                        extra: None,
                    });
                    step.observation
                        .get_or_insert_with(|| Observation { results: vec![] })
                        .results
                        .push(ObservationResult {
                            source_call_id: Some(id),
                            content: Some(note.clone()),
                            extra: None,
                        });
                } else if failure_of_line(&note).is_some() {
                    b.push(Step::new(Source::System, note));
                }
            }
        }
    }
    let mut extra = Map::new();
    if let Some(x) = &a.exit {
        extra.insert("exit".into(), Value::from(x.as_str()));
    }
    if let Some(f) = &edit_format {
        extra.insert("edit_format".into(), Value::from(f.as_str()));
    }
    let totals = FinalMetrics {
        total_cost_usd: a.total_cost,
        extra: (!extra.is_empty()).then_some(extra),
        ..FinalMetrics::default()
    };
    let agent = Agent {
        name: "aider".into(),
        version: UNKNOWN.into(),
        model_name: model,
        extra: None,
    };
    b.finish(agent, Some(totals))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::aider::{ANALYTICS_MARKER, HISTORY_MARKER};
    use crate::trajectory::validate;
    use serde_json::json;

    #[test]
    fn answers_with_their_edits_tokens_and_failures() {
        let events = [
            json!({"event": "message_send", "properties": {"edit_format": "diff",
                "prompt_tokens": 100, "completion_tokens": 10, "cost": 0.5, "total_cost": 0.5},
                "time": 1796575521}),
            json!({"event": "message_send", "properties": {"edit_format": "diff",
                "prompt_tokens": 200, "completion_tokens": 20, "cost": 0.25, "total_cost": 0.75},
                "time": 1796575522}),
            json!({"event": "exit", "properties": {"reason": "Completed --message"}}),
        ]
        .iter()
        .map(|e| e.to_string() + "\n")
        .collect::<String>();
        let md = "# aider chat started at 2026-12-06 16:45:17\n\n> Aider v0.86.2  \n\n#### fix it  \n> litellm.RateLimitError: RateLimitError: slow down  \n> Retrying in 0.2 seconds...  \n\nFirst try.\n\n> Tokens: 100 sent, 10 received.  \n> Applied edit to a.py  \n> Applied edit to b.py  \n\n#### Fix the lint errors  \n\nSecond.\n";
        let text = format!(
            "Model: openai/m1 with diff edit format\n{ANALYTICS_MARKER}\n{events}{HISTORY_MARKER}\n{md}"
        );
        let t = from_aider(&text, Some("fix it"));
        validate(&serde_json::to_value(&t).unwrap()).unwrap();
        let kinds: Vec<_> = t
            .steps
            .iter()
            .map(|s| (s.source, s.message.as_str()))
            .collect();
        assert_eq!(
            kinds,
            [
                (Source::User, "fix it"),
                (
                    Source::System,
                    "litellm.RateLimitError: RateLimitError: slow down"
                ),
                (Source::Agent, "First try."),
                (Source::User, "Fix the lint errors"),
                (Source::Agent, "Second."),
            ]
        );
        let s = &t.steps[2];
        let calls = s.tool_calls.as_ref().unwrap();
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[1].arguments["path"], "b.py");
        assert_eq!(calls[1].arguments["edit_format"], "diff");
        let r = &s.observation.as_ref().unwrap().results[1];
        assert_eq!(
            r.source_call_id.as_deref(),
            Some(calls[1].tool_call_id.as_str())
        );
        assert_eq!(s.timestamp.as_deref(), Some("2026-12-06T16:45:21Z"));
        assert_eq!(s.model_name.as_deref(), Some("openai/m1"));
        let m = t.steps[4].metrics.as_ref().unwrap();
        assert_eq!((m.prompt_tokens, m.cost_usd), (Some(200), Some(0.25)));
        let fm = t.final_metrics.unwrap();
        assert_eq!(fm.total_prompt_tokens, Some(300));
        assert_eq!(fm.total_cost_usd, Some(0.75));
        assert_eq!(fm.extra.unwrap()["exit"], "Completed --message");
        // Killed before it printed its history: the output's tail.
        let t = from_aider("Tokens: 1 sent, 1 received.\n", Some("x"));
        validate(&serde_json::to_value(&t).unwrap()).unwrap();
        assert_eq!(t.agent.name, "aider");
    }
}
