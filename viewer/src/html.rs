//! HTML building blocks of the viewer: escaping, the page frame, and small renderers shared
//! by the pages (progress bar, percentages). Every string that came from a record or a query
//! goes through [`esc`] (text and attribute values alike).

use akbench_core::rates::Pct;
use std::fmt::Write as _;

pub use akbench_core::html::esc;

/// Percent-encodes `s` for one path segment or query value.
pub fn url(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// Percent-encodes a trial key for a path (its `/` kept as separators).
pub fn url_path(s: &str) -> String {
    s.split('/').map(url).collect::<Vec<_>>().join("/")
}

/// A whole page: the frame, the stylesheet and script, `title` and `body`.
pub fn page(title: &str, crumbs: &[(String, String)], body: &str) -> String {
    let mut nav = String::from("<a href=\"/\">runs</a>");
    for (href, label) in crumbs {
        let _ = write!(nav, " / <a href=\"{}\">{}</a>", esc(href), esc(label));
    }
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{t} · akbench</title>\
         <script src=\"/assets/guard.js\"></script>\
         <link rel=\"stylesheet\" href=\"/assets/style.css\">\
         <script src=\"/assets/app.js\" defer></script></head>\
         <body><header><span class=\"brand\">akbench</span> <nav>{nav}</nav></header>\
         <main>{body}</main><pre id=\"console-errors\" hidden></pre></body></html>\n",
        t = esc(title),
    )
}

/// `12.3%` or `n/a`.
pub fn pct(r: Option<f64>) -> String {
    Pct(r).to_string()
}

/// The progress bar of a run: `done` of `planned` (unknown plan: the count alone).
pub fn progress_bar(done: u64, planned: Option<u64>) -> String {
    let (width, label) = match planned {
        Some(p) if p > 0 => (
            (done as f64 / p as f64 * 100.0).min(100.0),
            format!("{done} / {p} trials"),
        ),
        _ => (100.0, format!("{done} trials (no stored plan)")),
    };
    format!(
        "<div class=\"progress\" id=\"progress\" data-done=\"{done}\" data-planned=\"{p}\"{title}>\
         <div class=\"bar\" style=\"width:{width:.1}%\"></div>\
         <span class=\"label\" id=\"progress-label\">{label}</span></div>",
        p = planned.map(|p| p.to_string()).unwrap_or_default(),
        title = if planned.is_some_and(|p| p > 0) {
            ""
        } else {
            " title=\"the planned count comes from the run's plan in the evidence store \
             (--store-root): a sweep stores one, run single makes none\""
        },
        label = esc(&label),
    )
}

/// The class of a bucket's badge.
pub fn badge(bucket: &str) -> String {
    format!("<span class=\"badge b-{b}\">{b}</span>", b = esc(bucket))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_neutralises_markup_and_attributes() {
        let cases = [
            (
                "<script>alert(1)</script>",
                "&lt;script&gt;alert(1)&lt;/script&gt;",
            ),
            ("a\" onmouseover=\"x", "a&quot; onmouseover=&quot;x"),
            ("it's & done", "it&#39;s &amp; done"),
            ("plain", "plain"),
        ];
        for (input, want) in cases {
            assert_eq!(esc(input), want);
        }
    }

    #[test]
    fn urls_encode_everything_but_unreserved() {
        assert_eq!(url("a b/c?d"), "a%20b%2Fc%3Fd");
        assert_eq!(url_path("run/task-1/oracle/r0"), "run/task-1/oracle/r0");
        assert_eq!(url_path("run/<x>/y"), "run/%3Cx%3E/y");
    }

    #[test]
    fn progress_bar_without_a_plan_says_so() {
        assert!(progress_bar(3, Some(6)).contains("width:50.0%"));
        assert!(progress_bar(3, None).contains("no stored plan"));
    }
}
