//! Semantic, field-by-field comparison of two resolved specs.
//!
//! This module owns [`diff`] and [`SpecDiff`]. Only the conditions are compared (identities
//! and provenance never): task releases are matched by id and agent conditions by label, so
//! an added, removed or changed one is reported as such; every other field is compared by
//! its dotted path. `diff(a, a)` is empty and `diff(b, a)` is `diff(a, b)` with the sides
//! swapped.

use crate::spec::{ResolvedRunSpec, RunCondition};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::fmt;

/// What happened to a field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    /// Only on the right.
    Added,
    /// Only on the left.
    Removed,
    /// On both sides with different values.
    Changed,
}

/// One difference.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Change {
    /// Dotted path, e.g. `tasks.wordcount-001.release.version` or `agents.fail`.
    pub path: String,
    /// Added, removed or changed.
    pub kind: ChangeKind,
    /// Left value (absent when added).
    pub left: Option<Value>,
    /// Right value (absent when removed).
    pub right: Option<Value>,
}

/// The differences between two specs' conditions, in path order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpecDiff {
    /// The changes.
    pub changes: Vec<Change>,
}

impl SpecDiff {
    /// True when the conditions are identical.
    pub fn is_empty(&self) -> bool {
        self.changes.is_empty()
    }

    /// The same diff seen from the other side.
    pub fn swapped(&self) -> SpecDiff {
        SpecDiff {
            changes: self
                .changes
                .iter()
                .map(|c| Change {
                    path: c.path.clone(),
                    kind: match c.kind {
                        ChangeKind::Added => ChangeKind::Removed,
                        ChangeKind::Removed => ChangeKind::Added,
                        ChangeKind::Changed => ChangeKind::Changed,
                    },
                    left: c.right.clone(),
                    right: c.left.clone(),
                })
                .collect(),
        }
    }
}

fn short(v: &Value) -> String {
    match v {
        Value::String(s) => format!("{s:?}"),
        Value::Object(o) => {
            // An added or removed task or agent: name its identity, not every field.
            if let Some(r) = o.get("release") {
                return format!(
                    "version {} ({})",
                    r.get("version").map(short).unwrap_or_default(),
                    r.get("digest").and_then(Value::as_str).unwrap_or("")
                );
            }
            if let Some(d) = o.get("digest").and_then(Value::as_str) {
                return d.to_string();
            }
            v.to_string()
        }
        _ => v.to_string(),
    }
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.kind, &self.left, &self.right) {
            (ChangeKind::Added, _, Some(r)) => write!(f, "+ {}: {}", self.path, short(r)),
            (ChangeKind::Removed, Some(l), _) => write!(f, "- {}: {}", self.path, short(l)),
            (_, Some(l), Some(r)) => write!(f, "~ {}: {} -> {}", self.path, short(l), short(r)),
            _ => write!(f, "? {}", self.path),
        }
    }
}

impl fmt::Display for SpecDiff {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for c in &self.changes {
            writeln!(f, "{c}")?;
        }
        Ok(())
    }
}

/// Compares the conditions of two specs.
pub fn diff(left: &ResolvedRunSpec, right: &ResolvedRunSpec) -> SpecDiff {
    diff_conditions(&left.condition, &right.condition)
}

/// Compares two conditions.
pub fn diff_conditions(left: &RunCondition, right: &RunCondition) -> SpecDiff {
    let mut changes = Vec::new();
    walk("", &keyed(left), &keyed(right), &mut changes);
    changes.sort_by(|a, b| a.path.cmp(&b.path));
    SpecDiff { changes }
}

/// The condition as JSON with `tasks` keyed by id and `agents` keyed by label.
fn keyed(c: &RunCondition) -> Value {
    let mut v = serde_json::to_value(c).expect("a condition always serializes");
    let o = v.as_object_mut().expect("a condition is an object");
    let tasks: Map<String, Value> = c
        .tasks
        .iter()
        .map(|t| {
            let tv = serde_json::to_value(t).expect("a task always serializes");
            (t.release.id.clone(), tv)
        })
        .collect();
    let agents: Map<String, Value> = c
        .agents
        .iter()
        .map(|a| {
            let av = serde_json::to_value(a).expect("an agent always serializes");
            (a.label.clone(), av)
        })
        .collect();
    o.insert("tasks".into(), Value::Object(tasks));
    o.insert("agents".into(), Value::Object(agents));
    // Agent order decides plan order: a reorder is a change of its own.
    o.insert(
        "agent_order".into(),
        Value::Array(
            c.agents
                .iter()
                .map(|a| Value::String(a.label.clone()))
                .collect(),
        ),
    );
    v
}

fn join(prefix: &str, k: &str) -> String {
    if prefix.is_empty() {
        k.to_string()
    } else {
        format!("{prefix}.{k}")
    }
}

fn walk(path: &str, l: &Value, r: &Value, out: &mut Vec<Change>) {
    if l == r {
        return;
    }
    match (l, r) {
        (Value::Object(lo), Value::Object(ro)) => {
            for (k, lv) in lo {
                let p = join(path, k);
                match ro.get(k) {
                    Some(rv) => walk(&p, lv, rv, out),
                    None => out.push(removed(p, lv)),
                }
            }
            for (k, rv) in ro {
                if !lo.contains_key(k) {
                    out.push(added(join(path, k), rv));
                }
            }
        }
        _ => out.push(Change {
            path: path.to_string(),
            kind: ChangeKind::Changed,
            left: Some(l.clone()),
            right: Some(r.clone()),
        }),
    }
}

fn added(path: String, v: &Value) -> Change {
    Change {
        path,
        kind: ChangeKind::Added,
        left: None,
        right: Some(v.clone()),
    }
}

fn removed(path: String, v: &Value) -> Change {
    Change {
        path,
        kind: ChangeKind::Removed,
        left: Some(v.clone()),
        right: None,
    }
}

#[cfg(test)]
mod tests;
