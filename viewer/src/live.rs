//! A run's live status on a coordinator, as the run page shows it while the run runs: state,
//! queued / running / finished, connected workers, throughput, the ETA and the provider routes
//! paused right now (with when they resume).
//!
//! The ETA is the coordinator's (remaining trials at the throughput measured over its recent
//! window); this module only words it. Until a throughput is measurable it reads "n/a" with
//! the reason, never a made-up number.

use super::html::esc;
use chrono::{DateTime, Utc};
use serde::Serialize;
use std::fmt::Write as _;

/// A provider route that gets no new work for now.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PausedRoute {
    /// The route.
    pub route: String,
    /// Provider failures in a row.
    pub consecutive_failures: u32,
    /// No new claims before this instant.
    pub paused_until: DateTime<Utc>,
    /// The last failure's cause.
    pub last_error: String,
}

/// A run's live status (from the coordinator's progress projection).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Live {
    /// `planned`, `running`, `cancelling`, `cancelled` or `finished`.
    pub state: String,
    /// Planned trials.
    pub planned: u64,
    /// Trials waiting for a worker.
    pub queued: u64,
    /// Trials with a live lease.
    pub running: u64,
    /// Trials done.
    pub finished: u64,
    /// Workers seen recently.
    pub workers: u32,
    /// Trials finished per minute over the recent window; `None` when none finished in it.
    pub throughput_per_minute: Option<f64>,
    /// When the remaining trials should be done at that throughput.
    pub eta: Option<DateTime<Utc>>,
    /// When the status was taken (the database's clock).
    pub as_of: DateTime<Utc>,
    /// Provider routes paused now.
    pub paused_routes: Vec<PausedRoute>,
}

impl Live {
    /// The ETA in words: "in 3m12s (12:30:05 UTC)", or "n/a (why)"; never a guess.
    pub fn eta_text(&self) -> String {
        match (self.state.as_str(), self.eta) {
            ("finished" | "cancelled", _) => format!("none: the run is {}", self.state),
            (_, Some(at)) => format!(
                "in {} ({} UTC)",
                within((at - self.as_of).num_milliseconds()),
                at.format("%H:%M:%S")
            ),
            ("running", None) if self.throughput_per_minute.is_none() => {
                "n/a (no trial finished recently: nothing to measure a rate from)".into()
            }
            (state, None) => format!("n/a (the run is {state})"),
        }
    }

    /// Throughput in words.
    pub fn throughput_text(&self) -> String {
        self.throughput_per_minute
            .map(|t| format!("{t:.1} trials/min"))
            .unwrap_or_else(|| "n/a".into())
    }

    /// The live section of the run page (ids that `app.js` updates in place).
    pub fn html(&self) -> String {
        let mut b = format!(
            "<section class=\"live-status\" id=\"live-status\"><dl class=\"facts\">\
             <dt>state</dt><dd id=\"live-state\">{st}</dd>\
             <dt>trials</dt><dd id=\"live-counts\">{counts}</dd>\
             <dt>workers</dt><dd id=\"live-workers\">{w} connected</dd>\
             <dt>throughput</dt><dd id=\"live-throughput\">{tp}</dd>\
             <dt>ETA</dt><dd id=\"live-eta\">{eta}</dd></dl>",
            st = esc(&self.state),
            counts = esc(&self.counts_text()),
            w = self.workers,
            tp = esc(&self.throughput_text()),
            eta = esc(&self.eta_text()),
        );
        b.push_str("<div id=\"live-routes\">");
        b.push_str(&self.routes_html());
        b.push_str("</div></section>");
        b
    }

    /// "3 queued, 2 running, 5 of 10 finished".
    pub fn counts_text(&self) -> String {
        format!(
            "{} queued, {} running, {} of {} finished",
            self.queued, self.running, self.finished, self.planned
        )
    }

    /// The paused provider routes as a table (empty when none is paused).
    pub fn routes_html(&self) -> String {
        if self.paused_routes.is_empty() {
            return "<p class=\"note\">No provider route is paused.</p>".into();
        }
        let mut b = String::from(
            "<h3>Paused provider routes</h3><table class=\"list\" id=\"paused-routes\"><thead><tr>\
             <th>route</th><th>resumes</th><th>failures in a row</th><th>last error</th></tr></thead><tbody>",
        );
        for p in &self.paused_routes {
            let _ = write!(
                b,
                "<tr><td><code>{}</code></td><td>{} UTC (in {})</td><td>{}</td><td>{}</td></tr>",
                esc(&p.route),
                p.paused_until.format("%H:%M:%S"),
                within((p.paused_until - self.as_of).num_milliseconds()),
                p.consecutive_failures,
                esc(&p.last_error)
            );
        }
        b.push_str("</tbody></table>");
        b
    }
}

/// A duration in words: "4s", "3m12s", "2h05m".
pub fn within(ms: i64) -> String {
    let left = ms.max(0) / 1000;
    let (h, m, s) = (left / 3600, left / 60 % 60, left % 60);
    if h > 0 {
        format!("{h}h{m:02}m")
    } else if m > 0 {
        format!("{m}m{s:02}s")
    } else {
        format!("{s}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn live(state: &str, tp: Option<f64>, eta_s: Option<i64>) -> Live {
        let as_of = DateTime::<Utc>::from_timestamp(1_800_000_000, 0).unwrap();
        Live {
            state: state.into(),
            planned: 10,
            queued: 4,
            running: 2,
            finished: 4,
            workers: 2,
            throughput_per_minute: tp,
            eta: eta_s.map(|s| as_of + chrono::Duration::seconds(s)),
            as_of,
            paused_routes: Vec::new(),
        }
    }

    #[test]
    fn the_eta_is_worded_and_never_made_up() {
        let cases = [
            (
                live("running", Some(2.0), Some(192)),
                "in 3m12s (08:03:12 UTC)",
            ),
            (
                live("running", Some(2.0), Some(7500)),
                "in 2h05m (10:05:00 UTC)",
            ),
            (
                live("running", None, None),
                "n/a (no trial finished recently: nothing to measure a rate from)",
            ),
            (live("planned", None, None), "n/a (the run is planned)"),
            (
                live("cancelling", Some(1.0), None),
                "n/a (the run is cancelling)",
            ),
            (
                live("finished", Some(3.0), None),
                "none: the run is finished",
            ),
        ];
        for (l, want) in cases {
            assert_eq!(l.eta_text(), want, "{l:?}");
        }
    }

    #[test]
    fn paused_routes_show_when_they_resume() {
        let mut l = live("running", None, None);
        assert!(l.html().contains("No provider route is paused"));
        l.paused_routes.push(PausedRoute {
            route: "anthropic<x>".into(),
            consecutive_failures: 3,
            paused_until: l.as_of + chrono::Duration::seconds(90),
            last_error: "529 overloaded".into(),
        });
        let h = l.html();
        assert!(h.contains("anthropic&lt;x&gt;"), "{h}");
        assert!(h.contains("08:01:30 UTC (in 1m30s)"), "{h}");
        assert!(h.contains("529 overloaded"), "{h}");
    }
}
