//! Pure helpers of telemetry shared by the binaries: bounded metric labels
//! ([`cause_class`]) and the Prometheus text form of `prometheus-client`'s OpenMetrics
//! output ([`openmetrics_to_text`]).

/// OpenMetrics text (what `prometheus-client` writes) as Prometheus text 0.0.4: a counter
/// family's `# HELP`/`# TYPE` lines name its `_total` samples, and `# EOF`/`# UNIT` go.
pub fn openmetrics_to_text(openmetrics: &str) -> String {
    let counters: std::collections::HashSet<&str> = openmetrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(openmetrics.len() + 64);
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let meta = ["# HELP ", "# TYPE "]
            .into_iter()
            .find_map(|p| line.strip_prefix(p).map(|rest| (p, rest)));
        match meta {
            Some((prefix, rest)) => {
                let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
                let suffix = if counters.contains(name) && !name.ends_with("_total") {
                    "_total"
                } else {
                    ""
                };
                out.push_str(prefix);
                out.push_str(name);
                out.push_str(suffix);
                out.push(' ');
                out.push_str(tail);
            }
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

/// A bounded label for a free-text cause: its first word (up to `:`, `,`, `(` or a space),
/// lowercased, with anything but `[a-z0-9_]` as `_`, at most 32 characters; `none` when
/// empty. "lease expired" -> `lease`, "timeout: agent ran 600 s" -> `timeout`.
pub fn cause_class(cause: &str) -> String {
    let word = cause
        .trim()
        .split(|c: char| c.is_whitespace() || matches!(c, ':' | ',' | '(' | ';'))
        .next()
        .unwrap_or("");
    if word.is_empty() {
        return "none".into();
    }
    word.chars()
        .take(32)
        .map(|c| {
            let c = c.to_ascii_lowercase();
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cause_classes_are_short_and_bounded() {
        for (cause, class) in [
            ("", "none"),
            ("   ", "none"),
            ("lease expired", "lease"),
            ("timeout: agent ran 600 s", "timeout"),
            ("Agent-Exit(1)", "agent_exit"),
            (
                "credential_missing, ANTHROPIC_API_KEY",
                "credential_missing",
            ),
            ("é", "_"),
        ] {
            assert_eq!(cause_class(cause), class, "{cause:?}");
        }
        assert_eq!(cause_class(&"x".repeat(100)).len(), 32);
    }

    #[test]
    fn openmetrics_becomes_text_0_0_4() {
        let om = "# HELP a_b Help.\n# TYPE a_b counter\n# UNIT a_b x\na_b_total 1\n\
                  # HELP g G.\n# TYPE g gauge\ng 2\n# EOF\n";
        assert_eq!(
            openmetrics_to_text(om),
            "# HELP a_b_total Help.\n# TYPE a_b_total counter\na_b_total 1\n\
             # HELP g G.\n# TYPE g gauge\ng 2\n"
        );
    }
}
