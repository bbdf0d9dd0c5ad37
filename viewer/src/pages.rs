//! The viewer's pages, rendered on the server from a source's runs list, a run's aggregate
//! view ([`RunView`], with its live status on a coordinator) or one trial's record (the trial
//! page). Lists are paged here; the browser only ever receives one page of trials and one
//! page of the matrix. A run too big to aggregate comes as one page of trials read alone
//! ([`TrialsPage`]): its page shows the status projection's counts and rates and pages by
//! plan ordinal (`?after=`).

use crate::html::{badge, esc, page, pct, progress_bar, url, url_path};
use crate::model::{RunList, RunView, TrialFilter, TrialRow};
use crate::source::{Artifacts, PageAt, RunPage, TrialsPage, MAX_PER_PAGE, PER_PAGE};
use akbench_core::accounting::ALL_BUCKETS;
use akbench_core::record::{resolve_inside, AttemptRecord, RunRecord};
use serde::Deserialize;
use std::fmt::Write as _;
use std::path::Path;

/// Tasks per page of the matrix.
pub const MATRIX_ROWS: usize = 100;
/// Bytes of a log or diff shown on the trial page.
pub const ARTIFACT_CAP: u64 = 256 * 1024;

/// Paging and filtering of the run page (query string).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct RunQuery {
    /// Only this agent.
    #[serde(default)]
    pub agent: Option<String>,
    /// Only this bucket.
    #[serde(default)]
    pub outcome: Option<String>,
    /// Substring of the trial key, task or cause.
    #[serde(default)]
    pub q: Option<String>,
    /// Page of the trial table (0-based).
    #[serde(default)]
    pub page: usize,
    /// Trials per page.
    #[serde(default)]
    pub per: Option<usize>,
    /// Page of the matrix (0-based).
    #[serde(default)]
    pub mpage: usize,
    /// Of a paged run: the trials after this plan ordinal.
    #[serde(default)]
    pub after: Option<u64>,
}

impl RunQuery {
    /// The trial filter of the query.
    pub fn filter(&self) -> TrialFilter {
        TrialFilter {
            agent: self.agent.clone(),
            outcome: self.outcome.clone(),
            q: self.q.clone(),
        }
    }

    /// Trials per page, capped.
    pub fn per(&self) -> usize {
        self.per.unwrap_or(PER_PAGE).clamp(1, MAX_PER_PAGE)
    }

    /// The trials page asked for, when the run is paged.
    pub fn at(&self) -> PageAt {
        PageAt {
            after: self.after,
            per: self.per(),
        }
    }
}

/// The runs list of `origin` (a folder, a coordinator).
pub fn runs(list: &RunList, origin: &str, q: &str) -> String {
    let mut b = String::from("<h1>Runs</h1>");
    let _ = write!(
        b,
        "<form class=\"filters\" method=\"get\"><input id=\"run-search\" name=\"q\" \
         placeholder=\"filter runs\" value=\"{}\" autocomplete=\"off\"></form>",
        esc(q)
    );
    b.push_str(
        "<table id=\"runs\" class=\"list\"><thead><tr><th>run</th><th>state</th><th>created</th><th>progress</th>\
         <th>agents</th><th>tasks</th><th>pass rate</th><th>solve rate</th></tr></thead><tbody>",
    );
    let ql = q.to_lowercase();
    let mut shown = 0;
    for run in &list.runs {
        if !ql.is_empty() && !run.key.to_lowercase().contains(&ql) {
            continue;
        }
        shown += 1;
        let _ = write!(
            b,
            "<tr class=\"run-row\" data-key=\"{k}\"><td><a href=\"/runs/{u}\">{k}</a></td>\
             <td class=\"state\">{st}</td><td class=\"created\">{cr}</td><td>{bar}</td><td>{a}</td><td>{t}</td><td>{p}</td><td>{s}</td></tr>",
            k = esc(&run.key),
            u = url(&run.key),
            st = esc(run.state.as_deref().unwrap_or("–")),
            cr = run
                .created
                .map(|c| c.format("%Y-%m-%d %H:%M:%S UTC").to_string())
                .unwrap_or_else(|| "–".into()),
            bar = progress_bar(run.done, run.planned),
            a = esc(&run.agents.join(", ")),
            t = run
                .tasks
                .map(|t| t.to_string())
                .unwrap_or_else(|| "–".into()),
            p = pct(run.pass_rate),
            s = pct(run.solve_rate),
        );
    }
    b.push_str("</tbody></table>");
    if shown == 0 {
        let _ = write!(
            b,
            "<p class=\"empty\">No runs{} in {}.</p>",
            if q.is_empty() { "" } else { " match" },
            esc(origin)
        );
    }
    if !list.refused.is_empty() {
        b.push_str("<h2>Refused records</h2><ul class=\"refused\">");
        for r in &list.refused {
            let _ = write!(
                b,
                "<li><code>{}</code>: {}</li>",
                esc(&r.file),
                esc(&r.reason)
            );
        }
        b.push_str("</ul>");
    }
    b.push_str("<section class=\"compare-slot\" id=\"compare\"><h2>Compare two runs</h2>");
    crate::compare::picker(&mut b, list, &crate::compare::CompareQuery::default());
    b.push_str("</section>");
    page("runs", &[], &b)
}

/// The run page (with its live status when the run is on a coordinator).
pub fn run(p: &RunPage, q: &RunQuery) -> String {
    let r: &RunView = &p.view;
    let mut b = String::new();
    let _ = write!(
        b,
        "<h1 data-run=\"{k}\">Run <code>{k}</code></h1>{bar}<p class=\"live\" id=\"live\"></p>",
        k = esc(&r.key),
        bar = progress_bar(p.progress.done, p.progress.planned)
    );
    if let Some(live) = &p.live {
        b.push_str(&live.html());
    }
    if let Some(paged) = &p.paged {
        paged_run(&mut b, p, paged, q);
        return page(
            &r.key,
            &[(format!("/runs/{}", url(&r.key)), r.key.clone())],
            &b,
        );
    }
    rates_table(&mut b, r);
    outcomes(&mut b, r);
    matrix(&mut b, r, q);
    trial_table(&mut b, r, q);
    page(
        &r.key,
        &[(format!("/runs/{}", url(&r.key)), r.key.clone())],
        &b,
    )
}

/// The body of a paged run's page: the agents' pass rates and the outcome counts of the
/// status projection (what the live updates refresh), then one page of trials in plan order
/// with links to the first and the next page.
fn paged_run(b: &mut String, p: &RunPage, t: &TrialsPage, q: &RunQuery) {
    let _ = write!(
        b,
        "<p class=\"note\" id=\"paged\">This run has {} done trials, more than the viewer \
         aggregates ({}): the page shows the coordinator's counts and rates and one page of \
         trials in plan order (no matrix, causes, cost or filters; `akbench run aggregate` over \
         its exported records has them all).</p>",
        p.progress.done, t.aggregate_max
    );
    b.push_str(
        "<h2>Agents</h2><table class=\"list\" id=\"agents\"><thead><tr><th>agent</th>\
         <th>graded</th><th>pass rate</th></tr></thead><tbody>",
    );
    for (agent, (pass, graded)) in &p.progress.agents {
        let _ = write!(
            b,
            "<tr data-agent=\"{n}\"><td>{n}</td><td class=\"graded\">{graded}</td>\
             <td class=\"pass\">{p}</td></tr>",
            n = esc(agent),
            p = pct(*pass),
        );
    }
    b.push_str("</tbody></table><h2>Outcomes</h2><div class=\"outcomes\" id=\"outcomes\">");
    for (bucket, n) in &p.progress.counts {
        let _ = write!(
            b,
            "<span class=\"outcome\">{badge} <b data-bucket=\"{s}\">{n}</b></span>",
            s = esc(bucket),
            badge = badge(bucket)
        );
    }
    let _ = write!(
        b,
        "</div><h2 id=\"trials\">Trials</h2><p class=\"count\" id=\"trial-count\">{} on this page \
         of {} done</p><table class=\"list\" id=\"trial-table\"><thead><tr><th>trial</th>\
         <th>outcome</th><th>score</th><th>attempts</th><th>time</th><th>cause</th></tr></thead><tbody>",
        t.trials.len(),
        p.progress.done
    );
    for row in &t.trials {
        trial_row(b, row);
    }
    b.push_str("</tbody></table><nav class=\"pager\" id=\"trials-pager\">");
    let per = q.per();
    if t.after.is_some() {
        let _ = write!(b, "<a href=\"?per={per}#trials\">← first</a> ");
    }
    match (t.trials.first(), t.trials.last()) {
        (Some(first), Some(last)) => {
            let _ = write!(
                b,
                "trials {}–{} of the plan",
                first.ordinal.unwrap_or_default(),
                last.ordinal.unwrap_or_default()
            );
        }
        _ => b.push_str("no more trials"),
    }
    if let Some(next) = t.next {
        let _ = write!(
            b,
            " <a href=\"?after={next}&amp;per={per}#trials\" class=\"next\">next →</a>"
        );
    }
    b.push_str("</nav>");
}

fn rates_table(b: &mut String, r: &RunView) {
    b.push_str(
        "<h2>Agents</h2><table class=\"list\" id=\"agents\"><thead><tr><th>agent</th>\
         <th>trials</th><th>solved</th><th>graded</th><th>pass rate</th><th>95% interval</th>\
         <th>solve rate</th><th>cost</th><th>tokens</th></tr></thead><tbody>",
    );
    for a in &r.rates {
        let iv = a
            .pass_interval
            .map(|i| format!("{:.1}–{:.1}%", i.low * 100.0, i.high * 100.0))
            .unwrap_or_else(|| "n/a".into());
        let _ = write!(
            b,
            "<tr data-agent=\"{n}\"><td>{n}</td><td>{t}</td><td>{s}</td><td class=\"graded\">{g}</td>\
             <td class=\"pass\">{p}{ci}</td><td>{iv}</td><td>{sr}</td><td>{c}</td><td>{tok}</td></tr>",
            n = esc(&a.agent),
            t = a.row.trials,
            s = a.row.counts.succeeded,
            g = a.row.rates.graded,
            p = pct(a.row.rates.pass_rate),
            ci = a
                .pass_interval
                .map(|i| format!(
                    "<span class=\"ci\"><span style=\"left:{:.1}%;width:{:.1}%\"></span></span>",
                    i.low * 100.0,
                    (i.high - i.low) * 100.0
                ))
                .unwrap_or_default(),
            sr = pct(a.row.rates.solve_rate),
            c = a.cost_usd.map(akbench_core::spend::fmt_cost).unwrap_or_else(|| "–".into()),
            tok = a.tokens.map(|t| t.to_string()).unwrap_or_else(|| "–".into()),
        );
    }
    b.push_str("</tbody></table>");
}

fn outcomes(b: &mut String, r: &RunView) {
    let counts = r.counts();
    b.push_str("<h2>Outcomes</h2><div class=\"outcomes\" id=\"outcomes\">");
    for bk in ALL_BUCKETS {
        let n = counts.get(bk);
        if n > 0 {
            let _ = write!(
                b,
                "<a class=\"outcome\" href=\"?outcome={s}#trials\">{badge} <b data-bucket=\"{s}\">{n}</b></a>",
                s = bk.as_str(),
                badge = badge(bk.as_str())
            );
        }
    }
    b.push_str("</div>");
    if !r.causes.is_empty() {
        b.push_str(
            "<h3>Causes (trials without a verdict)</h3><table class=\"list causes\" id=\"causes\"><tbody>",
        );
        let mut causes: Vec<_> = r.causes.iter().collect();
        causes.sort_by(|a, b| b.1.cmp(a.1));
        for (c, n) in causes.into_iter().take(20) {
            let _ = write!(b, "<tr><td>{n}</td><td><code>{}</code></td></tr>", esc(c));
        }
        b.push_str("</tbody></table>");
    }
}

fn matrix(b: &mut String, r: &RunView, q: &RunQuery) {
    let pages = r.tasks.len().div_ceil(MATRIX_ROWS).max(1);
    let mp = q.mpage.min(pages - 1);
    let _ = write!(
        b,
        "<h2>Tasks × agents</h2><p class=\"legend\"><span class=\"c-ok\">all solved</span> \
         <span class=\"c-mixed\">some solved</span> <span class=\"c-bad\">graded, none solved</span> \
         <span class=\"c-none\">no verdict</span> · <span id=\"matrix-tasks\">{} tasks</span></p><table class=\"matrix\" id=\"matrix\"><thead><tr><th>task</th>",
        r.tasks.len()
    );
    for a in &r.agents {
        let _ = write!(b, "<th>{}</th>", esc(a));
    }
    b.push_str("</tr></thead><tbody>");
    for task in r.tasks.iter().skip(mp * MATRIX_ROWS).take(MATRIX_ROWS) {
        let _ = write!(b, "<tr><th>{}</th>", esc(task));
        for a in &r.agents {
            match r.matrix.get(&(task.clone(), a.clone())) {
                Some(c) => {
                    let _ = write!(
                        b,
                        "<td class=\"{cls}\" title=\"{s} solved, {f} not solved, {o} no verdict\">\
                         <a href=\"/trials/{href}\">{s}/{n}</a></td>",
                        cls = c.class(),
                        s = c.solved,
                        f = c.failed,
                        o = c.other,
                        n = c.trials,
                        href = url_path(&c.first),
                    );
                }
                None => b.push_str("<td class=\"c-empty\"></td>"),
            }
        }
        b.push_str("</tr>");
    }
    b.push_str("</tbody></table>");
    pager(b, "mpage", mp, pages, q, "matrix");
}

fn trial_table(b: &mut String, r: &RunView, q: &RunQuery) {
    let per = q.per();
    let filter = q.filter();
    let matching: Vec<_> = r.filtered(&filter).collect();
    let pages = matching.len().div_ceil(per).max(1);
    let p = q.page.min(pages - 1);
    let _ = write!(
        b,
        "<h2 id=\"trials\">Trials</h2><form class=\"filters\" method=\"get\" action=\"#trials\">\
         <input name=\"q\" placeholder=\"search key, task, cause\" value=\"{q}\">\
         <select name=\"agent\"><option value=\"\">every agent</option>",
        q = esc(q.q.as_deref().unwrap_or(""))
    );
    for a in &r.agents {
        let sel = if q.agent.as_deref() == Some(a) {
            " selected"
        } else {
            ""
        };
        let _ = write!(b, "<option{sel}>{}</option>", esc(a));
    }
    b.push_str("</select><select name=\"outcome\"><option value=\"\">every outcome</option>");
    for bk in ALL_BUCKETS {
        let sel = if q.outcome.as_deref() == Some(bk.as_str()) {
            " selected"
        } else {
            ""
        };
        let _ = write!(b, "<option{sel}>{}</option>", bk.as_str());
    }
    let _ = write!(
        b,
        "</select><button>filter</button></form><p class=\"count\" id=\"trial-count\">{} matching</p>\
         <table class=\"list\" id=\"trial-table\"><thead><tr><th>trial</th><th>outcome</th>\
         <th>score</th><th>attempts</th><th>time</th><th>cause</th></tr></thead><tbody>",
        matching.len()
    );
    for t in matching.iter().skip(p * per).take(per) {
        trial_row(b, t);
    }
    b.push_str("</tbody></table>");
    pager(b, "page", p, pages, q, "trials");
}

/// One row of a trial table.
fn trial_row(b: &mut String, t: &TrialRow) {
    let _ = write!(
        b,
        "<tr><td><a href=\"/trials/{h}\">{k}</a></td><td>{bd}</td><td>{s}</td><td>{a}</td>\
         <td>{d:.1}s</td><td class=\"cause\">{c}</td></tr>",
        h = url_path(&t.key),
        k = esc(&t.key),
        bd = badge(t.bucket),
        s = t
            .score
            .map(|s| format!("{s:.2}"))
            .unwrap_or_else(|| "–".into()),
        a = t.attempts,
        d = t.duration_ms as f64 / 1000.0,
        c = esc(t.cause.as_deref().unwrap_or("")),
    );
}

fn pager(b: &mut String, name: &str, cur: usize, pages: usize, q: &RunQuery, anchor: &str) {
    let link = |page: usize| {
        let mut s = format!("?{name}={page}");
        let (other, ov) = if name == "page" {
            ("mpage", q.mpage)
        } else {
            ("page", q.page)
        };
        let _ = write!(s, "&{other}={ov}&per={}", q.per());
        for (k, v) in [("agent", &q.agent), ("outcome", &q.outcome), ("q", &q.q)] {
            if let Some(v) = v.as_deref().filter(|v| !v.is_empty()) {
                let _ = write!(s, "&{k}={}", url(v));
            }
        }
        format!("{}#{anchor}", esc(&s))
    };
    let _ = write!(b, "<nav class=\"pager\" id=\"{anchor}-pager\">");
    if cur > 0 {
        let _ = write!(b, "<a href=\"{}\">← previous</a> ", link(cur - 1));
    }
    let _ = write!(b, "page {} of {pages}", cur + 1);
    if cur + 1 < pages {
        let _ = write!(
            b,
            " <a href=\"{}\" class=\"next\">next →</a>",
            link(cur + 1)
        );
    }
    b.push_str("</nav>");
}

/// The trial page, from its record; logs and diff are read from `artifacts`.
pub fn trial(r: &RunRecord, artifacts: &Artifacts) -> String {
    let mut b = String::new();
    let _ = write!(
        b,
        "<h1>Trial <code>{k}</code></h1><dl class=\"facts\"><dt>outcome</dt><dd>{o}</dd>\
         <dt>score</dt><dd>{s}</dd><dt>task</dt><dd>{t} {v}</dd><dt>agent</dt><dd>{a} ({ad}{m})</dd>\
         <dt>attempts</dt><dd>{n}</dd><dt>written by</dt><dd>{w}</dd></dl>",
        k = esc(&r.trial.key),
        o = {
            let obs = akbench_core::accounting::Observation {
                trial_id: r.trial.id,
                state: r.outcome.state,
                ok: r.outcome.ok,
                score: r.outcome.score,
                attempt_id: None,
                source: None,
            };
            format!(
                "{} <span class=\"state\">(state {})</span>",
                badge(akbench_core::accounting::Bucket::of(&obs).as_str()),
                esc(&r.outcome.state.to_string())
            )
        },
        s = r.outcome.score.map(|s| format!("{s:.2}")).unwrap_or_else(|| "not graded".into()),
        t = esc(&r.task.release.id),
        v = esc(&r.task.release.version),
        a = esc(&r.agent.name),
        ad = esc(&r.agent.adapter),
        m = r.agent.model.as_deref().map(|m| format!(", {}", esc(m))).unwrap_or_default(),
        n = r.attempts.len(),
        w = esc(&r.written_by),
    );
    for a in &r.attempts {
        attempt(&mut b, a, artifacts, &r.agent.adapter);
    }
    digests(&mut b, r);
    let run = (format!("/runs/{}", url(&r.run.key)), r.run.key.clone());
    let me = (
        format!("/trials/{}", url_path(&r.trial.key)),
        r.trial.key.clone(),
    );
    page(&r.trial.key, &[run, me], &b)
}

fn attempt(b: &mut String, a: &AttemptRecord, dir: &Artifacts, adapter: &str) {
    let _ = write!(
        b,
        "<section class=\"attempt\" id=\"attempt-{n}\"><h2>Attempt {n}: {st}</h2>",
        n = a.number,
        st = badge(&a.state.to_string())
    );
    if let Some(c) = &a.cause {
        let _ = write!(b, "<p class=\"cause\">{}</p>", esc(c));
    }
    timeline(b, a);
    if let Some(p) = &a.agent_process {
        let _ = write!(
            b,
            "<h3>Agent process</h3><p><code>{argv}</code> · exit {ec} · {d:.1}s{to}</p>",
            argv = esc(&p.argv.join(" ")),
            ec = p
                .exit_code
                .map(|c| c.to_string())
                .unwrap_or_else(|| "none".into()),
            d = p.duration_ms as f64 / 1000.0,
            to = if p.timed_out { " · timed out" } else { "" },
        );
        observations(b, a);
        if let Artifacts::Folder(root) = dir {
            match crate::transcript::load(root, adapter, a) {
                Ok((t, converted)) => crate::transcript::render(b, &t, converted),
                Err(e) => {
                    let _ = write!(
                        b,
                        "<h3>Transcript</h3><p class=\"refused\">not shown: {}</p>",
                        esc(&e)
                    );
                }
            }
        }
        for (path, title) in [
            (&p.stdout_path, "Agent stdout"),
            (&p.stderr_path, "Agent stderr"),
        ] {
            if let Some(path) = path {
                artifact(b, dir, path, title, "log");
            }
        }
    }
    if let Some(m) = &a.observations.final_message {
        let _ = write!(
            b,
            "<h3>Final message</h3><pre class=\"log final\">{}</pre>",
            esc(m)
        );
    }
    if let Some(d) = &a.workspace.diff_path {
        artifact(b, dir, d, "Diff", "diff");
    }
    crate::steps::render(b, a.number, &a.steps, dir, artifact);
    if let Some(g) = &a.grade {
        let _ = write!(
            b,
            "<h3>Evaluation</h3><p>{ok} · score {s:.2} · from {src} · exit {ec} · {d:.1}s</p>",
            ok = if g.ok {
                badge("succeeded")
            } else {
                badge("failed")
            },
            s = g.score,
            src = esc(&g.source),
            ec = g
                .exit_code
                .map(|c| c.to_string())
                .unwrap_or_else(|| "none".into()),
            d = g.duration_ms as f64 / 1000.0,
        );
        if !g.tests.is_empty() {
            b.push_str("<table class=\"list tests\"><thead><tr><th>test</th><th>outcome</th><th>message</th></tr></thead><tbody>");
            for t in &g.tests {
                let o = serde_json::to_value(t.outcome).ok();
                let o = o.as_ref().and_then(|v| v.as_str()).unwrap_or("?");
                let _ = write!(
                    b,
                    "<tr class=\"t-{o}\"><td><code>{n}</code></td><td>{o}</td><td>{m}</td></tr>",
                    n = esc(&t.name),
                    m = esc(t.message.as_deref().unwrap_or("")),
                );
            }
            b.push_str("</tbody></table>");
        }
        let _ = write!(
            b,
            "<details open><summary>Evaluator output{}</summary><pre class=\"log\">{}</pre></details>",
            if g.report_truncated { " (truncated)" } else { "" },
            esc(&g.report)
        );
    }
    b.push_str("</section>");
}

/// What the adapter observed (turns, tokens, cost, model) and the agent CLI's version, each
/// when known.
fn observations(b: &mut String, a: &AttemptRecord) {
    let o = &a.observations;
    let num = |n: Option<u64>| n.map(|n| n.to_string());
    let facts = [
        (
            "agent CLI",
            a.provenance
                .as_ref()
                .and_then(|p| p.agent_cli_version.clone()),
        ),
        ("model", o.model.clone()),
        ("turns", num(o.turns)),
        ("input tokens", num(o.input_tokens)),
        ("cached input tokens", num(o.cached_input_tokens)),
        ("output tokens", num(o.output_tokens)),
        ("cost", o.cost_usd.map(akbench_core::spend::fmt_cost)),
    ];
    if facts.iter().all(|(_, v)| v.is_none()) {
        return;
    }
    b.push_str("<dl class=\"facts observations\">");
    for (k, v) in facts {
        if let Some(v) = v {
            let _ = write!(b, "<dt>{k}</dt><dd>{}</dd>", esc(&v));
        }
    }
    b.push_str("</dl>");
}

/// The transitions drawn to scale: one bar per state, as wide as the time spent in it.
fn timeline(b: &mut String, a: &AttemptRecord) {
    let ts = &a.transitions;
    let (Some(first), Some(last)) = (ts.first(), ts.last()) else {
        return;
    };
    let total = (last.at - first.at).num_milliseconds().max(1) as f64;
    const W: f64 = 900.0;
    let _ = write!(
        b,
        "<h3>Timeline ({:.2}s)</h3><svg class=\"timeline\" viewBox=\"0 0 {W} 46\" width=\"100%\" \
         role=\"img\" aria-label=\"transition timeline\">",
        total / 1000.0
    );
    for (i, t) in ts.iter().enumerate() {
        let end = ts.get(i + 1).map_or(t.at, |n| n.at);
        let x = (t.at - first.at).num_milliseconds() as f64 / total * W;
        let w = ((end - t.at).num_milliseconds() as f64 / total * W).max(1.0);
        let _ = write!(
            b,
            "<g><title>{s}: {ms} ms{note}</title><rect class=\"s-{s}\" x=\"{x:.1}\" y=\"4\" \
             width=\"{w:.1}\" height=\"22\"></rect></g>",
            s = esc(&t.state.to_string()),
            ms = (end - t.at).num_milliseconds(),
            note = t
                .note
                .as_deref()
                .map(|n| format!(" ({})", esc(n)))
                .unwrap_or_default(),
        );
        if w > 60.0 {
            let _ = write!(
                b,
                "<text x=\"{:.1}\" y=\"40\">{}</text>",
                x + 2.0,
                esc(&t.state.to_string())
            );
        }
    }
    b.push_str("</svg><ol class=\"transitions\">");
    for t in ts {
        let _ = write!(
            b,
            "<li><code>{}</code> {}{}</li>",
            esc(&t.state.to_string()),
            esc(&t.at.format("%H:%M:%S%.3f").to_string()),
            t.note
                .as_deref()
                .map(|n| format!(" · {}", esc(n)))
                .unwrap_or_default()
        );
    }
    b.push_str("</ol>");
}

/// An artifact of the attempt, read through [`resolve_inside`] (paths in a record are
/// untrusted) and capped at [`ARTIFACT_CAP`].
pub(crate) fn artifact(b: &mut String, dir: &Artifacts, rel: &str, title: &str, kind: &str) {
    let _ = write!(b, "<h3>{}</h3>", esc(title));
    let text = match dir {
        Artifacts::Folder(dir) => {
            resolve_inside(dir, rel).and_then(|p| read_capped(&p).map_err(|e| e.to_string()))
        }
        Artifacts::Unavailable(why) => Err(why.clone()),
    };
    match text {
        Ok((s, _)) if s.is_empty() => b.push_str("<p class=\"empty\">(empty)</p>"),
        Ok((s, cut)) => {
            let cls = if kind == "diff" { "diff" } else { "log" };
            let _ = write!(b, "<pre class=\"{cls}\">");
            if kind == "diff" {
                diff_lines(b, &s);
            } else {
                b.push_str(&esc(&s));
            }
            b.push_str("</pre>");
            if cut {
                let _ = write!(
                    b,
                    "<p class=\"note\">shown: the first {} KiB</p>",
                    ARTIFACT_CAP / 1024
                );
            }
        }
        Err(e) => {
            let _ = write!(b, "<p class=\"refused\">not shown: {}</p>", esc(&e));
        }
    }
}

/// The first [`ARTIFACT_CAP`] bytes of a regular file (a FIFO or device is refused, unread),
/// and whether there was more.
fn read_capped(p: &Path) -> std::io::Result<(String, bool)> {
    let mut buf = akbench_core::bounded_read::read_prefix(
        p,
        ARTIFACT_CAP + 1,
        akbench_core::bounded_read::Links::Follow,
    )
    .map_err(|e| std::io::Error::other(e.to_string()))?;
    let cut = buf.len() as u64 > ARTIFACT_CAP;
    buf.truncate(ARTIFACT_CAP as usize);
    Ok((String::from_utf8_lossy(&buf).into_owned(), cut))
}

/// Unified diff lines with a class each: file headers, hunk headers, additions, removals.
pub fn diff_lines(b: &mut String, diff: &str) {
    for line in diff.lines() {
        let cls = if line.starts_with("diff --git")
            || line.starts_with("+++ ")
            || line.starts_with("--- ")
            || line.starts_with("index ")
        {
            "d-file"
        } else if line.starts_with("@@") {
            "d-hunk"
        } else if line.starts_with('+') {
            "d-add"
        } else if line.starts_with('-') {
            "d-del"
        } else {
            "d-ctx"
        };
        // Each span is a block: no newline between them.
        let _ = write!(b, "<span class=\"{cls}\">{}</span>", esc(line));
    }
}

fn digests(b: &mut String, r: &RunRecord) {
    let mut rows: Vec<(String, String)> = vec![
        ("task release".into(), r.task.release.digest.clone()),
        ("tests".into(), r.task.tests_digest.clone()),
        ("agent descriptor".into(), r.agent.descriptor_digest.clone()),
        ("agent condition".into(), r.agent.digest.clone()),
        ("commit".into(), r.task.commit.clone()),
    ];
    if let Some(m) = &r.task.mutation_digest {
        rows.push(("mutation".into(), m.clone()));
    }
    if let Some(m) = &r.task.reference_digest {
        rows.push(("reference solution".into(), m.clone()));
    }
    for a in &r.attempts {
        if let Some(d) = &a.workspace.diff_digest {
            rows.push((format!("attempt {} diff", a.number), d.clone()));
        }
        if let Some(g) = &a.grade {
            rows.push((
                format!("attempt {} graded with tests", a.number),
                g.tests_digest.clone(),
            ));
        }
    }
    b.push_str("<h2>Digests</h2><table class=\"list digests\"><tbody>");
    for (k, v) in rows {
        let _ = write!(
            b,
            "<tr><th>{}</th><td><code>{}</code></td></tr>",
            esc(&k),
            esc(&v)
        );
    }
    b.push_str("</tbody></table>");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cost_below_a_dollar_keeps_four_decimals() {
        let row = |key: &str, cost| crate::model::TrialRow {
            run: "run-1".into(),
            key: key.into(),
            task: "t1".into(),
            agent: "a".into(),
            state: akbench_core::lifecycle::State::Completed,
            ok: Some(true),
            score: Some(1.0),
            bucket: "succeeded",
            cause: None,
            attempts: 1,
            cost_usd: Some(cost),
            tokens: None,
            spend: akbench_core::spend::Spend {
                cost_usd: Some(cost),
                ..Default::default()
            },
            grading: Default::default(),
            duration_ms: 1,
            file: std::path::PathBuf::new(),
            ordinal: None,
        };
        let r = RunView::build("run-1".into(), vec![row("run-1/t1/a/r1", 0.0363)], None);
        let mut b = String::new();
        rates_table(&mut b, &r);
        assert!(b.contains("<td>$0.0363</td>"), "{b}");
    }

    #[test]
    fn diff_lines_are_classified_and_escaped() {
        let mut b = String::new();
        diff_lines(
            &mut b,
            "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-old <b>\n+new\n same",
        );
        let classes: Vec<&str> = b
            .split("</span>")
            .filter(|l| !l.is_empty())
            .map(|l| l.split('"').nth(1).unwrap())
            .collect();
        assert_eq!(
            classes,
            ["d-file", "d-file", "d-file", "d-hunk", "d-del", "d-add", "d-ctx"]
        );
        assert!(b.contains("-old &lt;b&gt;"), "{b}");
    }
}
