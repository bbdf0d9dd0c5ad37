//! Agent descriptors and agent conditions.
//!
//! A descriptor is a TOML file `<agents root>/<name>.toml` naming an adapter (the code that
//! launches the agent and reads its output) and the settings it needs. Credentials are
//! declared by environment-variable *name*; their values never enter a descriptor, a
//! condition, a record or a log. See docs/agents.md.
//!
//! Layer: imports `observe` and `paths` (and leaves such as `ids`, `limits`), never `task`,
//! `manifest` or `record`, which import it.

use crate::bounded_read::{read, Links};
use crate::digest::{digest_bytes, digest_of};
use crate::ids::is_valid_name;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub mod adapters;
pub mod install;
pub mod price;

/// The largest descriptor accepted, in bytes.
pub const MAX_DESCRIPTOR_BYTES: u64 = crate::bounded_read::ReadKind::Config.cap();
/// The largest `scripted` adapter script accepted, in bytes.
pub const MAX_SCRIPT_BYTES: u64 = crate::bounded_read::ReadKind::Script.cap();

/// A descriptor as written on disk.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentDescriptor {
    /// Agent name; defaults to the file stem and must match it when given.
    #[serde(default)]
    pub name: Option<String>,
    /// Adapter: `command`, `scripted`, `oracle`, `claude-code` or `codex`.
    pub adapter: String,
    /// One line saying what this agent is.
    #[serde(default)]
    pub description: Option<String>,
    /// Model identifier passed to the adapter.
    #[serde(default)]
    pub model: Option<String>,
    /// Environment-variable names of credentials the agent needs.
    #[serde(default)]
    pub credentials: Vec<String>,
    /// Argv template for the `command` adapter (placeholders: `{instruction}`,
    /// `{instruction_file}`, `{workspace}`, `{home}`, `{model}`).
    #[serde(default)]
    pub command: Option<Vec<String>>,
    /// Script for the `scripted` adapter, relative to the descriptor's folder.
    #[serde(default)]
    pub script: Option<String>,
    /// Program override for `claude-code` / `codex` (default `claude` / `codex`).
    #[serde(default)]
    pub program: Option<String>,
    /// Extra arguments appended by the `claude-code` / `codex` adapters.
    #[serde(default)]
    pub extra_args: Vec<String>,
    /// Non-secret environment variables set for the agent.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Adapter parameters (e.g. `max_turns`).
    #[serde(default)]
    pub parameters: BTreeMap<String, serde_json::Value>,
    /// Endpoints (`host:port`) the agent may reach from the sandbox, e.g. its provider's
    /// `api.anthropic.com:443`; nothing else is reachable. Empty: no network at all.
    #[serde(default)]
    pub network: Vec<String>,
    /// Loopback ports of well-known local services (e.g. 5432) that `network` may name all
    /// the same ([`crate::endpoint::LOCAL_SERVICE_PORTS`]); default none.
    #[serde(default)]
    pub allow_local_ports: Vec<u16>,
    /// `[install]`: the agent is installed by akbench (its known package at its pinned
    /// version, or `package` / `version` given here) into the worker's agent cache and run
    /// from there, in the sandbox and in any task image, its runtime included. Absent: the
    /// program is found on `PATH` (or `program`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install: Option<install::InstallSpec>,
    /// The price of the agent's tokens, for a CLI that reports no cost: the cost is then
    /// computed from the attempt's token counts and marked so ([`price`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price: Option<price::Price>,
}

/// The exact agent condition a trial runs under; its digest makes runs comparable.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct AgentCondition {
    /// Agent name.
    pub name: String,
    /// Adapter name.
    pub adapter: String,
    /// Model, when set.
    pub model: Option<String>,
    /// Credential variable names (never values).
    pub credentials: Vec<String>,
    /// Digest of the descriptor file content and, for `scripted`, of the script.
    pub descriptor_digest: String,
    /// Digest of this condition (all fields above).
    pub digest: String,
}

/// A loaded, validated descriptor.
#[derive(Debug, Clone)]
pub struct Agent {
    /// Agent name.
    pub name: String,
    /// The descriptor file (absolute).
    pub file: PathBuf,
    /// The folder holding the descriptor.
    pub dir: PathBuf,
    /// The parsed descriptor.
    pub descriptor: AgentDescriptor,
    /// The agent condition.
    pub condition: AgentCondition,
}

/// An agent descriptor failed to load.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AgentError {
    /// No descriptor with that name.
    #[error("failed to find agent `{name}`: no {} (known agents: {known}); fix: check the name or pass --agents-root", file.display())]
    Unknown {
        /// Requested name.
        name: String,
        /// Where it was looked for.
        file: PathBuf,
        /// Names that do exist.
        known: String,
    },
    /// The descriptor is invalid.
    #[error("failed to load agent descriptor {}: {problem}", file.display())]
    Invalid {
        /// The descriptor file.
        file: PathBuf,
        /// What is wrong and how to fix it.
        problem: String,
    },
}

/// True for a portable environment-variable name.
pub fn is_env_name(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

impl Agent {
    /// Loads `<agents_root>/<name>.toml`.
    pub fn load(agents_root: &Path, name: &str) -> Result<Agent, AgentError> {
        let file = crate::paths::absolute(&agents_root.join(format!("{name}.toml")));
        // Anything by that name (a FIFO, a link) is the descriptor, refused by kind below.
        if !is_valid_name(name) || std::fs::symlink_metadata(&file).is_err() {
            return Err(AgentError::Unknown {
                name: name.to_string(),
                file,
                known: list_agents(agents_root).join(", "),
            });
        }
        Self::load_file(&file)
    }

    /// Loads a descriptor file.
    pub fn load_file(file: &Path) -> Result<Agent, AgentError> {
        let file = crate::paths::absolute(file);
        let invalid = |problem: String| AgentError::Invalid {
            file: file.clone(),
            problem,
        };
        // Not followed: a descriptor that is a link to another file (say /etc/passwd) would
        // have that file parsed and its first line echoed in the error.
        let bytes = read(&file, MAX_DESCRIPTOR_BYTES, Links::Refuse).map_err(|e| {
            invalid(format!(
                "{e}; fix: a descriptor is a regular TOML file of at most {MAX_DESCRIPTOR_BYTES} bytes"
            ))
        })?;
        let text = crate::bounded_read::text(bytes.clone()).map_err(|e| invalid(e.to_string()))?;
        let descriptor: AgentDescriptor = toml::from_str(&text)
            .map_err(|e| invalid(crate::limits::elide_lines(e.to_string().trim_end())))?;
        let stem = file
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let name = descriptor.name.clone().unwrap_or_else(|| stem.clone());
        if name != stem {
            return Err(invalid(format!(
                "field `name`: says `{name}` but the file is `{stem}.toml`; fix: make them agree or drop `name`"
            )));
        }
        if !is_valid_name(&name) {
            return Err(invalid(format!(
                "field `name`: `{name}` is not a valid agent name; fix: use letters, digits, `.`, `_`, `-`"
            )));
        }
        for c in &descriptor.credentials {
            if !is_env_name(c) {
                return Err(invalid(format!(
                    "field `credentials`: `{c}` is not an environment-variable name; fix: list variable names such as ANTHROPIC_API_KEY, never values"
                )));
            }
        }
        for k in descriptor.env.keys() {
            if !is_env_name(k) {
                return Err(invalid(format!(
                    "field `env`: `{k}` is not an environment-variable name"
                )));
            }
            if descriptor.credentials.contains(k) {
                return Err(invalid(format!(
                    "field `env`: `{k}` is also a declared credential; fix: credentials come from the launching environment only, remove it from `env`"
                )));
            }
        }
        crate::endpoint::check_list(&descriptor.network, &descriptor.allow_local_ports)
            .map_err(|e| invalid(format!("field `network`: {e}")))?;
        let dir = file.parent().map(Path::to_path_buf).unwrap_or_default();
        let mut descriptor_digest = digest_bytes(&bytes);
        if let Some(script) = &descriptor.script {
            let p = crate::paths::inside(&dir, script).ok_or_else(|| {
                invalid(format!(
                    "field `script`: `{script}` leaves the descriptor's folder; fix: give a relative path inside it"
                ))
            })?;
            let sb = read(&p, MAX_SCRIPT_BYTES, Links::Refuse).map_err(|e| {
                invalid(format!(
                    "field `script`: {} {e}; fix: point it at a script (a regular file of at most {MAX_SCRIPT_BYTES} bytes) in the descriptor's folder",
                    p.display()
                ))
            })?;
            descriptor_digest = digest_of(&[descriptor_digest, digest_bytes(&sb)]);
        }
        let mut condition = AgentCondition {
            name: name.clone(),
            adapter: descriptor.adapter.clone(),
            model: descriptor.model.clone(),
            credentials: descriptor.credentials.clone(),
            descriptor_digest,
            digest: String::new(),
        };
        condition.digest = digest_of(&condition);
        Ok(Agent {
            name,
            dir,
            file,
            descriptor,
            condition,
        })
    }
}

/// Names of the descriptors under `agents_root`, sorted.
pub fn list_agents(agents_root: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(agents_root)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let p = e.path();
            (p.extension().is_some_and(|x| x == "toml"))
                .then(|| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
                .flatten()
        })
        .collect();
    names.sort();
    names
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn loads_and_digests_a_descriptor() {
        let tmp = tempfile::tempdir().unwrap();
        fs::write(
            tmp.path().join("a.toml"),
            "adapter = \"command\"\ncommand = [\"x\"]\ncredentials = [\"API_KEY\"]\n",
        )
        .unwrap();
        let a = Agent::load(tmp.path(), "a").unwrap();
        assert_eq!(a.name, "a");
        assert_eq!(a.condition.credentials, vec!["API_KEY"]);
        assert!(a.condition.digest.starts_with("sha256:"));
        let d0 = a.condition.digest.clone();
        fs::write(
            tmp.path().join("a.toml"),
            "adapter = \"command\"\ncommand = [\"y\"]\ncredentials = [\"API_KEY\"]\n",
        )
        .unwrap();
        assert_ne!(Agent::load(tmp.path(), "a").unwrap().condition.digest, d0);
    }

    #[test]
    fn scripted_digest_follows_the_script() {
        let tmp = tempfile::tempdir().unwrap();
        fs::write(
            tmp.path().join("s.toml"),
            "adapter = \"scripted\"\nscript = \"s.sh\"\n",
        )
        .unwrap();
        fs::write(tmp.path().join("s.sh"), "exit 0").unwrap();
        let d0 = Agent::load(tmp.path(), "s").unwrap().condition.digest;
        fs::write(tmp.path().join("s.sh"), "exit 1").unwrap();
        assert_ne!(Agent::load(tmp.path(), "s").unwrap().condition.digest, d0);
    }

    #[test]
    fn bad_descriptors_say_what_to_fix() {
        let tmp = tempfile::tempdir().unwrap();
        let cases = [
            ("adapter = \"command\"\nbogus = 1\n", "bogus"),
            (
                "adapter = \"aider\"\n[install]\npackag = \"aider-chat\"\n",
                "packag",
            ),
            (
                "adapter = \"command\"\ncredentials = [\"sk-123 secret\"]\n",
                "credentials",
            ),
            ("name = \"other\"\nadapter = \"command\"\n", "name"),
            ("adapter = \"scripted\"\nscript = \"../x.sh\"\n", "script"),
            (
                "adapter = \"scripted\"\nscript = \"missing.sh\"\n",
                "script",
            ),
            ("model = \"m\"\n", "adapter"),
        ];
        for (i, (text, needle)) in cases.iter().enumerate() {
            let name = format!("bad{i}");
            fs::write(tmp.path().join(format!("{name}.toml")), text).unwrap();
            let e = Agent::load(tmp.path(), &name).unwrap_err().to_string();
            assert!(
                e.contains(needle) && e.contains(&format!("{name}.toml")),
                "{e}"
            );
        }
    }

    #[test]
    fn descriptors_are_regular_bounded_files_with_reachable_endpoints() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        std::os::unix::fs::symlink("/etc/passwd", d.join("passwd.toml")).unwrap();
        let fifo = std::ffi::CString::new(d.join("fifo.toml").to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        fs::File::create(d.join("huge.toml"))
            .unwrap()
            .set_len(MAX_DESCRIPTOR_BYTES + 1)
            .unwrap();
        fs::write(d.join("bom.toml"), "\u{feff}adapter = \"oracle\"\n").unwrap();
        let net = |list: &str| format!("adapter = \"oracle\"\nnetwork = [{list}]\n");
        let many: Vec<String> = (0..10_000)
            .map(|i| format!("\"h{i}.example:443\""))
            .collect();
        for (name, text) in [
            ("wild", net("\"[::]:1\"")),
            ("zero", net("\"0.0.0.0:443\"")),
            ("pg", net("\"127.0.0.1:5432\"")),
            ("many", net(&many.join(","))),
            (
                "pgok",
                format!("{}allow_local_ports = [5432]\n", net("\"127.0.0.1:5432\"")),
            ),
        ] {
            fs::write(d.join(format!("{name}.toml")), text).unwrap();
        }
        let cases = [
            ("passwd", Some("symbolic link")),
            ("fifo", Some("FIFO")),
            ("huge", Some("more than the maximum")),
            ("wild", Some("unspecified")),
            ("zero", Some("unspecified")),
            ("pg", Some("PostgreSQL")),
            ("many", Some("more than the maximum 250")),
            ("bom", None),
            ("pgok", None),
        ];
        for (name, want) in cases {
            let r = Agent::load(d, name);
            match (want, r) {
                (None, Ok(_)) => {}
                (Some(w), Err(e)) => {
                    let e = e.to_string();
                    assert!(
                        e.contains(w) && e.contains(&format!("{name}.toml")),
                        "{name}: {e}"
                    );
                    assert!(!e.contains("root:"), "{name} echoed /etc/passwd: {e}");
                    assert!(e.len() < 600, "{name}: {e}");
                }
                (w, r) => panic!("{name}: wanted {w:?}, got {r:?}"),
            }
        }
    }

    #[test]
    fn unknown_agent_lists_known_ones() {
        let tmp = tempfile::tempdir().unwrap();
        fs::write(tmp.path().join("oracle.toml"), "adapter = \"oracle\"\n").unwrap();
        let e = Agent::load(tmp.path(), "nope").unwrap_err().to_string();
        assert!(e.contains("nope") && e.contains("oracle"), "{e}");
        assert!(Agent::load(tmp.path(), "../oracle").is_err());
    }
}
