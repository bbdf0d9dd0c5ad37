//! The compare page: two runs picked by the user, shown as `akbench run compare` shows them
//! (rates with Wilson intervals, the paired difference with its bootstrap interval, the exact
//! McNemar test, every flip with links into both trials, every trial left unpaired).
//!
//! This module owns the page's query ([`CompareQuery`]), what a source answers
//! ([`Compared`]), the comparison of two runs' trial rows for sources that have no more than
//! rows ([`of_views`], a coordinator), and the HTML ([`page`]). The statistics are never
//! computed here: every source calls `akbench_core::compare::compare`, the function behind
//! `run compare`; the folder source (`akbench view DIR`) goes through `run compare`'s own
//! loading and condition check.

use crate::html::{badge, esc, page as frame, pct, url, url_path};
use crate::model::{RunList, RunView};
use akbench_core::accounting::{Bucket, ALL_BUCKETS};
use akbench_core::compare::stats::Interval;
use akbench_core::compare::{
    compare, AgentPairing, CompareTrial, Comparison, Flip, Options, SideRates,
};
use serde::Deserialize;
use std::fmt::Write as _;

/// `/compare?left=RUN&right=RUN[&left_agent=..&right_agent=..][&allow_different=1]`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct CompareQuery {
    /// The left run's key.
    #[serde(default)]
    pub left: Option<String>,
    /// The right run's key.
    #[serde(default)]
    pub right: Option<String>,
    /// The left agent label to compare (with `right_agent`).
    #[serde(default)]
    pub left_agent: Option<String>,
    /// The right agent label to compare (with `left_agent`).
    #[serde(default)]
    pub right_agent: Option<String>,
    /// Compare even when the task releases or the evaluation differ (`1`).
    #[serde(default)]
    pub allow_different: Option<String>,
}

fn given(s: &Option<String>) -> Option<&str> {
    s.as_deref().map(str::trim).filter(|s| !s.is_empty())
}

impl CompareQuery {
    /// Both run keys, when both were given.
    pub fn runs(&self) -> Option<(&str, &str)> {
        Some((given(&self.left)?, given(&self.right)?))
    }

    /// The agent pairing asked for (both labels named, else the shared labels).
    pub fn pairing(&self) -> AgentPairing {
        match (given(&self.left_agent), given(&self.right_agent)) {
            (Some(l), Some(r)) => AgentPairing::Named {
                left: l.into(),
                right: r.into(),
            },
            _ => AgentPairing::Shared,
        }
    }

    /// The named agents, when both were given.
    pub fn agents(&self) -> (Option<&str>, Option<&str>) {
        (given(&self.left_agent), given(&self.right_agent))
    }

    /// Whether differing conditions were allowed.
    pub fn allowed(&self) -> bool {
        given(&self.allow_different).is_some()
    }
}

/// How the runs' conditions (task releases, evaluation) were checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Conditions {
    /// `spec` or `records`.
    pub by: String,
    /// Every difference, in words.
    pub changes: Vec<String>,
    /// How many of them make the runs incomparable.
    pub blocking: usize,
}

/// A comparison made.
#[derive(Debug, Clone, PartialEq)]
pub struct CompareDoc {
    /// Left run key.
    pub left: String,
    /// Right run key.
    pub right: String,
    /// The condition check; `None` when the source cannot make it (trial rows only).
    pub conditions: Option<Conditions>,
    /// The comparison (`akbench_core::compare::compare`).
    pub comparison: Comparison,
}

/// What a source answers to a compare query.
#[derive(Debug, Clone, PartialEq)]
pub enum Compared {
    /// The comparison.
    Done(Box<CompareDoc>),
    /// A run that the source does not have.
    UnknownRun {
        /// `left` or `right`.
        side: &'static str,
        /// The key asked for.
        run: String,
    },
    /// Refused, and why (what `run compare` would refuse with exit 2).
    Refused(String),
}

/// `<run>/<task>/<agent>/r<n>` -> n.
fn repetition(key: &str) -> Option<u32> {
    key.rsplit('/').next()?.strip_prefix('r')?.parse().ok()
}

fn trials(v: &RunView) -> Result<Vec<CompareTrial>, String> {
    v.trials
        .iter()
        .map(|t| {
            let bucket = ALL_BUCKETS
                .iter()
                .copied()
                .find(|b| b.as_str() == t.bucket)
                .unwrap_or(Bucket::Missing);
            let repetition = repetition(&t.key).ok_or_else(|| {
                format!(
                    "failed to compare: trial key `{}` does not end in r<n>; fix: compare runs written by akbench",
                    t.key
                )
            })?;
            Ok(CompareTrial {
                key: t.key.clone(),
                task: t.task.clone(),
                agent: t.agent.clone(),
                repetition,
                bucket,
            })
        })
        .collect()
}

/// Compares two runs from their done trials' rows (a coordinator source: planned trials
/// without an outcome are not listed, and the conditions are not checked; `akbench run
/// compare --coordinator` checks them).
pub fn of_views(left: &RunView, right: &RunView, q: &CompareQuery) -> Compared {
    let (l, r) = match (trials(left), trials(right)) {
        (Ok(l), Ok(r)) => (l, r),
        (Err(e), _) | (_, Err(e)) => return Compared::Refused(e),
    };
    match compare(&l, &r, &q.pairing(), Options::default()) {
        Ok(c) => Compared::Done(Box::new(CompareDoc {
            left: left.key.clone(),
            right: right.key.clone(),
            conditions: None,
            comparison: c,
        })),
        Err(e) => Compared::Refused(e.to_string()),
    }
}

/// The form that picks two runs (and optionally one agent of each); also on the runs list.
pub fn picker(b: &mut String, list: &RunList, q: &CompareQuery) {
    let select = |name: &str, chosen: Option<&str>| {
        let mut s = format!(
            "<select name=\"{name}\" id=\"pick-{name}\"><option value=\"\">pick a run</option>"
        );
        for r in &list.runs {
            let _ = write!(
                s,
                "<option value=\"{k}\"{sel}>{k}</option>",
                k = esc(&r.key),
                sel = if chosen == Some(r.key.as_str()) {
                    " selected"
                } else {
                    ""
                }
            );
        }
        s.push_str("</select>");
        s
    };
    let (la, ra) = q.agents();
    let _ = write!(
        b,
        "<form class=\"filters compare-form\" method=\"get\" action=\"/compare\">\
         <label>left {l}</label><label>right {r}</label>\
         <input name=\"left_agent\" placeholder=\"left agent (optional)\" value=\"{la}\">\
         <input name=\"right_agent\" placeholder=\"right agent (optional)\" value=\"{ra}\">\
         <label><input type=\"checkbox\" name=\"allow_different\" value=\"1\"{ad}> allow different tasks or evaluation</label>\
         <button type=\"submit\">compare</button></form>",
        l = select("left", given(&q.left)),
        r = select("right", given(&q.right)),
        la = esc(la.unwrap_or("")),
        ra = esc(ra.unwrap_or("")),
        ad = if q.allowed() { " checked" } else { "" },
    );
}

fn interval(i: Option<Interval>) -> String {
    i.map(|i| format!(" [{}, {}]", pct(Some(i.low)), pct(Some(i.high))))
        .unwrap_or_default()
}

fn rates(s: &SideRates) -> (String, String) {
    let over = s.rates.graded + s.counts.agent_failed + s.counts.timed_out;
    (
        format!(
            "{}{} ({}/{over})",
            pct(s.rates.solve_rate),
            interval(s.solve_interval),
            s.counts.succeeded
        ),
        format!(
            "{}{} ({}/{})",
            pct(s.rates.pass_rate),
            interval(s.pass_interval),
            s.counts.succeeded,
            s.rates.graded
        ),
    )
}

fn points(x: f64) -> String {
    format!("{:+.1}", x * 100.0)
}

/// `agent: solved` or `agent: not solved`.
fn verdict(agent: &str, solved: bool) -> String {
    format!("{agent}: {}", if solved { "solved" } else { "not solved" })
}

/// A link to a trial's page (`class` on the link, e.g. a bucket's badge).
fn trial_link(key: &str, label: &str, class: &str) -> String {
    format!(
        "<a class=\"{class}\" href=\"/trials/{}\">{}</a>",
        url_path(key),
        esc(label)
    )
}

fn result(b: &mut String, d: &CompareDoc) {
    let c = &d.comparison;
    let run = |k: &str| format!("<a href=\"/runs/{}\"><code>{}</code></a>", url(k), esc(k));
    let agents: Vec<String> = c
        .pairing
        .iter()
        .map(|(l, r)| format!("{} → {}", esc(l), esc(r)))
        .collect();
    let _ = write!(
        b,
        "<p id=\"compared\" data-left=\"{lk}\" data-right=\"{rk}\">left {l}, right {r}; agents {a}.</p>",
        lk = esc(&d.left),
        rk = esc(&d.right),
        l = run(&d.left),
        r = run(&d.right),
        a = agents.join(", ")
    );
    match &d.conditions {
        Some(k) if k.changes.is_empty() => {
            let _ = write!(
                b,
                "<p id=\"conditions\">Conditions identical (checked from the {}).</p>",
                esc(&k.by)
            );
        }
        Some(k) => {
            // Folded unless they make the runs incomparable (then compared anyway).
            let _ = write!(
                b,
                "<div id=\"conditions\" class=\"{cls}\"><details{open}><summary>Conditions differ (checked from the {by}): \
                 {n} differences, {what}</summary><ul>",
                cls = if k.blocking > 0 { "refused" } else { "note" },
                open = if k.blocking > 0 { " open" } else { "" },
                by = esc(&k.by),
                n = k.changes.len(),
                what = if k.blocking > 0 {
                    "some in the tasks or the evaluation; compared anyway, so a difference may come from the tasks or the grading, not the agents"
                } else {
                    "none in the tasks or the evaluation"
                }
            );
            for ch in &k.changes {
                let _ = write!(b, "<li><code>{}</code></li>", esc(ch));
            }
            b.push_str("</ul></details></div>");
        }
        None => b.push_str(
            "<p id=\"conditions\" class=\"note\">Conditions not checked here (this source has \
             only the trials' rows); <code>akbench run compare</code> checks them.</p>",
        ),
    }
    b.push_str(
        "<h2>Rates</h2><table class=\"list\" id=\"compare-rates\"><thead><tr><th></th>\
         <th>left</th><th>right</th></tr></thead><tbody>",
    );
    let (ls, lp) = rates(&c.left.total);
    let (rs, rp) = rates(&c.right.total);
    let _ = write!(b, "<tr><td>solve rate</td><td>{ls}</td><td>{rs}</td></tr><tr><td>pass rate</td><td>{lp}</td><td>{rp}</td></tr>");
    if c.pairing.len() > 1 {
        for (l, r) in &c.pairing {
            if let (Some(x), Some(y)) = (c.left.by_agent.get(l), c.right.by_agent.get(r)) {
                let _ = write!(
                    b,
                    "<tr><td>solve rate, {}</td><td>{}</td><td>{}</td></tr>",
                    esc(l),
                    rates(x).0,
                    rates(y).0
                );
            }
        }
    }
    b.push_str("</tbody></table>");
    let p = &c.paired;
    let diff = match (p.difference, p.bootstrap) {
        (Some(d), Some(bs)) => format!(
            "<b>{} points</b> (right − left; {} → {}), 95% paired bootstrap [{}, {}] ({} resamples, seed {})",
            points(d),
            pct(p.left_rate),
            pct(p.right_rate),
            points(bs.interval.low),
            points(bs.interval.high),
            bs.resamples,
            bs.seed
        ),
        (Some(d), None) => format!("<b>{} points</b> (right − left)", points(d)),
        _ => "n/a (no pairs)".into(),
    };
    let _ = write!(
        b,
        "<h2>Paired</h2><dl class=\"facts\" id=\"paired\" data-pairs=\"{n}\" data-lost=\"{lost}\" data-gained=\"{gained}\">\
         <dt>pairs</dt><dd>{n}: solved by both {both}, by neither {neither}, lost {lost}, gained {gained}</dd>\
         <dt>difference</dt><dd id=\"difference\">{diff}</dd>\
         <dt>McNemar</dt><dd id=\"mcnemar\">exact two-sided p = {mp:.4} over {disc} discordant pairs</dd></dl>",
        n = p.pairs,
        both = p.both_solved,
        neither = p.neither_solved,
        lost = p.lost,
        gained = p.gained,
        mp = p.mcnemar_p,
        disc = p.lost + p.gained,
    );
    let _ = write!(b, "<h2>Flips ({})</h2>", c.flips.len());
    if c.flips.is_empty() {
        b.push_str("<p class=\"empty\">No pair changed its verdict.</p>");
    } else {
        b.push_str(
            "<table class=\"list\" id=\"flips\"><thead><tr><th>flip</th><th>task</th>\
             <th>repetition</th><th>left trial</th><th>right trial</th></tr></thead><tbody>",
        );
        for f in &c.flips {
            let (dir, cls) = match f.direction {
                Flip::Lost => ("solved → failed", "b-failed"),
                Flip::Gained => ("failed → solved", "b-succeeded"),
            };
            let q = &f.pair;
            let _ = write!(
                b,
                "<tr class=\"flip\" data-direction=\"{d}\"><td><span class=\"badge {cls}\">{dir}</span></td>\
                 <td>{t}</td><td>r{rep}</td><td>{l}</td><td>{r}</td></tr>",
                d = if f.direction == Flip::Lost { "lost" } else { "gained" },
                t = esc(&q.task),
                rep = q.repetition,
                l = trial_link(&q.left_key, &verdict(&q.left_agent, q.left_solved), "trial-link"),
                r = trial_link(&q.right_key, &verdict(&q.right_agent, q.right_solved), "trial-link"),
            );
        }
        b.push_str("</tbody></table>");
    }
    if !c.unpaired.is_empty() {
        let _ = write!(
            b,
            "<h2>Not paired ({})</h2><p class=\"note\">Excluded from the paired statistics, never counted as failures.</p>\
             <table class=\"list\" id=\"unpaired\"><thead><tr><th>why</th><th>task</th><th>repetition</th>\
             <th>left</th><th>right</th></tr></thead><tbody>",
            c.unpaired.len()
        );
        for u in &c.unpaired {
            let side = |key: &Option<String>, bucket: Option<Bucket>| match (key, bucket) {
                (Some(k), Some(bk)) => {
                    trial_link(k, bk.as_str(), &format!("badge b-{}", bk.as_str()))
                }
                _ => badge("none"),
            };
            let _ = write!(
                b,
                "<tr><td>{}</td><td>{}</td><td>r{}</td><td>{}</td><td>{}</td></tr>",
                esc(&u.reason),
                esc(&u.task),
                u.repetition,
                side(&u.left_key, u.left),
                side(&u.right_key, u.right),
            );
        }
        b.push_str("</tbody></table>");
    }
}

/// The compare page: the picker, then the comparison or why there is none.
pub fn page(list: &RunList, q: &CompareQuery, outcome: Option<&Compared>) -> String {
    let mut b = String::from("<h1>Compare runs</h1>");
    picker(&mut b, list, q);
    match outcome {
        None if q.runs().is_none() && (given(&q.left).is_some() || given(&q.right).is_some()) => {
            b.push_str("<p class=\"refused\" id=\"compare-error\">Pick two runs: a left one and a right one.</p>");
        }
        None => b.push_str(
            "<p class=\"note\">Pick two runs of the same tasks: trials are paired by task, \
             agent and repetition, as <code>akbench run compare</code> pairs them.</p>",
        ),
        Some(Compared::UnknownRun { side, run }) => {
            let _ = write!(
                b,
                "<p class=\"refused\" id=\"compare-error\">failed to compare: no run `{}` (the {side} run) in this viewer; fix: pick one of the listed runs.</p>",
                esc(run)
            );
        }
        Some(Compared::Refused(why)) => {
            let _ = write!(
                b,
                "<pre class=\"refused\" id=\"compare-error\">{}</pre>\
                 <p class=\"note\">On this page: the agent fields name the pair to compare; \
                 the check box compares runs whose tasks or evaluation differ.</p>",
                esc(why)
            );
        }
        Some(Compared::Done(d)) => result(&mut b, d),
    }
    frame("compare", &[("/compare".into(), "compare".into())], &b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repetitions_come_from_the_key() {
        let cases = [
            ("run/task/agent/r1", Some(1)),
            ("run/task/agent/r12", Some(12)),
            ("run/task/agent/1", None),
            ("run/task/agent/rx", None),
            ("", None),
        ];
        for (key, want) in cases {
            assert_eq!(repetition(key), want, "{key}");
        }
    }

    fn view(run: &str, rows: &[(&str, &str, &'static str)]) -> RunView {
        use crate::model::{CompactTrial, TrialRow};
        let rows = rows
            .iter()
            .map(|(task, agent, bucket)| {
                TrialRow::compact(CompactTrial {
                    run: run.into(),
                    key: format!("{run}/{task}/{agent}/r1"),
                    agent: (*agent).into(),
                    bucket,
                    state: akbench_core::lifecycle::State::Completed,
                    cause: None,
                    attempts: 1,
                    score: None,
                    spend: Default::default(),
                    duration_ms: 0,
                    grading: Default::default(),
                    ordinal: 0,
                })
            })
            .collect();
        RunView::build(run.into(), rows, None)
    }

    #[test]
    fn trial_rows_compare_as_core_compares_their_trials() {
        let left = view(
            "l",
            &[
                ("t1", "a", "succeeded"),
                ("t2", "a", "failed"),
                ("t3", "a", "infrastructure_error"),
                ("t4", "a", "succeeded"),
            ],
        );
        let right = view(
            "r",
            &[
                ("t1", "a", "failed"),
                ("t2", "a", "succeeded"),
                ("t3", "a", "succeeded"),
                ("t4", "a", "succeeded"),
            ],
        );
        let q = CompareQuery::default();
        let Compared::Done(d) = of_views(&left, &right, &q) else {
            panic!("refused")
        };
        let want = compare(
            &trials(&left).unwrap(),
            &trials(&right).unwrap(),
            &AgentPairing::Shared,
            Options::default(),
        )
        .unwrap();
        assert_eq!(d.comparison, want);
        assert_eq!((want.paired.lost, want.paired.gained), (1, 1));
        assert_eq!(
            want.unpaired.len(),
            1,
            "the infrastructure error is unpaired"
        );
        assert_eq!(d.conditions, None, "rows cannot check the conditions");
        // Agents that cannot be paired are refused with core's message.
        let other = view("r", &[("t1", "b", "failed")]);
        let two = view("l", &[("t1", "a", "failed"), ("t1", "c", "failed")]);
        match of_views(&two, &other, &q) {
            Compared::Refused(why) => assert!(why.contains("different agents"), "{why}"),
            x => panic!("{x:?}"),
        }
        // A key without a repetition is refused, not guessed.
        let mut bad = view("l", &[("t1", "a", "failed")]);
        bad.trials[0].key = "l/t1/a".into();
        assert!(matches!(of_views(&bad, &right, &q), Compared::Refused(_)));
    }

    #[test]
    fn queries_name_runs_and_agents_only_when_given() {
        let q = |l: &str, r: &str, la: &str, ra: &str| CompareQuery {
            left: Some(l.into()),
            right: Some(r.into()),
            left_agent: Some(la.into()),
            right_agent: Some(ra.into()),
            allow_different: None,
        };
        assert_eq!(q("a", "b", "", "").runs(), Some(("a", "b")));
        assert_eq!(q("a", " ", "", "").runs(), None);
        assert_eq!(q("a", "b", "x", "").pairing(), AgentPairing::Shared);
        assert_eq!(
            q("a", "b", "x", "y").pairing(),
            AgentPairing::Named {
                left: "x".into(),
                right: "y".into()
            }
        );
        assert!(!CompareQuery::default().allowed());
    }
}
