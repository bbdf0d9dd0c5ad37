//! The ATIF schema check: the rules of Harbor 0.25.0's pydantic models
//! (`harbor/models/trajectories/*.py`), applied to any JSON value, so a trajectory read from
//! a file (ours or another producer's) is checked the way Harbor would load it.
//!
//! Checked: the known keys of every object (`extra = "forbid"`), required fields, field
//! types, the `schema_version` literals, `source` literals, at least one step, `step_id`s
//! sequential from 1, ISO 8601 timestamps, fields reserved to `agent` steps, the
//! `llm_call_count = 0` rule, every `source_call_id` naming a tool call of its own step, and
//! `total_steps >= 0`. Multimodal content parts and subagent references are checked only as
//! arrays of objects. Integers must be JSON integers (Harbor's lax mode would also take
//! `"12"`; akbench never writes that).

use serde_json::{Map, Value};

/// The versions Harbor 0.25.0 accepts.
pub const VERSIONS: &[&str] = &[
    "ATIF-v1.0",
    "ATIF-v1.1",
    "ATIF-v1.2",
    "ATIF-v1.3",
    "ATIF-v1.4",
    "ATIF-v1.5",
    "ATIF-v1.6",
    "ATIF-v1.7",
    "ATIF-v1.8",
];

/// A trajectory that Harbor's models would refuse, with every problem found.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("failed to validate the trajectory against ATIF ({}); fix the producer of the trajectory", .problems.join("; "))]
pub struct InvalidTrajectory {
    /// One line per problem, each starting with the JSON path of the field.
    pub problems: Vec<String>,
}

#[derive(Clone, Copy)]
enum Kind {
    Str,
    Int,
    NonNegInt,
    Number,
    Bool,
    Object,
    ObjectArray,
    IntArray,
    NumberArray,
    StrOrNumber,
    StrOrParts,
}

struct Checker {
    problems: Vec<String>,
}

impl Checker {
    fn fail(&mut self, path: &str, what: impl std::fmt::Display) {
        self.problems.push(format!("{path}: {what}"));
    }

    /// Checks the keys of an object against `(name, kind, required)` and returns it.
    fn object<'v>(
        &mut self,
        path: &str,
        v: &'v Value,
        fields: &[(&str, Kind, bool)],
    ) -> Option<&'v Map<String, Value>> {
        let Some(map) = v.as_object() else {
            self.fail(path, "must be an object");
            return None;
        };
        for key in map.keys() {
            if !fields.iter().any(|(n, _, _)| n == key) {
                self.fail(
                    &format!("{path}.{key}"),
                    "is not a field of ATIF (extra fields are forbidden)",
                );
            }
        }
        for (name, kind, required) in fields {
            let p = format!("{path}.{name}");
            match map.get(*name) {
                None if *required => self.fail(&p, "is required"),
                None | Some(Value::Null) if !*required => {}
                None => {}
                Some(v) => self.kind(&p, v, *kind),
            }
        }
        Some(map)
    }

    fn kind(&mut self, path: &str, v: &Value, kind: Kind) {
        let ok = match kind {
            Kind::Str => v.is_string(),
            Kind::Int => v.is_i64() || v.is_u64(),
            Kind::NonNegInt => v.is_u64(),
            Kind::Number => v.is_number(),
            Kind::Bool => v.is_boolean(),
            Kind::Object => v.is_object(),
            Kind::ObjectArray => v.as_array().is_some_and(|a| a.iter().all(Value::is_object)),
            Kind::IntArray => v
                .as_array()
                .is_some_and(|a| a.iter().all(|x| x.is_i64() || x.is_u64())),
            Kind::NumberArray => v.as_array().is_some_and(|a| a.iter().all(Value::is_number)),
            Kind::StrOrNumber => v.is_string() || v.is_number(),
            Kind::StrOrParts => {
                v.is_string() || v.as_array().is_some_and(|a| a.iter().all(Value::is_object))
            }
        };
        if !ok {
            let want = match kind {
                Kind::Str => "a string",
                Kind::Int => "an integer",
                Kind::NonNegInt => "an integer >= 0",
                Kind::Number => "a number",
                Kind::Bool => "a boolean",
                Kind::Object => "an object",
                Kind::ObjectArray => "an array of objects",
                Kind::IntArray => "an array of integers",
                Kind::NumberArray => "an array of numbers",
                Kind::StrOrNumber => "a string or a number",
                Kind::StrOrParts => "a string or an array of content parts",
            };
            self.fail(path, format!("must be {want}"));
        }
    }
}

use Kind::*;

const TRAJECTORY: &[(&str, Kind, bool)] = &[
    ("schema_version", Str, false),
    ("session_id", Str, false),
    ("trajectory_id", Str, false),
    ("agent", Object, true),
    ("steps", ObjectArray, true),
    ("notes", Str, false),
    ("final_metrics", Object, false),
    ("continued_trajectory_ref", Str, false),
    ("extra", Object, false),
    ("subagent_trajectories", ObjectArray, false),
];
const AGENT: &[(&str, Kind, bool)] = &[
    ("name", Str, true),
    ("version", Str, true),
    ("model_name", Str, false),
    ("tool_definitions", ObjectArray, false),
    ("extra", Object, false),
];
const STEP: &[(&str, Kind, bool)] = &[
    ("step_id", Int, true),
    ("timestamp", Str, false),
    ("source", Str, true),
    ("model_name", Str, false),
    ("reasoning_effort", StrOrNumber, false),
    ("message", StrOrParts, true),
    ("reasoning_content", Str, false),
    ("tool_calls", ObjectArray, false),
    ("observation", Object, false),
    ("metrics", Object, false),
    ("is_copied_context", Bool, false),
    ("llm_call_count", NonNegInt, false),
    ("extra", Object, false),
];
const TOOL_CALL: &[(&str, Kind, bool)] = &[
    ("tool_call_id", Str, true),
    ("function_name", Str, true),
    ("arguments", Object, true),
    ("extra", Object, false),
];
const OBSERVATION: &[(&str, Kind, bool)] = &[("results", ObjectArray, true)];
const RESULT: &[(&str, Kind, bool)] = &[
    ("source_call_id", Str, false),
    ("content", StrOrParts, false),
    ("subagent_trajectory_ref", ObjectArray, false),
    ("extra", Object, false),
];
const METRICS: &[(&str, Kind, bool)] = &[
    ("prompt_tokens", Int, false),
    ("completion_tokens", Int, false),
    ("cached_tokens", Int, false),
    ("cost_usd", Number, false),
    ("prompt_token_ids", IntArray, false),
    ("completion_token_ids", IntArray, false),
    ("logprobs", NumberArray, false),
    ("extra", Object, false),
];
const FINAL_METRICS: &[(&str, Kind, bool)] = &[
    ("total_prompt_tokens", Int, false),
    ("total_completion_tokens", Int, false),
    ("total_cached_tokens", Int, false),
    ("total_cost_usd", Number, false),
    ("total_steps", NonNegInt, false),
    ("extra", Object, false),
];
const AGENT_ONLY: &[&str] = &[
    "model_name",
    "reasoning_effort",
    "reasoning_content",
    "tool_calls",
    "metrics",
];

/// Checks `v` against ATIF as Harbor 0.25.0 defines it (see the module documentation).
pub fn validate(v: &Value) -> Result<(), InvalidTrajectory> {
    let mut c = Checker {
        problems: Vec::new(),
    };
    trajectory(&mut c, "$", v);
    if c.problems.is_empty() {
        Ok(())
    } else {
        Err(InvalidTrajectory {
            problems: c.problems,
        })
    }
}

fn present<'v>(map: &'v Map<String, Value>, key: &str) -> Option<&'v Value> {
    map.get(key).filter(|v| !v.is_null())
}

fn trajectory(c: &mut Checker, path: &str, v: &Value) {
    let Some(t) = c.object(path, v, TRAJECTORY) else {
        return;
    };
    if let Some(s) = present(t, "schema_version").and_then(Value::as_str) {
        if !VERSIONS.contains(&s) {
            c.fail(
                &format!("{path}.schema_version"),
                format!("`{s}` is not one of {}", VERSIONS.join(", ")),
            );
        }
    }
    if let Some(a) = t.get("agent").filter(|a| a.is_object()) {
        c.object(&format!("{path}.agent"), a, AGENT);
    }
    if let Some(fm) = present(t, "final_metrics").filter(|v| v.is_object()) {
        c.object(&format!("{path}.final_metrics"), fm, FINAL_METRICS);
    }
    if let Some(steps) = t.get("steps").and_then(Value::as_array) {
        if steps.is_empty() {
            c.fail(&format!("{path}.steps"), "must hold at least one step");
        }
        for (i, s) in steps.iter().enumerate() {
            step(c, &format!("{path}.steps[{i}]"), s, i as u64 + 1);
        }
    }
    if let Some(subs) = present(t, "subagent_trajectories").and_then(Value::as_array) {
        let mut seen = std::collections::BTreeSet::new();
        for (i, s) in subs.iter().enumerate() {
            let p = format!("{path}.subagent_trajectories[{i}]");
            match s.get("trajectory_id").and_then(Value::as_str) {
                None => c.fail(&p, "an embedded subagent needs a `trajectory_id`"),
                Some(id) if !seen.insert(id.to_string()) => {
                    c.fail(&p, format!("trajectory_id `{id}` is not unique"))
                }
                Some(_) => {}
            }
            trajectory(c, &p, s);
        }
    }
}

fn step(c: &mut Checker, path: &str, v: &Value, expected_id: u64) {
    let Some(s) = c.object(path, v, STEP) else {
        return;
    };
    if let Some(id) = s.get("step_id").filter(|v| v.is_i64() || v.is_u64()) {
        if id.as_u64() != Some(expected_id) {
            c.fail(
                &format!("{path}.step_id"),
                format!("expected {expected_id} (sequential from 1), got {id}"),
            );
        }
    }
    let source = s.get("source").and_then(Value::as_str);
    if let Some(src) = source {
        if !["system", "user", "agent"].contains(&src) {
            c.fail(
                &format!("{path}.source"),
                format!("`{src}` is not one of system, user, agent"),
            );
        }
    }
    if let Some(ts) = present(s, "timestamp").and_then(Value::as_str) {
        if !iso_8601(ts) {
            c.fail(
                &format!("{path}.timestamp"),
                format!("`{ts}` is not an ISO 8601 timestamp"),
            );
        }
    }
    if source.is_some_and(|s| s != "agent") {
        for f in AGENT_ONLY {
            if present(s, f).is_some() {
                c.fail(&format!("{path}.{f}"), "is only allowed on `agent` steps");
            }
        }
    }
    if source == Some("agent") && present(s, "llm_call_count").and_then(Value::as_u64) == Some(0) {
        for f in ["metrics", "reasoning_content"] {
            if present(s, f).is_some() {
                c.fail(
                    &format!("{path}.{f}"),
                    "must be absent when llm_call_count is 0",
                );
            }
        }
    }
    let mut ids = Vec::new();
    if let Some(calls) = present(s, "tool_calls").and_then(Value::as_array) {
        for (i, call) in calls.iter().enumerate() {
            if let Some(m) = c.object(&format!("{path}.tool_calls[{i}]"), call, TOOL_CALL) {
                if let Some(id) = m.get("tool_call_id").and_then(Value::as_str) {
                    ids.push(id.to_string());
                }
            }
        }
    }
    if let Some(m) = present(s, "metrics").filter(|v| v.is_object()) {
        c.object(&format!("{path}.metrics"), m, METRICS);
    }
    if let Some(o) = present(s, "observation").filter(|v| v.is_object()) {
        let op = format!("{path}.observation");
        let Some(obs) = c.object(&op, o, OBSERVATION) else {
            return;
        };
        for (i, r) in obs
            .get("results")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            let rp = format!("{op}.results[{i}]");
            let Some(r) = c.object(&rp, r, RESULT) else {
                continue;
            };
            if let Some(id) = present(r, "source_call_id").and_then(Value::as_str) {
                if !ids.iter().any(|t| t == id) {
                    c.fail(
                        &format!("{rp}.source_call_id"),
                        format!("`{id}` names no tool call of this step"),
                    );
                }
            }
        }
    }
}

/// What Python's `datetime.fromisoformat` takes (after `Z` becomes `+00:00`), as far as
/// producers write it: a date, or a date and time with an optional offset.
fn iso_8601(s: &str) -> bool {
    use chrono::{DateTime, NaiveDate, NaiveDateTime};
    let s = s.replace('Z', "+00:00");
    DateTime::parse_from_rfc3339(&s).is_ok()
        || DateTime::parse_from_str(&s, "%Y-%m-%dT%H:%M:%S%.f%:z").is_ok()
        || NaiveDateTime::parse_from_str(&s, "%Y-%m-%dT%H:%M:%S%.f").is_ok()
        || NaiveDateTime::parse_from_str(&s, "%Y-%m-%d %H:%M:%S%.f").is_ok()
        || NaiveDate::parse_from_str(&s, "%Y-%m-%d").is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ok() -> Value {
        json!({
            "schema_version": "ATIF-v1.8",
            "agent": {"name": "a", "version": "1"},
            "steps": [
                {"step_id": 1, "source": "user", "message": "do it", "timestamp": "2026-01-02T03:04:05Z"},
                {"step_id": 2, "source": "agent", "message": "", "tool_calls": [
                    {"tool_call_id": "t1", "function_name": "Bash", "arguments": {}}
                ], "observation": {"results": [{"source_call_id": "t1", "content": "out"}]},
                 "metrics": {"prompt_tokens": 3, "cached_tokens": 1, "cost_usd": 0.5}}
            ],
            "final_metrics": {"total_steps": 2}
        })
    }

    #[test]
    fn a_valid_trajectory_passes() {
        validate(&ok()).unwrap();
    }

    /// Each case breaks one Harbor rule; the error names the path.
    #[test]
    fn each_rule_is_enforced() {
        type Edit = fn(&mut Value);
        let cases: &[(Edit, &str)] = &[
            (
                |v| v["schema_version"] = json!("ATIF-v2"),
                "$.schema_version",
            ),
            (|v| v["steps"] = json!([]), "$.steps"),
            (|v| v["bogus"] = json!(1), "$.bogus"),
            (
                |v| {
                    v["agent"].as_object_mut().unwrap().remove("version");
                },
                "$.agent.version",
            ),
            (
                |v| v["steps"][1]["step_id"] = json!(3),
                "$.steps[1].step_id",
            ),
            (
                |v| v["steps"][0]["source"] = json!("tool"),
                "$.steps[0].source",
            ),
            (
                |v| v["steps"][0]["timestamp"] = json!("yesterday"),
                "$.steps[0].timestamp",
            ),
            (
                |v| v["steps"][0]["metrics"] = json!({}),
                "$.steps[0].metrics",
            ),
            (
                |v| v["steps"][0]["reasoning_content"] = json!("x"),
                "$.steps[0].reasoning_content",
            ),
            (
                |v| {
                    v["steps"][1].as_object_mut().unwrap().remove("message");
                },
                "$.steps[1].message",
            ),
            (
                |v| v["steps"][1]["tool_calls"][0]["arguments"] = json!("ls"),
                "$.steps[1].tool_calls[0].arguments",
            ),
            (
                |v| v["steps"][1]["observation"]["results"][0]["source_call_id"] = json!("t9"),
                "source_call_id",
            ),
            (
                |v| v["steps"][1]["metrics"]["prompt_tokens"] = json!(1.5),
                "prompt_tokens",
            ),
            (
                |v| v["steps"][1]["metrics"]["tokens"] = json!(1),
                "$.steps[1].metrics.tokens",
            ),
            (
                |v| v["steps"][1]["llm_call_count"] = json!(0),
                "$.steps[1].metrics",
            ),
            (
                |v| v["final_metrics"]["total_steps"] = json!(-1),
                "total_steps",
            ),
        ];
        for (i, (edit, path)) in cases.iter().enumerate() {
            let mut v = ok();
            edit(&mut v);
            let err = validate(&v).expect_err(&format!("case {i} passed"));
            assert!(
                err.problems.iter().any(|p| p.contains(path)),
                "case {i}: {:?} does not name {path}",
                err.problems
            );
        }
    }
}
