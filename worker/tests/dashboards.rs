//! The Grafana dashboards under `deploy/observability/` load as JSON, have panels with
//! queries, and query only metrics the coordinator and the workers export.

use std::path::Path;

/// Every sample name a query may use: the exported names, plus `_bucket`, `_sum` and
/// `_count` of the histograms.
fn exported() -> Vec<String> {
    let mut names = Vec::new();
    let histograms = [
        "akbench_dispatch_latency_seconds",
        "akbench_scheduler_db_seconds",
        "akbench_control_seconds",
        "akbench_worker_phase_seconds",
        "akbench_worker_workspace_seconds",
    ];
    for n in akbench_coordinator::metrics::NAMES
        .iter()
        .chain(akbench_worker::daemon::metrics::NAMES.iter())
    {
        names.push(n.to_string());
        if histograms.contains(n) {
            for s in ["_bucket", "_sum", "_count"] {
                names.push(format!("{n}{s}"));
            }
        }
    }
    names
}

/// The `akbench_*` identifiers of a PromQL expression.
fn metric_names(expr: &str) -> Vec<String> {
    let mut out = Vec::new();
    let bytes = expr.as_bytes();
    let mut i = 0;
    while let Some(at) = expr[i..].find("akbench_") {
        let start = i + at;
        let preceded =
            start > 0 && (bytes[start - 1].is_ascii_alphanumeric() || bytes[start - 1] == b'_');
        let mut end = start;
        while end < bytes.len() && (bytes[end].is_ascii_alphanumeric() || bytes[end] == b'_') {
            end += 1;
        }
        if !preceded {
            out.push(expr[start..end].to_string());
        }
        i = end;
    }
    out
}

fn exprs(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, v) in m {
                match (k.as_str(), v) {
                    ("expr", serde_json::Value::String(e)) => out.push(e.clone()),
                    _ => exprs(v, out),
                }
            }
        }
        serde_json::Value::Array(a) => a.iter().for_each(|v| exprs(v, out)),
        _ => {}
    }
}

#[test]
fn dashboards_load_and_query_only_exported_metrics() {
    let dir =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/observability/grafana/dashboards");
    let exported = exported();
    let mut dashboards = 0;
    let mut used = std::collections::BTreeSet::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        dashboards += 1;
        let text = std::fs::read_to_string(&path).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()));
        assert!(
            v["uid"].as_str().is_some_and(|u| !u.is_empty()),
            "{}",
            path.display()
        );
        assert!(v["title"].as_str().is_some(), "{}", path.display());
        let panels = v["panels"].as_array().expect("panels");
        assert!(!panels.is_empty(), "{}", path.display());
        for p in panels {
            let mut found = Vec::new();
            exprs(p, &mut found);
            assert!(
                !found.is_empty(),
                "panel {} of {} has no query",
                p["title"],
                path.display()
            );
            for e in found {
                let names = metric_names(&e);
                assert!(
                    !names.is_empty(),
                    "{}: query {e} names no akbench metric",
                    path.display()
                );
                for n in names {
                    assert!(
                        exported.contains(&n),
                        "{}: query {e} uses {n}, which nothing exports",
                        path.display()
                    );
                    used.insert(n);
                }
            }
        }
    }
    assert_eq!(
        dashboards, 4,
        "sweep overview, workers, coordinator, provider routes"
    );
    assert!(used.len() >= 10, "{used:?}");
}

#[test]
fn metric_names_are_found_in_queries() {
    assert_eq!(
        metric_names("sum by (le) (rate(akbench_x_bucket[5m])) / xakbench_no + akbench_y"),
        ["akbench_x_bucket", "akbench_y"]
    );
}
