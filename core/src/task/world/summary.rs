//! What `akbench task check` shows of a world: each service's name, pinned image (or the
//! folder it is built from, while unbuilt) and `depends_on`, and what `main` waits for, as text lines and as JSON.

use super::{Dependency, World, MAIN};
use serde::Serialize;

/// One member of the world as shown.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ServiceSummary {
    /// The service name (`main` for the task's environment).
    pub name: String,
    /// Its image pinned by digest; `None` for `main` (the task's image).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// The build context under environment/ of a service akbench builds (`build:`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub build: Option<String>,
    /// The services it waits for, each with its condition.
    pub depends_on: Vec<Dependency>,
}

impl World {
    /// Every sidecar in the compose file's order, then `main` when it waits for any.
    pub fn summary(&self) -> Vec<ServiceSummary> {
        let mut out: Vec<ServiceSummary> = self
            .services
            .iter()
            .map(|s| ServiceSummary {
                name: s.name.clone(),
                image: s.image.as_ref().map(|i| match &i.digest {
                    Some(d) => i.pinned(d),
                    None => i.to_string(),
                }),
                build: s.build.as_ref().map(|b| b.context.clone()),
                depends_on: s.depends_on.clone(),
            })
            .collect();
        if !self.main_depends_on.is_empty() {
            out.push(ServiceSummary {
                name: MAIN.to_string(),
                image: None,
                build: None,
                depends_on: self.main_depends_on.clone(),
            });
        }
        out
    }

    /// [`World::summary`] as text, one line a member: `db reg/db@sha256:...`, then
    /// `, depends on api (service_healthy)` when it waits for any.
    pub fn summary_lines(&self) -> Vec<String> {
        self.summary()
            .into_iter()
            .map(|s| {
                let deps = s
                    .depends_on
                    .iter()
                    .map(|d| {
                        let c = serde_json::to_value(d.condition)
                            .ok()
                            .and_then(|v| v.as_str().map(str::to_string))
                            .unwrap_or_default();
                        format!("{} ({c})", d.service)
                    })
                    .collect::<Vec<_>>();
                let image = match (&s.image, &s.build) {
                    (Some(i), _) => i.clone(),
                    (None, Some(b)) => format!("(built from environment/{b}; not built yet)"),
                    (None, None) => "(the task's environment)".into(),
                };
                format!(
                    "{} {image}{}",
                    s.name,
                    if deps.is_empty() {
                        String::new()
                    } else {
                        format!(", depends on {}", deps.join(", "))
                    }
                )
            })
            .collect()
    }
}
