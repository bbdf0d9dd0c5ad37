//! The walk over a `task.toml` as Harbor 0.25 reads it: every key of every Harbor section
//! (`schema_version`, `[task]`, `[metadata]`, `artifacts`, `[agent]`, `[verifier]` with
//! `[verifier.environment]` and `[[verifier.collect]]`, `[environment]`, `[solution]`,
//! `[[steps]]`) is typed, checked and classified by [`HARBOR_FIELDS`]: it takes effect, it
//! is refused naming the file, the key and the fix (never a raw TOML error), or it is one
//! Harbor itself ignores and is kept as ignored ([`FieldUse`], shown by `akbench task
//! check`). The walk also resolves what the fields say: the release version, the network of
//! each phase (`core::egress`), `environment.env` with its named references, the legacy
//! `memory` / `storage` sizes, and hands the keys akbench's own [`super::TaskFile`] models
//! to serde.

use super::environment::{handling, Handling, UNKNOWN_KEY};
use super::requirements::Requirements;
use super::TaskError;
use crate::egress::{self, Declared, NetworkMode, PhaseNetworks};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;
use toml::{Table, Value};

/// One key of a task's `task.toml` and what akbench does with it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FieldUse {
    /// The dotted key (`environment.gpus`).
    pub field: String,
    /// `applied` or `ignored` (a refused key does not load).
    pub handling: String,
    /// How it takes effect, or why it is ignored.
    pub why: String,
}

/// A value of `[environment] env`: written as it is, or a named reference to a variable of
/// the worker's environment (`${VAR}`, `${VAR:-default}`), resolved when an attempt starts
/// and never stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum EnvValue {
    /// The value as written.
    Literal {
        /// The value.
        value: String,
    },
    /// `${name}` or `${name:-default}`.
    Reference {
        /// The variable read from the worker's environment.
        name: String,
        /// Used when the variable is unset.
        default: Option<String>,
    },
}

impl EnvValue {
    /// Harbor's reading of a value (`resolve_env_vars`): a whole-value `${VAR}` or
    /// `${VAR:-default}` is a reference, anything else a literal.
    pub fn parse(s: &str) -> EnvValue {
        let reference = s
            .strip_prefix("${")
            .and_then(|r| r.strip_suffix('}'))
            .filter(|inner| !inner.is_empty())
            .and_then(|inner| {
                let (name, default) = match inner.split_once(":-") {
                    Some((n, d)) => (n, Some(d.to_string())),
                    None => (inner, None),
                };
                (!name.is_empty() && !name.contains('}') && !name.contains(':'))
                    .then(|| (name.to_string(), default))
            })
            .filter(|(_, d)| !d.as_deref().is_some_and(|d| d.contains('}')));
        match reference {
            Some((name, default)) => EnvValue::Reference { name, default },
            None => EnvValue::Literal {
                value: s.to_string(),
            },
        }
    }
}

/// Resolves `[environment] env` against `lookup` (the worker's environment): a reference to
/// an unset variable without a default is an error naming it and the fix.
pub fn resolve_env(
    env: &BTreeMap<String, EnvValue>,
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<BTreeMap<String, String>, String> {
    let mut out = BTreeMap::new();
    for (k, v) in env {
        let value = match v {
            EnvValue::Literal { value } => value.clone(),
            EnvValue::Reference { name, default } => match (lookup(name), default) {
                (Some(x), _) => x,
                (None, Some(d)) => d.clone(),
                (None, None) => {
                    return Err(format!(
                        "the task's `environment.env` sets {k} from `${{{name}}}`, which is not set on this worker; fix: export {name} in the worker's environment, or give a default (`${{{name}:-value}}`)"
                    ))
                }
            },
        };
        out.insert(k.clone(), value);
    }
    Ok(out)
}

/// What the walk found: the uses, the resolved values, and the table serde reads.
#[derive(Debug)]
pub(super) struct Walked {
    pub uses: Vec<FieldUse>,
    pub version: Option<String>,
    pub harbor_name: Option<String>,
    pub network: PhaseNetworks,
    pub env: BTreeMap<String, EnvValue>,
    pub requirements: Requirements,
    pub skills_dir: Option<String>,
    /// `[[environment.mcp_servers]]` (`super::mcp`).
    pub mcp_servers: Vec<super::mcp::McpServer>,
    /// `[environment.service_images]`: the pins `akbench image build` wrote for the
    /// compose file's `build:` services (`super::world::World::pin_built`).
    pub service_images: BTreeMap<String, crate::image::ImageRef>,
    pub serde: Table,
    /// `[[steps]]` (empty: a one-step task).
    pub steps: Vec<super::steps::StepConfig>,
    /// `multi_step_reward_strategy`, when written.
    pub strategy: Option<super::steps::RewardStrategy>,
}

/// Harbor's task formats akbench reads.
pub const SCHEMA_VERSIONS: &[&str] = &["1.0", "1.1", "1.2", "1.3", "1.4"];

pub(super) struct Walk<'a> {
    pub(super) path: &'a Path,
    pub(super) uses: Vec<FieldUse>,
}

impl Walk<'_> {
    pub(super) fn err(
        &self,
        field: &str,
        problem: impl Into<String>,
        fix: impl Into<String>,
    ) -> TaskError {
        TaskError::field(self.path, field, problem, fix)
    }

    /// Records `field` by its row (unknown: ignored); a refused row is the error.
    pub(super) fn row(&mut self, field: &str) -> Result<(), TaskError> {
        match handling(field) {
            None => self.ignore(field, UNKNOWN_KEY),
            Some(Handling::Applied(why)) => self.apply(field, why),
            Some(Handling::Ignored(why)) => self.ignore(field, why),
            Some(Handling::Refused(fix)) => {
                return Err(self.err(field, "does not take effect in akbench", fix))
            }
        }
        Ok(())
    }

    pub(super) fn apply(&mut self, field: &str, why: &str) {
        self.push(field, "applied", why);
    }

    pub(super) fn ignore(&mut self, field: &str, why: &str) {
        self.push(field, "ignored", why);
    }

    fn push(&mut self, field: &str, handling: &str, why: &str) {
        self.uses.push(FieldUse {
            field: field.to_string(),
            handling: handling.to_string(),
            why: why.to_string(),
        });
    }

    pub(super) fn table<'v>(&self, field: &str, v: &'v Value) -> Result<&'v Table, TaskError> {
        v.as_table().ok_or_else(|| {
            self.err(
                field,
                format!("is a {}, not a table", v.type_str()),
                format!("write it as a `[{field}]` section"),
            )
        })
    }

    pub(super) fn string<'v>(&self, field: &str, v: &'v Value) -> Result<&'v str, TaskError> {
        v.as_str().ok_or_else(|| {
            self.err(
                field,
                format!("is a {}, not a string", v.type_str()),
                "quote the value",
            )
        })
    }

    pub(super) fn number(&self, field: &str, v: &Value) -> Result<f64, TaskError> {
        match v {
            Value::Integer(i) => Ok(*i as f64),
            Value::Float(f) => Ok(*f),
            other => Err(self.err(
                field,
                format!("is a {}, not a number", other.type_str()),
                "write a number such as 600.0",
            )),
        }
    }

    fn whole(&self, field: &str, v: &Value) -> Result<u64, TaskError> {
        match v {
            Value::Integer(i) if *i >= 1 => Ok(*i as u64),
            other => Err(self.err(
                field,
                format!(
                    "is {}, not a whole number of at least 1",
                    crate::limits::elide(&other.to_string())
                ),
                "write a whole number such as 2, or remove it",
            )),
        }
    }

    pub(super) fn strings(&self, field: &str, v: &Value) -> Result<Vec<String>, TaskError> {
        let fix = "write a list of strings such as [\"a\", \"b\"]";
        let Value::Array(items) = v else {
            return Err(self.err(field, format!("is a {}, not a list", v.type_str()), fix));
        };
        items
            .iter()
            .map(|i| {
                i.as_str().map(str::to_string).ok_or_else(|| {
                    self.err(
                        field,
                        format!("holds a {}, not a string", i.type_str()),
                        fix,
                    )
                })
            })
            .collect()
    }

    pub(super) fn string_map(
        &self,
        field: &str,
        v: &Value,
    ) -> Result<BTreeMap<String, String>, TaskError> {
        let t = self.table(field, v)?;
        let mut out = BTreeMap::new();
        for (k, v) in t {
            if !crate::agent::is_env_name(k) {
                return Err(self.err(
                    field,
                    format!(
                        "`{}` is not an environment-variable name",
                        crate::limits::elide(k)
                    ),
                    "use names of letters, digits and `_`, not starting with a digit",
                ));
            }
            let s = v.as_str().ok_or_else(|| {
                self.err(
                    field,
                    format!("`{k}` is a {}, not a string", v.type_str()),
                    "quote the value",
                )
            })?;
            out.insert(k.clone(), s.to_string());
        }
        Ok(out)
    }

    /// One section's `network_mode` / `allowed_hosts` (both checked as Harbor checks them).
    fn network(&self, section: &str, t: &Table) -> Result<Option<NetworkMode>, TaskError> {
        let mode = match t.get("network_mode") {
            Some(v) => Some(self.string(&format!("{section}.network_mode"), v)?),
            None => None,
        };
        let hosts = match t.get("allowed_hosts") {
            Some(v) => Some(self.strings(&format!("{section}.allowed_hosts"), v)?),
            None => None,
        };
        let field = if hosts.is_some() && mode != Some("allowlist") && mode.is_some() {
            format!("{section}.allowed_hosts")
        } else if mode.is_some_and(|m| egress::ModeName::parse(m).is_err()) {
            format!("{section}.network_mode")
        } else {
            format!("{section}.allowed_hosts")
        };
        egress::resolve(&Declared {
            mode,
            allowed_hosts: hosts.as_deref(),
        })
        .map_err(|e| {
            let (problem, fix) = split_fix(
                &e,
                "write `network_mode = \"allowlist\"` with `allowed_hosts` of hostnames, `*.` suffixes, addresses or CIDR ranges",
            );
            self.err(&field, problem, fix)
        })
    }
}

/// `problem; fix: fix` split (the egress messages carry their fix), else `default`.
fn split_fix(msg: &str, default: &str) -> (String, String) {
    match msg.split_once("; fix: ") {
        Some((p, f)) => (p.to_string(), f.to_string()),
        None => (msg.to_string(), default.to_string()),
    }
}

/// Harbor's `_parse_size_to_mb`: `G`, `M` or `K` after a number, any case.
pub fn size_to_mb(s: &str) -> Option<u64> {
    let s = s.trim().to_ascii_uppercase();
    let (num, scale) = if let Some(n) = s.strip_suffix('G') {
        (n, 1024.0)
    } else if let Some(n) = s.strip_suffix('M') {
        (n, 1.0)
    } else if let Some(n) = s.strip_suffix('K') {
        (n, 1.0 / 1024.0)
    } else {
        return None;
    };
    let n: f64 = num.trim().parse().ok()?;
    (n.is_finite() && n >= 0.0).then_some((n * scale) as u64)
}

/// Walks `doc` (the parsed task.toml at `path`); `tasks_workdir` is unused by Harbor's own
/// keys and given for the artifact check.
pub(super) fn walk(path: &Path, doc: &Table) -> Result<Walked, TaskError> {
    let mut w = Walk {
        path,
        uses: Vec::new(),
    };
    let mut serde = Table::new();
    let mut version = None;
    let mut task_version = None;
    let mut harbor_name = None;
    let mut steps = Vec::new();
    let mut strategy = None;
    for (key, value) in doc {
        match key.as_str() {
            "mutation" => {
                own_table(&w, key, value, &[("patch", "string")])?;
                serde.insert(key.clone(), value.clone());
            }
            "id" | "family" => {
                let v = w.string(key, value)?;
                if key == "family" && !["artefact", "interactive", "lifecycle"].contains(&v) {
                    return Err(w.err(
                        key,
                        format!("is `{}`", crate::limits::elide(v)),
                        "write `artefact` (the default), `interactive` or `lifecycle`",
                    ));
                }
                serde.insert(key.clone(), value.clone());
            }
            "version" => {
                let v = w.string("version", value)?;
                version = Some(v.to_string());
                w.row("version")?;
                serde.insert(key.clone(), value.clone());
            }
            "schema_version" => {
                let v = w.string(key, value)?;
                if !SCHEMA_VERSIONS.contains(&v) {
                    return Err(w.err(
                        key,
                        format!(
                            "is `{}`: akbench reads Harbor's task formats 1.0 to 1.4",
                            crate::limits::elide(v)
                        ),
                        "write the format the task is written in (1.0 to 1.4), or run it with the Harbor release that reads it",
                    ));
                }
                w.row(key)?;
            }
            "source" => match value {
                Value::Table(_) => {
                    own_table(&w, key, value, &[("repo", "string"), ("commit", "string")])?;
                    serde.insert(key.clone(), value.clone());
                }
                Value::String(_) => w.row("source")?,
                other => {
                    return Err(w.err(
                        "source",
                        format!("is a {}, not a table", other.type_str()),
                        "write `[source]` with `repo` and `commit`",
                    ))
                }
            },
            "metadata" => {
                w.table(key, value)?;
                w.row(key)?;
                serde.insert(key.clone(), value.clone());
            }
            "multi_step_reward_strategy" => strategy = Some(super::steps::strategy(&mut w, value)?),
            "steps" => match value {
                Value::Array(a) if a.is_empty() => w.ignore(key, "empty: the task is one step"),
                _ => steps = super::steps::walk(&mut w, value, doc)?,
            },
            "artifacts" => artifacts(&mut w, value, doc)?,
            "task" => {
                let t = w.table(key, value)?;
                let (name, v) = task_section(&mut w, t)?;
                harbor_name = Some(name);
                task_version = v;
            }
            "agent" => {
                let t = w.table(key, value)?;
                serde.insert(key.clone(), Value::Table(agent(&mut w, t)?));
            }
            "verifier" => {
                let t = w.table(key, value)?;
                serde.insert(key.clone(), Value::Table(verifier(&mut w, t, doc)?));
            }
            "environment" => {
                w.table(key, value)?;
                serde.insert(key.clone(), value.clone());
            }
            "solution" => {
                let t = w.table(key, value)?;
                let mut kept = Table::new();
                for (k, v) in t {
                    let field = format!("solution.{k}");
                    w.row(&field)?;
                    if k == "env" {
                        kept.insert(k.clone(), v.clone());
                    }
                }
                serde.insert(key.clone(), Value::Table(kept));
            }
            other => w.ignore(other, UNKNOWN_KEY),
        }
    }
    if steps.is_empty() {
        // Harbor: the strategy "only applies to multi-step tasks".
        if let Some(u) = w
            .uses
            .iter_mut()
            .find(|u| u.field == "multi_step_reward_strategy")
        {
            u.handling = "ignored".into();
            u.why = "it applies to multi-step tasks (`[[steps]]`) only".into();
        }
    }
    let empty = Table::new();
    let env_table = match doc.get("environment") {
        Some(v) => w.table("environment", v)?,
        None => &empty,
    };
    let env = environment(&mut w, env_table)?;
    let agent_t = doc.get("agent").and_then(Value::as_table).unwrap_or(&empty);
    let verifier_t = doc
        .get("verifier")
        .and_then(Value::as_table)
        .unwrap_or(&empty);
    let agent_net = w.network("agent", agent_t)?;
    let verifier_net = w.network("verifier", verifier_t)?;
    let verifier_env_net = match verifier_t.get("environment") {
        None => None,
        Some(v) => {
            let t = w.table("verifier.environment", v)?;
            Some(baseline(&mut w, "verifier.environment", t)?.unwrap_or(NetworkMode::Public))
        }
    };
    // Harbor's `public` when the task sets nothing, but `no-network` for akbench's own
    // tasks (a `[source]`): core::egress::unset_default.
    let has_source = doc.get("source").is_some_and(Value::is_table);
    let network = PhaseNetworks::with_default(
        egress::unset_default(has_source),
        env.network,
        agent_net,
        verifier_net.or(verifier_env_net),
    );
    Ok(Walked {
        uses: w.uses,
        version: task_version.or(version),
        harbor_name,
        network,
        env: env.env,
        requirements: env.requirements,
        skills_dir: env.skills_dir,
        mcp_servers: env.mcp_servers,
        service_images: env.service_images,
        serde,
        steps,
        strategy,
    })
}

/// One of akbench's own tables (`[source]`, `[mutation]`, `[verifier.tripwire]`, which
/// Harbor does not have): its keys are `keys` (name, TOML type), each of that type; any
/// other key is refused (a typo there would change what runs).
fn own_table(
    w: &Walk<'_>,
    section: &str,
    value: &Value,
    keys: &[(&str, &str)],
) -> Result<(), TaskError> {
    let t = w.table(section, value)?;
    let names = keys
        .iter()
        .map(|(k, _)| format!("`{k}`"))
        .collect::<Vec<_>>()
        .join(", ");
    for (k, v) in t {
        let field = format!("{section}.{k}");
        match keys.iter().find(|(name, _)| name == k) {
            None => {
                return Err(w.err(
                    &field,
                    format!(
                        "is not a field of akbench's [{section}] (= {})",
                        crate::limits::elide(&v.to_string())
                    ),
                    format!("remove it; [{section}] takes {names}"),
                ))
            }
            Some((_, ty)) if v.type_str() != *ty => {
                return Err(w.err(
                    &field,
                    format!("is a {}, not a {ty}", v.type_str()),
                    format!("write a {ty}"),
                ))
            }
            Some(_) => {}
        }
    }
    Ok(())
}

/// `[task]`: Harbor's package information. The name and version.
fn task_section(w: &mut Walk<'_>, t: &Table) -> Result<(String, Option<String>), TaskError> {
    let Some(name) = t.get("name") else {
        return Err(w.err(
            "task.name",
            "is missing: Harbor requires it when `[task]` is written",
            "add `name = \"org/task-name\"` to [task], or remove the section",
        ));
    };
    let name = w.string("task.name", name)?.to_string();
    let valid = name.split_once('/').is_some_and(|(org, short)| {
        let part = |s: &str| {
            s.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        };
        part(org) && part(short)
    }) && !name.contains("..");
    if !valid {
        return Err(w.err(
            "task.name",
            format!(
                "`{}` is not `org/name` (letters, digits, `.`, `_`, `-`; not starting with a dot; no `..`)",
                crate::limits::elide(&name)
            ),
            "write e.g. `terminal-bench/pypi-server`",
        ));
    }
    let mut version = None;
    for (k, v) in t {
        let field = format!("task.{k}");
        match k.as_str() {
            "name" => {}
            "version" => {
                let s = w.string(&field, v)?;
                if s.is_empty() {
                    return Err(w.err(
                        &field,
                        "is empty",
                        "write the task's version, or remove it",
                    ));
                }
                version = Some(s.to_string());
            }
            "description" => {
                w.string(&field, v)?;
            }
            "keywords" => {
                w.strings(&field, v)?;
            }
            "authors" => authors(w, v)?,
            _ => {}
        }
        w.row(&field)?;
    }
    Ok((name, version))
}

fn authors(w: &Walk<'_>, v: &Value) -> Result<(), TaskError> {
    let field = "task.authors";
    let fix = "write `[[task.authors]]` entries with `name` (and optionally `email`)";
    let Value::Array(items) = v else {
        return Err(w.err(field, format!("is a {}, not a list", v.type_str()), fix));
    };
    for a in items {
        let t = a
            .as_table()
            .ok_or_else(|| w.err(field, format!("holds a {}, not a table", a.type_str()), fix))?;
        match t.get("name") {
            Some(Value::String(_)) => {}
            _ => return Err(w.err(field, "an author has no `name` string", fix)),
        }
        if let Some(e) = t.get("email") {
            w.string("task.authors.email", e)?;
        }
    }
    Ok(())
}

/// `artifacts`: strings and tables, checked as Harbor checks them; each must be a path
/// akbench keeps.
fn artifacts(w: &mut Walk<'_>, v: &Value, doc: &Table) -> Result<(), TaskError> {
    check_artifacts(w, "artifacts", v, doc)?;
    w.row("artifacts")
}

/// The entries of an `artifacts` list (`field`: the top-level one, or a step's), checked as
/// Harbor checks them plus where akbench keeps files.
pub(super) fn check_artifacts(
    w: &Walk<'_>,
    field: &str,
    v: &Value,
    doc: &Table,
) -> Result<(), TaskError> {
    let fix = "write paths as strings, or tables with `source` (and `destination`, `exclude`)";
    let Value::Array(items) = v else {
        return Err(w.err(field, format!("is a {}, not a list", v.type_str()), fix));
    };
    let workdir = doc
        .get("environment")
        .and_then(|e| e.get("workdir"))
        .and_then(Value::as_str)
        .unwrap_or(super::DEFAULT_IMAGE_WORKDIR)
        .trim_end_matches('/')
        .to_string();
    for item in items {
        let source = match item {
            Value::String(s) => s.clone(),
            Value::Table(t) => {
                let source = match t.get("source") {
                    Some(Value::String(s)) => s.clone(),
                    _ => return Err(w.err(field, "an entry has no `source` string", fix)),
                };
                if let Some(d) = t.get("destination") {
                    let d = w.string(&format!("{field}.destination"), d)?;
                    let bad = d.contains('\\')
                        || d.starts_with('/')
                        || d.split('/').any(|p| p == "..")
                        || d.trim_end_matches('/') == "manifest.json";
                    if bad {
                        return Err(w.err(
                            &format!("{field}.destination"),
                            format!("`{}` is not a relative path inside the artifacts folder (no `..`, `\\`, not `manifest.json`)", crate::limits::elide(d)),
                            "write a relative path such as `out/result.txt`, or remove it",
                        ));
                    }
                }
                if let Some(x) = t.get("exclude") {
                    w.strings(&format!("{field}.exclude"), x)?;
                }
                if let Some(s) = t.get("service") {
                    let s = w.string(&format!("{field}.service"), s)?;
                    if s != "main" {
                        return Err(w.err(
                            &format!("{field}.service"),
                            format!("`{}` names a sidecar service, and akbench collects artifacts from the main environment only", crate::limits::elide(s)),
                            "collect from the main environment (remove `service`), or run the task with Harbor",
                        ));
                    }
                }
                source
            }
            other => {
                return Err(w.err(
                    field,
                    format!("holds a {}, not a string or a table", other.type_str()),
                    fix,
                ))
            }
        };
        if source.split('/').any(|p| p == "..") {
            return Err(w.err(
                field,
                format!("`{}` holds a `..` component", crate::limits::elide(&source)),
                "name the path without `..`",
            ));
        }
        let under = |root: &str| source == root || source.starts_with(&format!("{root}/"));
        let kept = !source.starts_with('/') || under(&workdir) || under("/logs/artifacts");
        if !kept {
            return Err(w.err(
                field,
                format!(
                    "`{}` is outside the working folder ({workdir}) and /logs/artifacts, which are what akbench keeps after an attempt",
                    crate::limits::elide(&source)
                ),
                "have the task write it under /logs/artifacts (or the working folder), or remove the entry",
            ));
        }
    }
    Ok(())
}

/// `[agent]`: what serde reads (`timeout_sec`); the rest recorded or refused.
fn agent(w: &mut Walk<'_>, t: &Table) -> Result<Table, TaskError> {
    let mut kept = Table::new();
    for (k, v) in t {
        let field = format!("agent.{k}");
        match k.as_str() {
            "timeout_sec" => {
                w.number(&field, v)?;
                kept.insert(k.clone(), v.clone());
            }
            "user" => {
                kept.insert(k.clone(), Value::String(user(w, &field, v)?));
            }
            _ => {}
        }
        w.row(&field)?;
    }
    Ok(kept)
}

/// A `user` value (a name, `name:group`, a uid or `uid:gid`) as the text the worker resolves
/// in the image; anything else is refused.
fn user(w: &Walk<'_>, field: &str, v: &Value) -> Result<String, TaskError> {
    let text = match v {
        Value::String(s) => s.trim().to_string(),
        Value::Integer(n) if *n >= 0 && *n <= i64::from(u32::MAX) => n.to_string(),
        Value::Integer(n) => {
            return Err(w.err(
                field,
                format!("`{n}` is not a uid"),
                "set a uid from 0 to 4294967295, a user name, or remove it",
            ))
        }
        other => {
            return Err(w.err(
                field,
                format!("is a {}, not a user name or uid", other.type_str()),
                "remove it",
            ))
        }
    };
    let well_formed = !text.is_empty()
        && text.split(':').count() <= 2
        && text.split(':').all(|p| {
            !p.is_empty()
                && p.len() <= 64
                && p.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '$'))
        });
    if !well_formed {
        return Err(w.err(
            field,
            format!(
                "`{}` is not a user name or uid",
                crate::limits::elide(&text)
            ),
            "set a user of the image (`agent`, `1000`, `agent:agent`), or remove it",
        ));
    }
    Ok(text)
}

/// akbench's own keys of `[verifier]`, passed to serde as they are.
const VERIFIER_OWN: &[&str] = &["command", "pass_threshold", "tripwire", "protected_paths"];

/// `[verifier]`: what serde reads; Harbor's keys recorded or refused.
fn verifier(w: &mut Walk<'_>, t: &Table, doc: &Table) -> Result<Table, TaskError> {
    let mut kept = Table::new();
    for (k, v) in t {
        let field = format!("verifier.{k}");
        if VERIFIER_OWN.contains(&k.as_str()) {
            match k.as_str() {
                "command" | "protected_paths" => {
                    w.strings(&field, v)?;
                }
                "pass_threshold" => {
                    w.number(&field, v)?;
                }
                _ => own_table(
                    w,
                    &field,
                    v,
                    &[
                        ("enabled", "boolean"),
                        ("file", "string"),
                        ("code", "string"),
                    ],
                )?,
            }
            kept.insert(k.clone(), v.clone());
            continue;
        }
        match k.as_str() {
            "timeout_sec" => {
                w.number(&field, v)?;
                kept.insert(k.clone(), v.clone());
            }
            "env" => {
                w.string_map(&field, v)?;
                kept.insert(k.clone(), v.clone());
            }
            "environment_mode" => {
                let mode = w.string(&field, v)?;
                if mode != "separate" && mode != "shared" {
                    return Err(w.err(
                        "verifier.environment_mode",
                        format!(
                            "`{}` is not an environment mode",
                            crate::limits::elide(mode)
                        ),
                        "set `separate` (a fresh sandbox) or `shared` (the agent's environment), or remove it",
                    ));
                }
                kept.insert(k.clone(), v.clone());
            }
            "user" => {
                kept.insert(k.clone(), Value::String(user(w, &field, v)?));
            }
            "collect" => {
                let Value::Array(hooks) = v else {
                    return Err(w.err(
                        &field,
                        format!("is a {}, not a list", v.type_str()),
                        "write `[[verifier.collect]]` entries, or remove it",
                    ));
                };
                if !hooks.is_empty() {
                    return Err(w.err(
                        &field,
                        format!("holds {} collect hook(s), which akbench does not run", hooks.len()),
                        "snapshot the state from tests/test.sh (it runs after the agent), or remove the hooks",
                    ));
                }
            }
            "environment" => {
                let e = w.table(&field, v)?;
                verifier_environment(w, e, doc)?;
                continue;
            }
            "network_mode" | "allowed_hosts" => {}
            _ => {}
        }
        w.row(&field)?;
    }
    Ok(kept)
}

/// The network keys an environment table may set.
const NETWORK_KEYS: &[&str] = &["network_mode", "allowed_hosts", "allow_internet"];

/// `[verifier.environment]`: network keys take effect; any other only when equal to
/// `[environment]`'s (grading runs in the task's own image with its resources).
fn verifier_environment(w: &mut Walk<'_>, e: &Table, doc: &Table) -> Result<(), TaskError> {
    let top = doc.get("environment").and_then(Value::as_table);
    for (k, v) in e {
        let field = format!("verifier.environment.{k}");
        if NETWORK_KEYS.contains(&k.as_str()) {
            w.apply(
                &field,
                "the grading runs' network (Harbor's separate verifier environment)",
            );
            continue;
        }
        if top.and_then(|t| t.get(k)) == Some(v) {
            w.apply(&field, "the same as `[environment]`'s, which grading uses");
            continue;
        }
        return Err(w.err(
            &field,
            format!(
                "is {}, unlike `environment.{k}`: grading runs in the task's own image with its own resources",
                crate::limits::elide(&v.to_string())
            ),
            format!("remove it, or set `{k}` to the same value in both sections"),
        ));
    }
    Ok(())
}

/// What `[environment]` resolves to.
struct EnvSection {
    network: Option<NetworkMode>,
    env: BTreeMap<String, EnvValue>,
    requirements: Requirements,
    skills_dir: Option<String>,
    mcp_servers: Vec<super::mcp::McpServer>,
    service_images: BTreeMap<String, crate::image::ImageRef>,
}

/// An environment table's network baseline: `network_mode` / `allowed_hosts`, else the
/// deprecated `allow_internet` (ignored when either is set, as in Harbor).
fn baseline(w: &mut Walk<'_>, section: &str, t: &Table) -> Result<Option<NetworkMode>, TaskError> {
    let declared = w.network(section, t)?;
    let Some(v) = t.get("allow_internet") else {
        return Ok(declared);
    };
    let field = format!("{section}.allow_internet");
    let Value::Boolean(allow) = v else {
        return Err(w.err(
            &field,
            format!("is a {}, not true or false", v.type_str()),
            "write `true` or `false`, or (better) `network_mode`",
        ));
    };
    if t.contains_key("network_mode") || t.contains_key("allowed_hosts") {
        if section == "environment" {
            w.ignore(
                &field,
                "`network_mode` or `allowed_hosts` is set beside it, and Harbor then ignores it",
            );
        }
        return Ok(declared);
    }
    let mode = egress::from_allow_internet(*allow, false)
        .map_err(|e| w.err(&field, e, "remove allow_internet"))?;
    if section == "environment" {
        w.row(&field)?;
    }
    Ok(Some(mode))
}

fn environment(w: &mut Walk<'_>, t: &Table) -> Result<EnvSection, TaskError> {
    let mut requirements = Requirements::default();
    let mut env = BTreeMap::new();
    let mut skills_dir = None;
    let mut mcp_servers = Vec::new();
    let mut service_images = BTreeMap::new();
    let mut memory = None;
    let mut storage = None;
    let gpus = match t.get("gpus") {
        None => 0,
        Some(Value::Integer(n)) if *n >= 0 => *n,
        Some(other) => {
            return Err(w.err(
                "environment.gpus",
                format!(
                    "is {}, not a whole number of at least 0",
                    crate::limits::elide(&other.to_string())
                ),
                "write `gpus = 0` or remove it",
            ))
        }
    };
    for (k, v) in t {
        let field = format!("environment.{k}");
        match k.as_str() {
            "image" | "docker_image" | "workdir" => {
                w.string(&field, v)?;
            }
            "os" => {
                let s = w.string(&field, v)?;
                if !s.eq_ignore_ascii_case("linux") {
                    return Err(w.err(
                        &field,
                        format!("is `{}`, not `linux`", crate::limits::elide(s)),
                        "set `linux` or remove it: akbench runs Linux images only",
                    ));
                }
            }
            "build_timeout_sec" => {
                let secs = w.number(&field, v)?;
                crate::ranges::BUILD_TIMEOUT_SEC.real(secs).map_err(|why| {
                    w.err(
                        &field,
                        why.to_string(),
                        "give 1 to 604800 seconds, or drop it for the default (600)",
                    )
                })?;
            }
            "cpus" => {
                let n = w.number(&field, v)?;
                if !n.is_finite() || n <= 0.0 {
                    return Err(w.err(
                        &field,
                        format!(
                            "is {}, not a number above 0",
                            crate::limits::elide(&v.to_string())
                        ),
                        "write a number of CPUs such as 2, or remove it",
                    ));
                }
                requirements.cpus = Some(n.ceil() as u64);
            }
            "memory_mb" => requirements.memory_mb = Some(w.whole(&field, v)?),
            "storage_mb" => requirements.storage_mb = Some(w.whole(&field, v)?),
            "memory" | "storage" => match v {
                Value::String(s) => {
                    let mb = size_to_mb(s).ok_or_else(|| {
                        w.err(&field, format!("`{}` is not a size", crate::limits::elide(s)), "write a size such as \"2G\", \"512M\" or \"1024K\" (or, better, the `_mb` field)")
                    })?;
                    if k == "memory" {
                        memory = Some(mb);
                    } else {
                        storage = Some(mb);
                    }
                }
                _ => {
                    w.ignore(&field, "not a string, and Harbor ignores it then");
                    continue;
                }
            },
            "gpus" if gpus > 0 => {
                return Err(w.err(
                    &field,
                    format!("asks for {gpus} GPU(s)"),
                    "remove it (or set 0): akbench schedules no GPUs; run GPU tasks with Harbor",
                ));
            }
            "gpu_types" if !matches!(v, Value::Array(_)) => {
                return Err(w.err(
                    &field,
                    format!("is a {}, not a list", v.type_str()),
                    "write a list such as [\"H100\"], or remove it",
                ));
            }
            "mcp_servers" => {
                let parsed = super::mcp::parse(v).map_err(|e| w.err(&e.field, e.problem, e.fix))?;
                for replaced in &parsed.replaced {
                    w.ignore(
                        replaced,
                        "a later server of the same name replaces it (Harbor merges servers by name)",
                    );
                }
                mcp_servers = parsed.servers;
            }
            "env" => {
                let map = w.string_map(&field, v)?;
                env = map
                    .iter()
                    .map(|(k, v)| (k.clone(), EnvValue::parse(v)))
                    .collect();
                for (name, value) in &env {
                    if let EnvValue::Reference { name: var, .. } = value {
                        if !crate::agent::is_env_name(var) {
                            return Err(w.err(&field, format!("`{name}` refers to `{}`, which is not a variable name", crate::limits::elide(var)), "write `${NAME}` or `${NAME:-default}` with a name of letters, digits and `_`"));
                        }
                    }
                }
            }
            "service_images" => {
                for (name, text) in w.table(&field, v)? {
                    let at = format!("{field}.{name}");
                    let text = w.string(&at, text)?;
                    let pin = crate::image::ImageRef::parse(text)
                        .ok()
                        .filter(|r| r.digest.is_some())
                        .ok_or_else(|| {
                            w.err(
                                &at,
                                format!(
                                    "`{}` is not an image pinned by digest",
                                    crate::limits::elide(text)
                                ),
                                "run `akbench image build TASK --push REGISTRY`, which writes `REGISTRY/REPOSITORY:TAG@sha256:...`",
                            )
                        })?;
                    service_images.insert(name.clone(), pin);
                }
            }
            "skills_dir" => {
                let s = w.string(&field, v)?;
                if !s.starts_with('/')
                    || s.split('/').any(|p| p == "..")
                    || s.chars().any(char::is_control)
                {
                    return Err(w.err(
                        &field,
                        format!(
                            "`{}` is not an absolute folder without `..`",
                            crate::limits::elide(s)
                        ),
                        "give the folder in the image, such as `/skills`",
                    ));
                }
                skills_dir = Some(s.to_string());
            }
            "healthcheck" => {
                crate::healthcheck::parse(v).map_err(|why| {
                    w.err(
                        &field,
                        why,
                        "give a table with `command` (a shell command, exit 0 when healthy) and optionally `interval_sec`, `timeout_sec`, `start_period_sec`, `start_interval_sec`, `retries`",
                    )
                })?;
            }
            "allow_internet" => continue, // recorded by `baseline`
            _ => {}
        }
        w.row(&field)?;
    }
    for (legacy, mb, explicit, name) in [
        ("memory", memory, &mut requirements.memory_mb, "memory_mb"),
        (
            "storage",
            storage,
            &mut requirements.storage_mb,
            "storage_mb",
        ),
    ] {
        let Some(mb) = mb else { continue };
        match explicit {
            Some(x) if *x != mb => {
                return Err(w.err(
                    &format!("environment.{legacy}"),
                    format!("is {mb} MiB but `{name}` is {x}"),
                    format!("keep one of the two (`{name}` is the current name)"),
                ))
            }
            _ => *explicit = Some(mb).filter(|m| *m > 0),
        }
    }
    let network = baseline(w, "environment", t)?;
    Ok(EnvSection {
        network,
        env,
        requirements,
        skills_dir,
        mcp_servers,
        service_images,
    })
}

#[cfg(test)]
#[path = "fields_tests.rs"]
mod tests;
