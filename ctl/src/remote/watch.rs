//! How `akbench run status --watch` shows each status update: on a terminal, a progress bar
//! per agent (indicatif) under a line of run facts (state, workers, throughput, ETA) and the
//! latest failures with their cause; otherwise one plain line per update plus a line for each
//! failure not shown before; with `--json`, one JSON document per update (unchanged).

use super::state_name;
use super::view::{self, time};
use akbench_core::rates::Pct;
use akbench_proto::v1 as pb;
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::collections::{BTreeMap, HashSet};
use std::io::Write;

/// "KEY failed: the tests failed" / "KEY agent_failed: the agent exited with code 3".
pub fn failure_text(f: &pb::RecentFailure) -> String {
    let cause = f.cause.lines().next().unwrap_or("").trim();
    let cause = if cause.is_empty() {
        if f.bucket == "failed" {
            "graded: the tests failed"
        } else {
            "no cause recorded"
        }
    } else {
        cause
    };
    let cause: String = cause.chars().take(160).collect();
    format!("{} {}: {cause}", f.trial, f.bucket)
}

/// The failures of `s` not in `seen` (oldest first), added to `seen`.
pub fn new_failures<'a>(
    seen: &mut HashSet<String>,
    s: &'a pb::RunStatus,
) -> Vec<&'a pb::RecentFailure> {
    let mut out: Vec<_> = s
        .recent_failures
        .iter()
        .filter(|f| seen.insert(f.trial.clone()))
        .collect();
    out.reverse();
    out
}

/// The line of run facts above the bars.
pub fn facts(s: &pb::RunStatus) -> String {
    let run = s.run.clone().unwrap_or_default();
    let r = s.rates.unwrap_or_default();
    let mut line = format!(
        "{} {}: {}/{} finished, {} queued, {}; workers {}; pass rate {} ({} graded){}; eta {}",
        run.run_key,
        state_name(run.state),
        s.finished,
        s.planned,
        s.queued,
        view::running(s, ", "),
        s.workers,
        Pct(r.pass_rate),
        r.graded,
        view::flagged_suffix(s.flagged.as_ref()),
        view::eta(s),
    );
    for p in &s.paused_routes {
        line.push_str(&format!(
            "; provider route {} paused until {}",
            p.route,
            time(p.paused_until_unix_ms)
        ));
    }
    line
}

/// Done trials of an agent (every bucket but `missing`).
fn agent_done(a: &pb::AgentStatus) -> u64 {
    a.outcomes
        .iter()
        .filter(|c| c.state != "missing")
        .map(|c| c.count)
        .sum()
}

/// The terminal view: bars that indicatif redraws in place.
#[derive(Debug)]
pub struct Bars {
    multi: MultiProgress,
    facts: ProgressBar,
    agents: BTreeMap<String, ProgressBar>,
    failures: Vec<ProgressBar>,
}

fn text_bar(multi: &MultiProgress) -> ProgressBar {
    let b = multi.add(ProgressBar::new(0));
    b.set_style(ProgressStyle::with_template("{msg}").expect("a valid template"));
    b
}

impl Bars {
    /// Bars drawn on stdout.
    pub fn new() -> Bars {
        let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stdout());
        let facts = text_bar(&multi);
        Bars {
            multi,
            facts,
            agents: BTreeMap::new(),
            failures: Vec::new(),
        }
    }

    /// Shows `s`.
    pub fn show(&mut self, s: &pb::RunStatus) {
        self.facts.set_message(facts(s));
        let width = s.agents.iter().map(|a| a.agent.len()).max().unwrap_or(5);
        let style = ProgressStyle::with_template(&format!(
            "{{prefix:>{width}}} [{{bar:40.cyan/blue}}] {{pos}}/{{len}} {{msg}}"
        ))
        .expect("a valid template")
        .progress_chars("=> ");
        for a in &s.agents {
            let bar = self.agents.entry(a.agent.clone()).or_insert_with(|| {
                // Agent bars go above the failures.
                let b = match self.failures.first() {
                    Some(f) => self.multi.insert_before(f, ProgressBar::new(0)),
                    None => self.multi.add(ProgressBar::new(0)),
                };
                b.set_style(style.clone());
                b.set_prefix(a.agent.clone());
                b
            });
            let r = a.rates.unwrap_or_default();
            bar.set_length(a.planned);
            bar.set_position(agent_done(a));
            bar.set_message(format!(
                "pass rate {} ({} graded){}",
                Pct(r.pass_rate),
                r.graded,
                view::flagged_suffix(a.flagged.as_ref())
            ));
        }
        let lines: Vec<String> = s.recent_failures.iter().map(failure_text).collect();
        if !lines.is_empty() && self.failures.is_empty() {
            let head = text_bar(&self.multi);
            head.set_message("latest failures:");
            self.failures.push(head);
        }
        while self.failures.len() < lines.len() + 1 && !lines.is_empty() {
            self.failures.push(text_bar(&self.multi));
        }
        for (bar, line) in self.failures.iter().skip(1).zip(&lines) {
            bar.set_message(format!("  {line}"));
        }
    }

    /// Prints `message` above the bars.
    pub fn note(&self, message: &str) {
        let _ = self.multi.println(message);
    }

    /// Leaves the last state drawn.
    pub fn finish(&self) {
        self.facts.finish();
        for b in self.agents.values().chain(&self.failures) {
            b.finish();
        }
    }
}

impl Default for Bars {
    fn default() -> Self {
        Bars::new()
    }
}

/// One of the three outputs of a watch.
#[derive(Debug)]
pub enum Watch {
    /// One JSON document per update.
    Json,
    /// One line per update, and one per failure not shown before.
    Lines(HashSet<String>),
    /// Bars on a terminal.
    Bars(Bars),
}

impl Watch {
    /// The output for stdout: bars on a terminal, lines otherwise, JSON when asked.
    pub fn new(json: bool, tty: bool) -> Watch {
        match (json, tty) {
            (true, _) => Watch::Json,
            (false, true) => Watch::Bars(Bars::new()),
            (false, false) => Watch::Lines(HashSet::new()),
        }
    }

    /// Shows one update.
    pub fn show(&mut self, s: &pb::RunStatus) -> std::io::Result<()> {
        match self {
            Watch::Json => {
                let mut out = std::io::stdout().lock();
                writeln!(out, "{}", view::status_json(s))?;
                out.flush()
            }
            Watch::Lines(seen) => {
                let mut out = std::io::stdout().lock();
                writeln!(out, "{}", view::line(s))?;
                for f in new_failures(seen, s) {
                    writeln!(out, "failure {}", failure_text(f))?;
                }
                out.flush()
            }
            Watch::Bars(b) => {
                b.show(s);
                Ok(())
            }
        }
    }

    /// A message on stderr (above the bars on a terminal).
    pub fn note(&self, message: &str) {
        match self {
            Watch::Bars(b) => b.note(message),
            _ => eprintln!("{message}"),
        }
    }

    /// The watch is over.
    pub fn finish(&self) {
        if let Watch::Bars(b) = self {
            b.finish();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failure(trial: &str, bucket: &str, cause: &str) -> pb::RecentFailure {
        pb::RecentFailure {
            trial: trial.into(),
            bucket: bucket.into(),
            cause: cause.into(),
            at_unix_ms: 0,
        }
    }

    #[test]
    fn failures_are_worded_with_their_cause() {
        let cases = [
            (
                failure("r/t/a/r1", "failed", ""),
                "r/t/a/r1 failed: graded: the tests failed",
            ),
            (
                failure(
                    "r/t/a/r1",
                    "agent_failed",
                    "the agent exited with code 3\nstderr: x",
                ),
                "r/t/a/r1 agent_failed: the agent exited with code 3",
            ),
            (
                failure("r/t/a/r2", "infrastructure_error", ""),
                "r/t/a/r2 infrastructure_error: no cause recorded",
            ),
        ];
        for (f, want) in cases {
            assert_eq!(failure_text(&f), want);
        }
    }

    #[test]
    fn each_failure_is_printed_once_oldest_first() {
        let mut seen = HashSet::new();
        let s = pb::RunStatus {
            recent_failures: vec![failure("b", "failed", ""), failure("a", "failed", "")],
            ..Default::default()
        };
        let got: Vec<_> = new_failures(&mut seen, &s)
            .iter()
            .map(|f| f.trial.clone())
            .collect();
        assert_eq!(got, ["a", "b"]);
        let s = pb::RunStatus {
            recent_failures: vec![failure("c", "timed_out", ""), failure("b", "failed", "")],
            ..Default::default()
        };
        let got: Vec<_> = new_failures(&mut seen, &s)
            .iter()
            .map(|f| f.trial.clone())
            .collect();
        assert_eq!(got, ["c"]);
    }

    #[test]
    fn the_facts_line_carries_eta_and_paused_routes() {
        let s = pb::RunStatus {
            planned: 4,
            finished: 1,
            paused_routes: vec![pb::PausedRoute {
                route: "anthropic".into(),
                consecutive_failures: 2,
                paused_until_unix_ms: 0,
                last_error: "x".into(),
            }],
            ..Default::default()
        };
        let f = facts(&s);
        assert!(f.contains("1/4 finished") && f.contains("eta n/a"), "{f}");
        assert!(!f.contains("flagged"), "nothing flagged, nothing said: {f}");
        assert!(
            !f.contains("prefetched"),
            "nothing prefetched, nothing said: {f}"
        );
        let leased = pb::RunStatus {
            running: 2,
            prefetched: 1,
            ..s.clone()
        };
        let f = facts(&leased);
        assert!(f.contains(", 2 running, 1 prefetched;"), "{f}");
        let flagged = pb::RunStatus {
            flagged: Some(pb::Flagged {
                tampered: 2,
                withheld: 1,
                unguarded: 0,
            }),
            ..s.clone()
        };
        let f = facts(&flagged);
        assert!(
            f.contains("; flagged: grading tampered 2, withheld paths 1;"),
            "{f}"
        );
        assert!(
            view::line(&flagged).ends_with("; flagged: grading tampered 2, withheld paths 1"),
            "{}",
            view::line(&flagged)
        );
        let unguarded = pb::RunStatus {
            flagged: Some(pb::Flagged {
                tampered: 0,
                withheld: 0,
                unguarded: 3,
            }),
            ..s.clone()
        };
        assert!(
            view::line(&unguarded).ends_with(
                "; flagged: grading tampered 0, withheld paths 0, solved without tripwire 3"
            ),
            "{}",
            view::line(&unguarded)
        );
        assert!(
            f.contains("provider route anthropic paused until 1970-01-01T00:00:00.000Z"),
            "{f}"
        );
    }
}
