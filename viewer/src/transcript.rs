//! The transcript on the trial page: an attempt's ATIF trajectory (docs/trajectory.md) as
//! steps (source, message, reasoning, tool calls with their arguments and results, tokens
//! and cost per step), rendered on the server in one pass. Long texts are folded in
//! `<details>` and cut at [`TEXT_CAP`] bytes so a 1,000-step transcript stays one quick page.

use crate::html::esc;
use akbench_core::record::{resolve_inside, AttemptRecord};
use akbench_core::trajectory::{self, Metrics, Source, Step, Trajectory};
use std::fmt::Write as _;
use std::path::Path;

/// Largest trajectory or stdout read for the transcript.
pub const READ_CAP: u64 = 64 << 20;
/// Bytes of one message, argument list or tool result shown.
pub const TEXT_CAP: usize = 16 * 1024;
/// Texts longer than this many lines (or [`FOLD_BYTES`]) are folded.
const FOLD_LINES: usize = 12;
const FOLD_BYTES: usize = 1500;

/// The attempt's trajectory: its stored `trajectory.json`, else converted from its stored
/// stdout by the adapter's converter (`true` when converted). Paths stay inside `dir`.
pub fn load(dir: &Path, adapter: &str, a: &AttemptRecord) -> Result<(Trajectory, bool), String> {
    let stored = format!("{}/{}", a.artifacts_dir, trajectory::FILE_NAME);
    if let Ok(p) = resolve_inside(dir, &stored) {
        let bytes = read(&p)?;
        let t = serde_json::from_slice(&bytes)
            .map_err(|e| format!("{} is not a trajectory akbench reads: {e}", stored))?;
        return Ok((t, false));
    }
    let rel = a
        .agent_process
        .as_ref()
        .and_then(|p| p.stdout_path.as_deref())
        .ok_or("the agent never ran")?;
    let bytes = read(&resolve_inside(dir, rel)?)?;
    let version = a
        .provenance
        .as_ref()
        .and_then(|p| p.agent_cli_version.as_deref());
    let t = trajectory::convert(adapter, &String::from_utf8_lossy(&bytes), None, version);
    Ok((t, true))
}

/// The first [`READ_CAP`] bytes of a regular file (a FIFO or device is refused, unread).
fn read(p: &Path) -> Result<Vec<u8>, String> {
    akbench_core::bounded_read::read_prefix(p, READ_CAP, akbench_core::bounded_read::Links::Follow)
        .map_err(|e| format!("{} {e}", p.display()))
}

/// Renders the transcript section of one attempt.
pub fn render(b: &mut String, t: &Trajectory, converted: bool) {
    let _ = write!(
        b,
        "<h3>Transcript</h3><p class=\"note\">{n} steps · {agent}{v}{m}{tot}{conv}</p><ol class=\"transcript\">",
        n = t.steps.len(),
        agent = esc(&t.agent.name),
        v = if t.agent.version == trajectory::UNKNOWN {
            String::new()
        } else {
            format!(" {}", esc(&t.agent.version))
        },
        m = t
            .agent
            .model_name
            .as_deref()
            .map(|m| format!(" · {}", esc(m)))
            .unwrap_or_default(),
        tot = t
            .final_metrics
            .as_ref()
            .map(|f| {
                tokens(&Metrics {
                    prompt_tokens: f.total_prompt_tokens,
                    completion_tokens: f.total_completion_tokens,
                    cached_tokens: f.total_cached_tokens,
                    cost_usd: f.total_cost_usd,
                    extra: None,
                })
            })
            .filter(|s| !s.is_empty())
            .map(|s| format!(" · total {s}"))
            .unwrap_or_default(),
        conv = if converted {
            " · converted from the agent's stdout (no trajectory.json stored)"
        } else {
            ""
        },
    );
    let mut previous: Option<chrono::DateTime<chrono::FixedOffset>> = None;
    for s in &t.steps {
        let at = s.timestamp.as_deref().and_then(parse_time);
        let since = match (previous, at) {
            (Some(p), Some(a)) => Some((a - p).num_milliseconds()),
            _ => None,
        };
        step(b, s, since);
        previous = at.or(previous);
    }
    b.push_str("</ol>");
}

/// An RFC 3339 timestamp (`Z` or an offset).
fn parse_time(s: &str) -> Option<chrono::DateTime<chrono::FixedOffset>> {
    chrono::DateTime::parse_from_rfc3339(s).ok()
}

/// `s`: one step; `since`: milliseconds since the previous timed step, when both are known.
fn step(b: &mut String, s: &Step, since: Option<i64>) {
    let source = match s.source {
        Source::System => "system",
        Source::User => "user",
        Source::Agent => "agent",
    };
    let _ = write!(
        b,
        "<li class=\"step s-{source}\" id=\"step-{id}\"><div class=\"step-head\"><span class=\"src\">{source}</span> #{id}",
        id = s.step_id
    );
    if let Some(ts) = &s.timestamp {
        let _ = write!(b, " · <time>{}</time>", esc(ts));
    }
    if let Some(ms) = since.filter(|ms| *ms >= 0) {
        let _ = write!(
            b,
            " · <span class=\"dt\">+{:.1}s</span>",
            ms as f64 / 1000.0
        );
    }
    if let Some(m) = &s.model_name {
        let _ = write!(b, " · {}", esc(m));
    }
    if let Some(m) = s.metrics.as_ref().map(tokens).filter(|t| !t.is_empty()) {
        let _ = write!(b, " · <span class=\"tokens\">{m}</span>");
    }
    b.push_str("</div>");
    if let Some(r) = &s.reasoning_content {
        let _ = write!(
            b,
            "<details class=\"reasoning\"><summary>reasoning</summary><pre class=\"msg\">{}</pre></details>",
            capped(r)
        );
    }
    if !s.message.is_empty() {
        text(b, "msg", "message", &s.message);
    }
    let results = s
        .observation
        .as_ref()
        .map(|o| &o.results[..])
        .unwrap_or(&[]);
    for c in s.tool_calls.iter().flatten() {
        let args = arguments(&c.arguments);
        let _ = write!(
            b,
            "<div class=\"call\"><div class=\"call-head\">tool <code>{}</code></div>",
            esc(&c.function_name)
        );
        text(b, "args", "input", &args);
        match results
            .iter()
            .find(|r| r.source_call_id.as_deref() == Some(&c.tool_call_id))
        {
            Some(r) => {
                let err = r
                    .extra
                    .as_ref()
                    .is_some_and(|e| e.get("is_error").and_then(|v| v.as_bool()) == Some(true));
                let label = if err { "output (error)" } else { "output" };
                text(b, "out", label, r.content.as_deref().unwrap_or(""));
            }
            None => b.push_str("<p class=\"note\">no result recorded</p>"),
        }
        b.push_str("</div>");
    }
    for r in results.iter().filter(|r| {
        r.source_call_id.is_none()
            || !s
                .tool_calls
                .iter()
                .flatten()
                .any(|c| Some(&c.tool_call_id) == r.source_call_id.as_ref())
    }) {
        text(b, "out", "result", r.content.as_deref().unwrap_or(""));
    }
    b.push_str("</li>");
}

/// A tool call's arguments as text: a shell command alone; string arguments as `name: value`
/// (multi-line values below their name, as written); anything else as pretty JSON.
fn arguments(args: &serde_json::Map<String, serde_json::Value>) -> String {
    if let Some(cmd) = args.get("command").and_then(|v| v.as_str()) {
        if args.len() <= 2 {
            return cmd.to_string();
        }
    }
    if !args.values().all(|v| v.is_string()) {
        return serde_json::to_string_pretty(args).unwrap_or_default();
    }
    args.iter()
        .map(|(k, v)| {
            let v = v.as_str().unwrap_or_default();
            if v.contains('\n') {
                format!("{k}:\n{v}")
            } else {
                format!("{k}: {v}")
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// One text, folded in `<details>` when long.
fn text(b: &mut String, class: &str, label: &str, s: &str) {
    let long = s.len() > FOLD_BYTES || s.lines().count() > FOLD_LINES;
    if long {
        let _ = write!(
            b,
            "<details class=\"{class}\"><summary>{label} ({} lines, {} bytes)</summary><pre class=\"{class}\">{}</pre></details>",
            s.lines().count(),
            s.len(),
            capped(s)
        );
    } else if label == "message" {
        let _ = write!(b, "<pre class=\"{class}\">{}</pre>", esc(s));
    } else {
        let _ = write!(
            b,
            "<div class=\"{class}\"><span class=\"lbl\">{label}</span><pre class=\"{class}\">{}</pre></div>",
            esc(s)
        );
    }
}

/// `s` escaped, cut at [`TEXT_CAP`] bytes with a note.
fn capped(s: &str) -> String {
    if s.len() <= TEXT_CAP {
        return esc(s);
    }
    let mut end = TEXT_CAP;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}\n… ({} more bytes not shown; the agent's stdout has them)",
        esc(&s[..end]),
        s.len() - end
    )
}

/// `1,234 in (1,000 cached) · 56 out · $0.0123`, from what is known.
fn tokens(m: &Metrics) -> String {
    let mut parts = Vec::new();
    if let Some(p) = m.prompt_tokens {
        match m.cached_tokens {
            Some(c) if c > 0 => parts.push(format!("{p} in ({c} cached)")),
            _ => parts.push(format!("{p} in")),
        }
    }
    if let Some(c) = m.completion_tokens {
        parts.push(format!("{c} out"));
    }
    if let Some(c) = m.cost_usd {
        parts.push(format!("${c:.4}"));
    }
    parts.join(" · ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use akbench_core::trajectory::{from_claude_code, from_scripted};

    fn stream(steps: usize, output: &str) -> String {
        let mut s = String::from(
            "{\"type\":\"system\",\"subtype\":\"init\",\"model\":\"m\",\"claude_code_version\":\"2.0\"}\n",
        );
        for i in 0..steps {
            let _ = writeln!(
                s,
                "{{\"type\":\"assistant\",\"message\":{{\"id\":\"msg{i}\",\"model\":\"m\",\"content\":[{{\"type\":\"text\",\"text\":\"step {i} <b>\"}},{{\"type\":\"tool_use\",\"id\":\"t{i}\",\"name\":\"Bash\",\"input\":{{\"command\":\"echo {i}\"}}}}],\"usage\":{{\"input_tokens\":10,\"cache_read_input_tokens\":5,\"output_tokens\":3}}}}}}"
            );
            let _ = writeln!(
                s,
                "{{\"type\":\"user\",\"message\":{{\"content\":[{{\"type\":\"tool_result\",\"tool_use_id\":\"t{i}\",\"content\":{}}}]}}}}",
                serde_json::to_string(output).unwrap()
            );
        }
        s
    }

    #[test]
    fn every_step_call_and_output_is_shown_and_escaped() {
        let t = from_claude_code(&stream(3, "<script>alert(1)</script>"), Some("fix <it>"));
        let mut b = String::new();
        render(&mut b, &t, false);
        assert_eq!(b.matches("<li class=\"step").count(), 4);
        assert_eq!(b.matches("<div class=\"call\">").count(), 3);
        assert!(b.contains("fix &lt;it&gt;"));
        assert!(b.contains("step 2 &lt;b&gt;"));
        assert!(b.contains("echo 2"));
        assert!(b.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
        assert!(!b.contains("<script>"));
        assert!(b.contains("15 in (5 cached) · 3 out"));
        assert!(!b.contains("<details"), "short texts are not folded");
    }

    /// Each of the seven CLI agents' captured output (a real run against the scripted
    /// provider, core/tests/fixtures/agents) becomes a transcript that shows its every
    /// step's tool calls by name and its final answer.
    #[test]
    fn every_cli_agents_transcript_is_shown() {
        let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../core/tests/fixtures/agents");
        for adapter in [
            "claude-code",
            "codex",
            "gemini-cli",
            "qwen-code",
            "opencode",
            "mini-swe-agent",
            "aider",
        ] {
            let stdout =
                std::fs::read_to_string(fixtures.join(adapter).join("captured_solved.jsonl"))
                    .unwrap_or_else(|e| panic!("{adapter}: {e}"));
            let t = trajectory::convert(adapter, &stdout, Some("fix it"), None);
            let mut html = String::new();
            render(&mut html, &t, false);
            let calls: Vec<&str> = t
                .steps
                .iter()
                .flat_map(|s| s.tool_calls.iter().flatten())
                .map(|c| c.function_name.as_str())
                .collect();
            assert!(!calls.is_empty(), "{adapter}: no tool call in {t:?}");
            for name in calls {
                assert!(html.contains(&esc(name)), "{adapter}: {name} not shown");
            }
            let last = t
                .steps
                .iter()
                .rev()
                .find(|s| s.source == Source::Agent && !s.message.trim().is_empty())
                .unwrap_or_else(|| panic!("{adapter}: no agent message"));
            let head: String = last.message.chars().take(30).collect();
            assert!(
                html.contains(&esc(&head)),
                "{adapter}: final answer not shown: {head}"
            );
            assert!(
                html.contains(&format!("{} steps", t.steps.len())),
                "{adapter}"
            );
        }
    }

    #[test]
    fn long_outputs_are_folded_and_cut() {
        let long = "line\n".repeat(10_000);
        let t = from_claude_code(&stream(1, &long), None);
        let mut b = String::new();
        render(&mut b, &t, true);
        assert!(b.contains("<details class=\"out\"><summary>output (10000 lines, 50000 bytes)"));
        assert!(b.contains("more bytes not shown"));
        assert!(b.contains("converted from the agent's stdout"));
        assert!(b.len() < 2 * TEXT_CAP + 4096, "{}", b.len());
    }

    #[test]
    fn a_thousand_steps_render_in_one_pass() {
        let t = from_claude_code(&stream(1000, "ok"), Some("go"));
        assert_eq!(t.steps.len(), 1001);
        let mut b = String::new();
        render(&mut b, &t, false);
        assert_eq!(b.matches("<li class=\"step").count(), 1001);
        assert!(b.contains("id=\"step-1001\""));
    }

    #[test]
    fn steps_show_the_time_since_the_previous_one() {
        let text = "{\"type\":\"assistant\",\"timestamp\":\"2026-11-30T21:20:27.000Z\",\"message\":{\"id\":\"a\",\"content\":[{\"type\":\"text\",\"text\":\"one\"}]}}\n\
                    {\"type\":\"assistant\",\"timestamp\":\"2026-11-30T21:20:29.500Z\",\"message\":{\"id\":\"b\",\"content\":[{\"type\":\"text\",\"text\":\"two\"}]}}\n";
        let t = from_claude_code(text, Some("go"));
        let mut b = String::new();
        render(&mut b, &t, false);
        assert_eq!(b.matches("class=\"dt\"").count(), 1, "{b}");
        assert!(b.contains("+2.5s"), "{b}");
    }

    #[test]
    fn arguments_read_as_written() {
        let args = |v: serde_json::Value| arguments(v.as_object().unwrap());
        use serde_json::json;
        assert_eq!(
            args(json!({"command": "ls -l", "description": "list"})),
            "ls -l"
        );
        assert_eq!(
            args(json!({"file_path": "a.py", "new_string": "x\ny"})),
            "file_path: a.py\nnew_string:\nx\ny"
        );
        assert_eq!(args(json!({"n": 1})), "{\n  \"n\": 1\n}");
    }

    #[test]
    fn a_scripted_agent_shows_its_output() {
        let t = from_scripted("command", "done & dusted", Some("task"));
        let mut b = String::new();
        render(&mut b, &t, false);
        assert!(b.contains("done &amp; dusted"));
    }
}
