//! Harbor's `[environment] healthcheck` (Docker's `HEALTHCHECK` semantics, Harbor 0.25's
//! `HealthcheckConfig`): a command run in the task's environment after it started and
//! before the agent, until it exits 0. During `start_period_sec` failures do not count
//! (the next try is `start_interval_sec` later); after it, `retries` consecutive failures
//! (each try `interval_sec` apart, each at most `timeout_sec`) make the environment
//! unhealthy. [`parse`] reads the table; [`next`] is the rule, table-tested.

/// A healthcheck, with Harbor's defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct Healthcheck {
    /// A shell command (`sh -c`); exit 0 is healthy.
    pub command: String,
    /// Seconds between tries after the start period (5).
    pub interval_sec: f64,
    /// Longest a try may run, seconds (30).
    pub timeout_sec: f64,
    /// Seconds from the start during which failures do not count (0).
    pub start_period_sec: f64,
    /// Seconds between tries during the start period (5).
    pub start_interval_sec: f64,
    /// Consecutive failures (after the start period) that make it unhealthy (3).
    pub retries: u32,
}

/// The largest number of seconds a healthcheck setting may hold (a day).
pub const MAX_SEC: f64 = 86_400.0;

/// Reads `[environment] healthcheck`; the error names the key and what is wrong.
pub fn parse(v: &toml::Value) -> Result<Healthcheck, String> {
    let t = v
        .as_table()
        .ok_or_else(|| format!("is a {}, not a table", v.type_str()))?;
    for k in t.keys() {
        if ![
            "command",
            "interval_sec",
            "timeout_sec",
            "start_period_sec",
            "start_interval_sec",
            "retries",
        ]
        .contains(&k.as_str())
        {
            return Err(format!("has the unknown key `{}`", crate::limits::elide(k)));
        }
    }
    let command = match t.get("command") {
        Some(toml::Value::String(s)) if !s.trim().is_empty() => s.clone(),
        Some(toml::Value::String(_)) => return Err("has an empty `command`".into()),
        Some(other) => return Err(format!("`command` is a {}, not a string", other.type_str())),
        None => return Err("has no `command`".into()),
    };
    let secs = |k: &str, default: f64, zero_ok: bool| -> Result<f64, String> {
        let x = match t.get(k) {
            None => return Ok(default),
            Some(toml::Value::Float(f)) => *f,
            Some(toml::Value::Integer(i)) => *i as f64,
            Some(other) => return Err(format!("`{k}` is a {}, not a number", other.type_str())),
        };
        if !x.is_finite() || x < 0.0 || (!zero_ok && x == 0.0) || x > MAX_SEC {
            return Err(format!(
                "`{k}` = {x} is outside {}{MAX_SEC} seconds",
                if zero_ok {
                    "0 to "
                } else {
                    "more than 0, at most "
                }
            ));
        }
        Ok(x)
    };
    let retries = match t.get("retries") {
        None => 3,
        Some(toml::Value::Integer(i)) if (1..=1000).contains(i) => *i as u32,
        Some(other) => {
            return Err(format!(
                "`retries` = {} is not a whole number from 1 to 1000",
                crate::limits::elide(&other.to_string())
            ))
        }
    };
    Ok(Healthcheck {
        command,
        interval_sec: secs("interval_sec", 5.0, true)?,
        timeout_sec: secs("timeout_sec", 30.0, false)?,
        start_period_sec: secs("start_period_sec", 0.0, true)?,
        start_interval_sec: secs("start_interval_sec", 5.0, true)?,
        retries,
    })
}

/// What to do after a try.
#[derive(Debug, Clone, PartialEq)]
pub enum Next {
    /// It passed: start the agent.
    Healthy,
    /// Try again after this many seconds.
    Retry(f64),
    /// `retries` consecutive failures after the start period: the environment is
    /// unhealthy (an infrastructure error, never the agent's).
    Unhealthy(String),
}

/// The rule after a try that started `started_at` seconds after the environment did and
/// `passed` or not; `failures` counts the failures that counted so far (updated).
pub fn next(hc: &Healthcheck, started_at: f64, passed: bool, failures: &mut u32) -> Next {
    if passed {
        return Next::Healthy;
    }
    if started_at < hc.start_period_sec {
        return Next::Retry(hc.start_interval_sec);
    }
    *failures += 1;
    if *failures >= hc.retries {
        return Next::Unhealthy(format!(
            "the environment's healthcheck failed {} consecutive times after its start period ({}s): `{}`",
            hc.retries,
            hc.start_period_sec,
            crate::limits::elide(&hc.command)
        ));
    }
    Next::Retry(hc.interval_sec)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hc(toml_text: &str) -> Result<Healthcheck, String> {
        let v: toml::Value = toml::from_str(&format!("h = {toml_text}")).unwrap();
        parse(&v["h"])
    }

    #[test]
    fn the_table_is_read_with_harbors_defaults_and_bad_values_are_named() {
        let d = hc("{ command = \"true\" }").unwrap();
        assert_eq!(
            d,
            Healthcheck {
                command: "true".into(),
                interval_sec: 5.0,
                timeout_sec: 30.0,
                start_period_sec: 0.0,
                start_interval_sec: 5.0,
                retries: 3
            }
        );
        let all = hc("{ command = \"curl -f localhost\", interval_sec = 1, timeout_sec = 2.5, start_period_sec = 10, start_interval_sec = 0.5, retries = 7 }").unwrap();
        assert_eq!(
            (
                all.interval_sec,
                all.timeout_sec,
                all.start_period_sec,
                all.start_interval_sec,
                all.retries
            ),
            (1.0, 2.5, 10.0, 0.5, 7)
        );
        for (bad, needle) in [
            ("\"true\"", "not a table"),
            ("{ }", "no `command`"),
            ("{ command = \" \" }", "empty `command`"),
            ("{ command = 1 }", "not a string"),
            ("{ command = \"x\", interval_sec = \"5\" }", "not a number"),
            ("{ command = \"x\", timeout_sec = 0 }", "`timeout_sec` = 0"),
            ("{ command = \"x\", interval_sec = -1 }", "outside"),
            ("{ command = \"x\", start_period_sec = 1e9 }", "outside"),
            ("{ command = \"x\", retries = 0 }", "from 1 to 1000"),
            ("{ command = \"x\", retries = 1.5 }", "from 1 to 1000"),
            (
                "{ command = \"x\", test = [\"CMD\"] }",
                "unknown key `test`",
            ),
        ] {
            let e = hc(bad).unwrap_err();
            assert!(e.contains(needle), "{bad}: {e}");
        }
    }

    #[test]
    fn failures_in_the_start_period_do_not_count_then_retries_in_a_row_fail() {
        let h = hc("{ command = \"x\", start_period_sec = 10, retries = 2, interval_sec = 1, start_interval_sec = 0.5 }").unwrap();
        let mut f = 0;
        // (started at, passed) → what comes next
        let steps: &[(f64, bool, Next)] = &[
            (0.0, false, Next::Retry(0.5)),
            (9.9, false, Next::Retry(0.5)),
            (10.0, false, Next::Retry(1.0)),
            (11.0, true, Next::Healthy),
        ];
        for (at, passed, want) in steps {
            assert_eq!(next(&h, *at, *passed, &mut f), *want, "at {at}");
        }
        let mut f = 0;
        assert_eq!(next(&h, 12.0, false, &mut f), Next::Retry(1.0));
        match next(&h, 13.0, false, &mut f) {
            Next::Unhealthy(why) => assert!(
                why.contains("2 consecutive") && why.contains("`x`"),
                "{why}"
            ),
            other => panic!("{other:?}"),
        }
    }
}
