//! The HTML of `run report`: one self-contained page. Tables are rendered here (readable
//! without JavaScript); the inline script draws the attempt timelines from the embedded
//! JSON, wires the matrix filter, and finally marks the page rendered
//! (`<body data-akbench-rendered="1">`, `#akbench-status` = `rendered`); a script error
//! writes itself into `#akbench-status` instead. A Content-Security-Policy forbids every
//! fetch: the page needs no network at view time.

use crate::cmd::shared::compare::Checked;
use crate::cmd::shared::source::LoadedRun;
use akbench_core::accounting::Bucket;
use akbench_core::compare::stats::Interval;
use akbench_core::compare::{Comparison, Flip, SideRates};
use akbench_core::rates::Pct;
use akbench_core::report_view::RunView;
use chrono::{DateTime, Utc};
use std::fmt::Write as _;

const STYLE: &str = r#"
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:2rem auto;max-width:1100px;color:#1d2330;padding:0 1rem}
h1{font-size:1.5rem;margin:0 0 .3rem}h2{font-size:1.15rem;margin:2rem 0 .6rem;border-bottom:1px solid #d8dce4;padding-bottom:.2rem}
.meta{color:#5b6474}table{border-collapse:collapse;margin:.4rem 0}th,td{padding:.25rem .6rem;border-bottom:1px solid #eceef2;text-align:left;vertical-align:top}
th{background:#f5f6f8;font-weight:600}td.n{text-align:right;font-variant-numeric:tabular-nums}.absent{color:#98a0ad;font-style:italic}
.cell{display:inline-block;min-width:1.4em;text-align:center;border-radius:3px;margin:1px;padding:0 .2em;font-weight:600}
.b-succeeded{background:#d3f4dc;color:#17692f}.b-failed{background:#fbd9d9;color:#9b1c1c}.b-agent_failed{background:#fde4cf;color:#9a4b0c}
.b-timed_out{background:#fdf0c4;color:#7c5a00}.b-infrastructure_error{background:#e3e0f7;color:#4b3a9e}.b-evaluation_error{background:#f1dcf3;color:#7d2a87}
.b-not_graded{background:#e7ebf0;color:#4a5463}.b-missing{background:#fff;color:#98a0ad;border:1px dashed #c4c9d2}.b-cancelled,.b-invalid,.b-quarantined{background:#eee;color:#333}
.legend span{margin-right:.8rem}.warn{background:#fff4d6;border:1px solid #f0c24b;padding:.5rem .8rem;border-radius:4px}
.timeline svg{border:1px solid #eceef2;background:#fcfcfd}#akbench-status{color:#98a0ad;font-size:.8rem;margin-top:2rem}
"#;

const SCRIPT: &str = r#"
(function(){
  var status=document.getElementById('akbench-status');
  window.addEventListener('error',function(e){status.textContent='script error: '+e.message;});
  var data=JSON.parse(document.getElementById('akbench-data').textContent);
  var colors={completed:'#3aa55d',failed:'#e07b39',timeout:'#d9a400',infrastructure_error:'#7b68d6',evaluation_error:'#a94bb5',cancelled:'#888',not_graded:'#9aa5b5',invalid_configuration:'#555'};
  var NS='http://www.w3.org/2000/svg';
  function el(name,attrs,parent){var e=document.createElementNS(NS,name);for(var k in attrs){e.setAttribute(k,attrs[k]);}if(parent){parent.appendChild(e);}return e;}
  data.timelines.forEach(function(t,i){
    var box=document.getElementById('timeline-'+i);if(!box){return;}
    var spans=t.spans;if(!spans.length){box.textContent='No attempts were recorded.';return;}
    var width=1000,row=12,left=4,top=18,end=1;
    spans.forEach(function(s){if(s.end_ms>end){end=s.end_ms;}});
    var h=top+spans.length*row+6;
    var svg=el('svg',{width:width,height:h,viewBox:'0 0 '+width+' '+h,role:'img','aria-label':'timeline of attempts'},box);
    var scale=(width-2*left)/end;
    for(var k=0;k<=4;k++){var x=left+k*(width-2*left)/4;el('line',{x1:x,x2:x,y1:12,y2:h,stroke:'#e3e6eb'},svg);
      var lbl=el('text',{x:Math.min(x+2,width-60),y:11,'font-size':10,fill:'#5b6474'},svg);lbl.textContent=(end*k/4/1000).toFixed(1)+' s';}
    spans.forEach(function(s,j){
      var x=left+s.start_ms*scale,w=Math.max(2,(s.end_ms-s.start_ms)*scale);
      var r=el('rect',{x:x,y:top+j*row,width:w,height:row-3,rx:2,fill:colors[s.state]||'#444'},svg);
      var title=el('title',{},r);title.textContent=s.trial+' attempt '+s.number+': '+s.state+' ('+((s.end_ms-s.start_ms)/1000).toFixed(1)+' s)';
    });
  });
  document.querySelectorAll('input.only-diff').forEach(function(box){
    box.addEventListener('change',function(){
      var table=document.getElementById(box.getAttribute('data-table'));
      table.querySelectorAll('tbody tr').forEach(function(tr){tr.hidden=box.checked&&tr.getAttribute('data-same')==='1';});
    });
  });
  document.body.setAttribute('data-akbench-rendered','1');
  status.textContent='rendered';
})();
"#;

pub use akbench_core::html::esc;

fn symbol(b: Bucket) -> &'static str {
    match b {
        Bucket::Succeeded => "✓",
        Bucket::Failed => "✗",
        Bucket::AgentFailed => "!",
        Bucket::TimedOut => "T",
        Bucket::InfrastructureError => "⚠",
        Bucket::EvaluationError => "?",
        Bucket::NotGraded => "○",
        Bucket::Missing => "·",
        Bucket::Cancelled => "⊘",
        Bucket::Invalid => "≠",
        Bucket::Quarantined => "⁈",
    }
}

fn cell(b: Bucket, title: &str) -> String {
    format!(
        "<span class=\"cell b-{}\" title=\"{}\">{}</span>",
        b.as_str(),
        esc(title),
        symbol(b)
    )
}

fn interval(i: Option<Interval>) -> String {
    match i {
        Some(i) => format!(" [{}, {}]", Pct(Some(i.low)), Pct(Some(i.high))),
        None => String::new(),
    }
}

/// A small SVG: the rate as a bar with its interval as a whisker (nothing when absent).
fn bar(rate: Option<f64>, i: Option<Interval>) -> String {
    let Some(r) = rate else {
        return String::new();
    };
    let w = 160.0;
    let mut s = format!(
        "<svg width=\"{w}\" height=\"14\" role=\"img\" aria-label=\"{}\"><rect x=\"0\" y=\"2\" width=\"{w}\" height=\"10\" fill=\"#eef0f3\"/><rect x=\"0\" y=\"2\" width=\"{:.1}\" height=\"10\" fill=\"#5b8def\"/>",
        Pct(rate),
        r * w
    );
    if let Some(i) = i {
        let _ = write!(
            s,
            "<line x1=\"{:.1}\" x2=\"{:.1}\" y1=\"7\" y2=\"7\" stroke=\"#1d2330\"/><line x1=\"{:.1}\" x2=\"{:.1}\" y1=\"3\" y2=\"11\" stroke=\"#1d2330\"/><line x1=\"{:.1}\" x2=\"{:.1}\" y1=\"3\" y2=\"11\" stroke=\"#1d2330\"/>",
            i.low * w, i.high * w, i.low * w, i.low * w, i.high * w, i.high * w
        );
    }
    s.push_str("</svg>");
    s
}

fn rates_rows(out: &mut String, label: &str, s: &SideRates) {
    let c = &s.counts;
    let _ = write!(
        out,
        "<tr><td>{}</td><td class=\"n\">{}</td><td>{}{} {}</td><td>{}{} {}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
        esc(label),
        s.trials,
        Pct(s.rates.solve_rate),
        interval(s.solve_interval),
        bar(s.rates.solve_rate, s.solve_interval),
        Pct(s.rates.pass_rate),
        interval(s.pass_interval),
        bar(s.rates.pass_rate, s.pass_interval),
        s.rates.graded,
        c.agent_failed + c.timed_out,
        c.infrastructure_error,
        c.not_graded,
        c.missing
    );
}

const RATES_HEAD: &str = "<table><thead><tr><th>agent</th><th>trials</th><th>solve rate (95% Wilson)</th><th>pass rate (95% Wilson)</th><th>graded</th><th>agent failed / timed out</th><th>infrastructure errors</th><th>not graded</th><th>missing</th></tr></thead><tbody>";

fn legend() -> String {
    let mut s = String::from("<p class=\"legend\">");
    for b in akbench_core::accounting::ALL_BUCKETS {
        let _ = write!(s, "<span>{} {}</span>", cell(b, b.as_str()), b.as_str());
    }
    s.push_str("</p>");
    s
}

/// Per multi-step task, a table of its steps over the trials (`core::report::steps`);
/// nothing for a run without one.
fn steps_section(out: &mut String, v: &RunView, prefix: &str) {
    for t in &v.steps {
        let _ = write!(
            out,
            "<h2>{prefix}Steps of {}</h2><p class=\"meta\">{} trials, each counted by its last attempt.</p><table><thead><tr><th>step</th><th>reached</th><th>passed</th><th>stopped here</th><th>not graded</th><th>mean reward</th><th>input tokens</th><th>output tokens</th><th>cost (USD)</th></tr></thead><tbody>",
            esc(&t.task),
            t.trials
        );
        for (i, s) in t.steps.iter().enumerate() {
            let absent = |n: u64| {
                format!(
                    "<span class=\"absent\">absent ({n} of {} reported it)</span>",
                    s.reached
                )
            };
            let tok = |x: Option<u64>| x.map_or_else(|| absent(s.with_tokens), |t| t.to_string());
            let _ = write!(
                out,
                "<tr><td>{}. {}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
                i + 1,
                esc(&s.name),
                s.reached,
                s.passed,
                s.stopped,
                s.not_graded,
                s.mean_reward
                    .map_or_else(|| "n/a".to_string(), |r| format!("{r:.3}")),
                tok(s.input_tokens),
                tok(s.output_tokens),
                s.cost_usd
                    .map_or_else(|| absent(s.with_cost), |c| format!("{c:.4}")),
            );
        }
        out.push_str("</tbody></table><p class=\"meta\">Passed: graded solved, or graded at or above its min_reward (or the step has no gate). Stopped here: its gate, or a failure before grading, ended the trial's remaining steps.</p>");
    }
}

/// The sections of one run's view; `n` numbers its timeline.
fn run_sections(out: &mut String, v: &RunView, n: usize, prefix: &str) {
    let _ = write!(out, "<h2>{prefix}Rates per agent</h2>{RATES_HEAD}");
    for (a, s) in &v.by_agent {
        rates_rows(out, a, s);
    }
    if v.by_agent.len() > 1 {
        rates_rows(out, "all agents", &v.total);
    }
    out.push_str("</tbody></table><p class=\"meta\">Pass rate = succeeded / graded; solve rate also counts the agent's own failures and timeouts as unsolved. Infrastructure errors, not graded and missing trials are never counted as failures; n/a means nothing was measured.</p>");
    let _ = write!(
        out,
        "<h2>{prefix}Tasks × agents</h2><label><input type=\"checkbox\" class=\"only-diff\" data-table=\"matrix-{n}\"> only tasks whose outcomes differ</label><table id=\"matrix-{n}\"><thead><tr><th>task</th>"
    );
    for a in &v.agents {
        let _ = write!(out, "<th>{}</th>", esc(a));
    }
    out.push_str("</tr></thead><tbody>");
    for task in &v.tasks {
        let row = &v.matrix[task];
        let mut seen: Vec<Bucket> = row.values().flatten().map(|c| c.bucket).collect();
        seen.dedup();
        let same = seen.len() <= 1;
        let _ = write!(
            out,
            "<tr data-same=\"{}\"><td>{}</td>",
            u8::from(same),
            esc(task)
        );
        for a in &v.agents {
            out.push_str("<td>");
            for c in row.get(a).into_iter().flatten() {
                out.push_str(&cell(
                    c.bucket,
                    &format!("{} r{}: {}", c.key, c.repetition, c.bucket.as_str()),
                ));
            }
            out.push_str("</td>");
        }
        out.push_str("</tr>");
    }
    out.push_str("</tbody></table>");
    out.push_str(&legend());
    let _ = write!(out, "<h2>{prefix}Cost and tokens</h2>");
    if v.usage.is_empty() {
        out.push_str("<p class=\"absent\">No records: nothing to sum.</p>");
    } else {
        out.push_str("<table><thead><tr><th>agent</th><th>attempts</th><th>cost (USD)</th><th>input tokens</th><th>cached input tokens</th><th>output tokens</th></tr></thead><tbody>");
        let absent = |n: u64, of: u64| {
            format!("<span class=\"absent\">absent ({n} of {of} attempts reported it)</span>")
        };
        for (a, u) in &v.usage {
            let cost = match u.cost_usd {
                Some(c) if u.attempts_with_computed_cost > 0 => format!(
                    "{c:.4} ({} of {} attempts reported it; computed from the agent's price for {} of them)",
                    u.attempts_with_cost, u.attempts, u.attempts_with_computed_cost
                ),
                Some(c) => format!(
                    "{c:.4} ({} of {} attempts reported it)",
                    u.attempts_with_cost, u.attempts
                ),
                None => absent(0, u.attempts),
            };
            let tok = |x: Option<u64>| match x {
                Some(t) => t.to_string(),
                None => absent(u.attempts_with_tokens, u.attempts),
            };
            let _ = write!(
                out,
                "<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{cost}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
                esc(a),
                u.attempts,
                tok(u.input_tokens),
                tok(u.cached_input_tokens),
                tok(u.output_tokens)
            );
        }
        out.push_str("</tbody></table>");
    }
    let _ = write!(out, "<h2>{prefix}Infrastructure errors by cause</h2>");
    if v.infrastructure_causes.is_empty() {
        out.push_str("<p>None recorded.</p>");
    } else {
        out.push_str("<table><thead><tr><th>cause</th><th>attempts</th></tr></thead><tbody>");
        for (cause, n) in &v.infrastructure_causes {
            let _ = write!(
                out,
                "<tr><td>{}</td><td class=\"n\">{n}</td></tr>",
                esc(cause)
            );
        }
        out.push_str("</tbody></table>");
    }
    // Where verdicts were graded, undeclared hosts, grading fetches (core::report::network).
    let _ = write!(out, "<h2>{prefix}Grading place and network</h2>");
    if v.network.is_empty() {
        out.push_str("<p class=\"absent\">No records: nothing to count.</p>");
    } else {
        out.push_str("<table><thead><tr><th>agent</th><th>graded in the agent's environment</th><th>graded in a clean room</th><th>trials whose agent reached undeclared hosts</th><th>undeclared hosts</th><th>attempts ended by a grading fetch</th></tr></thead><tbody>");
        for (a, n) in &v.network {
            let _ = write!(
                out,
                "<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
                esc(a),
                n.graded_shared,
                n.graded_clean_room,
                n.undeclared_trials,
                n.undeclared_hosts,
                n.fetch_failed_attempts
            );
        }
        out.push_str("</tbody></table>");
    }
    steps_section(out, v, prefix);
    let _ = write!(
        out,
        "<h2>{prefix}Timeline of attempts</h2><div class=\"timeline\" id=\"timeline-{n}\"><noscript>The timeline is drawn by the page's script.</noscript></div>"
    );
}

fn page(title: &str, body: &str, timelines: serde_json::Value) -> String {
    let data = serde_json::json!({ "timelines": timelines })
        .to_string()
        // `<` only occurs inside JSON strings, where \u003c means the same: the script
        // element can then never be closed (`</script>`) or commented (`<!--`) by data.
        .replace('<', "\\u003c");
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\"><title>{}</title><style>{STYLE}</style></head><body>{body}<p id=\"akbench-status\">not rendered (scripts disabled?)</p><script type=\"application/json\" id=\"akbench-data\">{data}</script><script>{SCRIPT}</script></body></html>\n",
        esc(title)
    )
}

fn header(out: &mut String, r: &LoadedRun) {
    let experiment = r
        .spec
        .as_ref()
        .map_or("(spec not at hand)".to_string(), |s| {
            s.condition.experiment.clone()
        });
    let _ = write!(
        out,
        "<p class=\"meta\">run <b>{}</b> ({}) · experiment {} · from {}</p>",
        esc(&r.run_key),
        r.run_id,
        esc(&experiment),
        esc(&r.source)
    );
    // Best-of-N: the selection, pass@1 and pass@N, the per-trial rates (docs/candidates.md).
    if let Some(c) = r.candidates() {
        let _ = write!(
            out,
            "<p class=\"meta\">{}</p>",
            esc(&c.to_string()).replace('\n', "<br>")
        );
    }
}

/// The report of one run.
pub fn single(r: &LoadedRun, v: &RunView, generated: DateTime<Utc>) -> String {
    let mut body = format!("<h1>akbench report: {}</h1>", esc(&r.run_key));
    header(&mut body, r);
    let _ = write!(
        body,
        "<p class=\"meta\">generated {}</p>",
        generated.format("%Y-%m-%d %H:%M:%S UTC")
    );
    run_sections(&mut body, v, 0, "");
    page(
        &format!("akbench report: {}", r.run_key),
        &body,
        serde_json::json!([{ "spans": v.timeline }]),
    )
}

/// The report of a comparison.
pub fn comparison(
    left: &LoadedRun,
    lv: &RunView,
    right: &LoadedRun,
    rv: &RunView,
    checked: &Checked,
    c: &Comparison,
    generated: DateTime<Utc>,
) -> String {
    let mut b = format!(
        "<h1>akbench comparison: {} → {}</h1>",
        esc(&left.run_key),
        esc(&right.run_key)
    );
    header(&mut b, left);
    header(&mut b, right);
    let _ = write!(
        b,
        "<p class=\"meta\">generated {}</p>",
        generated.format("%Y-%m-%d %H:%M:%S UTC")
    );
    if !checked.blocking.is_empty() {
        b.push_str("<p class=\"warn\"><b>Compared anyway:</b> the task releases or the evaluation differ, so a difference may come from the tasks or the grading, not the agents:</p><ul>");
        for ch in &checked.blocking {
            let _ = write!(b, "<li><code>{}</code></li>", esc(&ch.to_string()));
        }
        b.push_str("</ul>");
    }
    let _ = write!(
        b,
        "<p>Conditions {} (checked from the {}).</p>",
        if checked.diff.is_empty() {
            "identical"
        } else {
            "differ"
        },
        checked.by
    );
    if !checked.diff.is_empty() {
        b.push_str("<ul>");
        for ch in &checked.diff.changes {
            let _ = write!(b, "<li><code>{}</code></li>", esc(&ch.to_string()));
        }
        b.push_str("</ul>");
    }
    let _ = write!(b, "<h2>Rates</h2>{RATES_HEAD}");
    rates_rows(&mut b, &format!("left: {}", left.run_key), &c.left.total);
    rates_rows(&mut b, &format!("right: {}", right.run_key), &c.right.total);
    b.push_str("</tbody></table>");
    let p = &c.paired;
    let boot = match p.bootstrap {
        Some(bs) => format!(
            "95% paired bootstrap [{:+.1}, {:+.1}] points ({} resamples, seed {})",
            bs.interval.low * 100.0,
            bs.interval.high * 100.0,
            bs.resamples,
            bs.seed
        ),
        None => "no bootstrap (no pairs)".into(),
    };
    let diff = p
        .difference
        .map_or("n/a".into(), |d| format!("{:+.1} points", d * 100.0));
    let pairing: Vec<String> = c
        .pairing
        .iter()
        .map(|(l, r)| format!("{} → {}", esc(l), esc(r)))
        .collect();
    let _ = write!(
        b,
        "<h2>Paired</h2><p>Agents {}. {} pairs: solved by both {}, by neither {}, lost {}, gained {}.</p><p>Difference (right − left) <b>{diff}</b> ({} → {}); {boot}. Exact McNemar p = {:.4} over {} discordant pairs.</p>",
        pairing.join(", "),
        p.pairs,
        p.both_solved,
        p.neither_solved,
        p.lost,
        p.gained,
        Pct(p.left_rate),
        Pct(p.right_rate),
        p.mcnemar_p,
        p.lost + p.gained
    );
    let _ = write!(b, "<h2>Flips ({})</h2>", c.flips.len());
    if c.flips.is_empty() {
        b.push_str("<p>No pair changed.</p>");
    } else {
        b.push_str("<table><thead><tr><th>direction</th><th>task</th><th>rep</th><th>left trial</th><th>right trial</th></tr></thead><tbody>");
        for f in &c.flips {
            let (dir, pair) = (&f.direction, &f.pair);
            let d = match dir {
                Flip::Lost => cell(Bucket::Failed, "lost") + " solved → not",
                Flip::Gained => cell(Bucket::Succeeded, "gained") + " not → solved",
            };
            let _ = write!(
                b,
                "<tr><td>{d}</td><td>{}</td><td class=\"n\">{}</td><td>{}</td><td>{}</td></tr>",
                esc(&pair.task),
                pair.repetition,
                esc(&pair.left_key),
                esc(&pair.right_key)
            );
        }
        b.push_str("</tbody></table>");
    }
    let _ = write!(b, "<h2>Not paired ({})</h2><p class=\"meta\">Excluded from the paired statistics, never counted as failures.</p>", c.unpaired.len());
    if !c.unpaired.is_empty() {
        b.push_str("<table><thead><tr><th>reason</th><th>task</th><th>rep</th><th>left</th><th>right</th></tr></thead><tbody>");
        let side = |x: Option<Bucket>| {
            x.map_or("—".to_string(), |bk| {
                cell(bk, bk.as_str()) + " " + bk.as_str()
            })
        };
        for u in &c.unpaired {
            let _ = write!(
                b,
                "<tr><td>{}</td><td>{}</td><td class=\"n\">{}</td><td>{}</td><td>{}</td></tr>",
                esc(&u.reason),
                esc(&u.task),
                u.repetition,
                side(u.left),
                side(u.right)
            );
        }
        b.push_str("</tbody></table>");
    }
    run_sections(&mut b, lv, 0, &format!("Left ({}): ", esc(&left.run_key)));
    run_sections(&mut b, rv, 1, &format!("Right ({}): ", esc(&right.run_key)));
    page(
        &format!("akbench comparison: {} vs {}", left.run_key, right.run_key),
        &b,
        serde_json::json!([{ "spans": lv.timeline }, { "spans": rv.timeline }]),
    )
}

#[cfg(test)]
mod tests {
    use super::esc;

    #[test]
    fn embedded_data_cannot_end_its_script_element() {
        let html = super::page("t", "", serde_json::json!(["</script><!--x"]));
        let data = html.split("id=\"akbench-data\">").nth(1).unwrap();
        let data = data.split("</script>").next().unwrap();
        let back: serde_json::Value = serde_json::from_str(data).unwrap();
        assert_eq!(back["timelines"][0], "</script><!--x");
    }

    #[test]
    fn escapes() {
        assert_eq!(
            esc("<a href=\"x\">'&'</a>"),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;"
        );
    }
}
