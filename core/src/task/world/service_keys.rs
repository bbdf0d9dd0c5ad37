//! The two structured keys of a compose service: `depends_on` (the list form, and the
//! mapping form with `condition` and `required: true`) and `healthcheck` (`test` in each
//! of its forms, compose durations, Docker's defaults), read for [`super::parse`].

use super::parse::{err, key_str, kind, scalar, string, WorldError};
use super::values::{duration_sec, shell_join};
use super::{Condition, Dependency};
use crate::healthcheck::{Healthcheck, MAX_SEC};
use crate::limits::elide;
use serde_norway::Value;

/// `depends_on`: a list of names (`service_started`), or a mapping of names to `condition`
/// (and `required: true`); a name twice is refused.
pub(super) fn depends_on(name: &str, v: &Value) -> Result<Vec<Dependency>, WorldError> {
    let key = "depends_on";
    let mut out: Vec<Dependency> = Vec::new();
    let mut add = |service: &str, condition: Condition| {
        if out.iter().any(|d| d.service == service) {
            return Err(err(
                Some(name),
                key,
                format!("names `{}` twice", elide(service)),
                "name each service once",
            ));
        }
        out.push(Dependency {
            service: service.to_string(),
            condition,
        });
        Ok(())
    };
    match v {
        Value::Null => {}
        Value::Sequence(items) => {
            for item in items {
                add(&string(name, key, item)?, Condition::ServiceStarted)?;
            }
        }
        Value::Mapping(m) => {
            for (k, entry) in m {
                let target = key_str(Some(name), k)?;
                let at = format!("{key}.{target}");
                let mut condition = Condition::ServiceStarted;
                let Value::Mapping(entry) = entry else {
                    return Err(err(Some(name), &at, format!("is {}, not a mapping", kind(entry)), "write `condition: service_started` (or service_healthy, service_completed_successfully)"));
                };
                for (ek, ev) in entry {
                    match key_str(Some(name), ek)? {
                        "condition" => {
                            condition = match ev.as_str() {
                                Some("service_started") => Condition::ServiceStarted,
                                Some("service_healthy") => Condition::ServiceHealthy,
                                Some("service_completed_successfully") => Condition::ServiceCompletedSuccessfully,
                                _ => return Err(err(Some(name), &format!("{at}.condition"), format!("`{}` is not a condition", elide(&format!("{ev:?}"))), "use service_started, service_healthy or service_completed_successfully")),
                            }
                        }
                        "required" if ev.as_bool() == Some(true) => {}
                        "required" => return Err(err(Some(name), &format!("{at}.required"), "is not `true` (akbench starts every service of the file; none is optional)", "remove it, or write `required: true`")),
                        "restart" => return Err(err(Some(name), &format!("{at}.restart"), "cannot take effect (akbench restarts no service)", "remove it")),
                        other => return Err(err(Some(name), &format!("{at}.{other}"), "is not a key of a dependency", "use `condition` (and `required: true`) only")),
                    }
                }
                add(target, condition)?;
            }
        }
        other => {
            return Err(err(
                Some(name),
                key,
                format!("is {}, not a list or a mapping", kind(other)),
                "list the service names, or map each to its `condition`",
            ))
        }
    }
    Ok(out)
}

/// Docker's defaults for a compose healthcheck (a 0 duration means the default too).
const DOCKER_INTERVAL: f64 = 30.0;
const DOCKER_TIMEOUT: f64 = 30.0;
const DOCKER_START_INTERVAL: f64 = 5.0;
const DOCKER_RETRIES: u32 = 3;

/// `healthcheck`: `None` for `["NONE"]` or `disable: true`; without a `test`, refused.
pub(super) fn healthcheck(name: &str, v: &Value) -> Result<Option<Healthcheck>, WorldError> {
    let s = Some(name);
    let Value::Mapping(m) = v else {
        return Err(err(
            s,
            "healthcheck",
            format!("is {}, not a mapping", kind(v)),
            "write `healthcheck:` with `test:` and its timings",
        ));
    };
    let mut hc = Healthcheck {
        command: String::new(),
        interval_sec: DOCKER_INTERVAL,
        timeout_sec: DOCKER_TIMEOUT,
        start_period_sec: 0.0,
        start_interval_sec: DOCKER_START_INTERVAL,
        retries: DOCKER_RETRIES,
    };
    let mut test: Option<Option<String>> = None;
    let mut disabled = false;
    for (k, val) in m {
        let key = key_str(s, k)?;
        let at = format!("healthcheck.{key}");
        let secs = |default: f64| -> Result<f64, WorldError> {
            let fix = "write a duration such as `10s`, `1m30s` or `500ms`";
            let text = string(name, &at, val).map_err(|e| err(s, &at, e.problem, fix))?;
            let x = duration_sec(&text).map_err(|e| err(s, &at, e, fix))?;
            if x > MAX_SEC {
                return Err(err(s, &at, format!("`{text}` is longer than a day"), fix));
            }
            Ok(if x == 0.0 { default } else { x })
        };
        match key {
            "test" => test = Some(health_test(name, val)?),
            "disable" => {
                disabled = val.as_bool().ok_or_else(|| {
                    err(
                        s,
                        &at,
                        "is not a boolean",
                        "write `disable: true`, or remove it",
                    )
                })?
            }
            "interval" => hc.interval_sec = secs(DOCKER_INTERVAL)?,
            "timeout" => hc.timeout_sec = secs(DOCKER_TIMEOUT)?,
            "start_period" => hc.start_period_sec = secs(0.0)?,
            "start_interval" => hc.start_interval_sec = secs(DOCKER_START_INTERVAL)?,
            "retries" => {
                hc.retries = match val.as_u64() {
                    Some(0) => DOCKER_RETRIES,
                    Some(n) if n <= 1000 => n as u32,
                    _ => {
                        return Err(err(
                            s,
                            &at,
                            format!(
                                "`{}` is not a whole number from 0 to 1000",
                                elide(&format!("{val:?}"))
                            ),
                            "write a count such as `3`",
                        ))
                    }
                }
            }
            other if other.starts_with("x-") => {}
            _ => {
                return Err(err(
                    s,
                    &at,
                    "is not a key of a healthcheck",
                    "use test, interval, timeout, start_period, start_interval, retries or disable",
                ))
            }
        }
    }
    match (disabled, test) {
        (true, Some(Some(_))) => Err(err(
            s,
            "healthcheck",
            "sets both `disable: true` and a `test`",
            "remove one of them",
        )),
        (true, _) | (false, Some(None)) => Ok(None),
        (false, Some(Some(command))) => Ok(Some(Healthcheck { command, ..hc })),
        (false, None) => Err(err(
            s,
            "healthcheck",
            "has no `test` (akbench does not read the image's HEALTHCHECK)",
            "write `test: [\"CMD\", ...]`, or remove `healthcheck`",
        )),
    }
}

/// A healthcheck's `test` as one shell command; `None` for `["NONE"]`.
fn health_test(name: &str, v: &Value) -> Result<Option<String>, WorldError> {
    let at = "healthcheck.test";
    let bad = |problem: &str| {
        err(Some(name), at, problem.to_string(), "write `[\"CMD\", \"prog\", \"arg\"]`, `[\"CMD-SHELL\", \"a shell command\"]`, a string (a shell command), or `[\"NONE\"]`")
    };
    let words: Vec<String> = match v {
        Value::String(s) if s.trim().is_empty() => return Err(bad("is empty")),
        Value::String(s) => return Ok(Some(s.clone())),
        Value::Sequence(items) => items
            .iter()
            .map(|x| scalar(name, at, x))
            .collect::<Result<_, _>>()?,
        other => return Err(bad(&format!("is {}", kind(other)))),
    };
    match words.split_first() {
        Some((first, [])) if first == "NONE" => Ok(None),
        Some((first, rest)) if first == "CMD" && !rest.is_empty() => Ok(Some(shell_join(rest))),
        Some((first, [cmd])) if first == "CMD-SHELL" && !cmd.trim().is_empty() => {
            Ok(Some(cmd.clone()))
        }
        Some((first, _)) if ["NONE", "CMD", "CMD-SHELL"].contains(&first.as_str()) => {
            Err(bad(&format!("`{first}` has the wrong number of arguments")))
        }
        Some((first, _)) => Err(bad(&format!(
            "starts with `{}`, not CMD, CMD-SHELL or NONE",
            elide(first)
        ))),
        None => Err(bad("is an empty list")),
    }
}
