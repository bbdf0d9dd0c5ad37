//! Agents akbench installs itself: the table of known agent packages (ecosystem, package,
//! pinned version, program), a descriptor's `[install]` table resolved against it, and the
//! cache key `(package, version, platform)` naming the folder an installed agent lives in.
//! Pure rules; the worker installs (`akbench_worker::agents`), `akbench agent list` shows.

use serde::{Deserialize, Serialize};

/// Where an agent's package comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Ecosystem {
    /// The npm registry; run by Node.js.
    Npm,
    /// PyPI; run by Python.
    Pypi,
}

impl Ecosystem {
    /// `npm` or `pypi`.
    pub fn as_str(self) -> &'static str {
        match self {
            Ecosystem::Npm => "npm",
            Ecosystem::Pypi => "pypi",
        }
    }
}

/// A known agent package: the adapter it is run by, where it comes from and the version
/// akbench pins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KnownAgent {
    /// The adapter (`adapter = "..."` in a descriptor).
    pub adapter: &'static str,
    /// npm or PyPI.
    pub ecosystem: Ecosystem,
    /// The package name in its registry.
    pub package: &'static str,
    /// The pinned version.
    pub version: &'static str,
    /// The program the package provides (its `bin` / console script).
    pub program: &'static str,
}

/// The agents akbench knows how to install, at the versions its tests run (`.ci/run`).
pub const KNOWN: &[KnownAgent] = &[
    KnownAgent {
        adapter: "claude-code",
        ecosystem: Ecosystem::Npm,
        package: "@anthropic-ai/claude-code",
        version: "2.1.332",
        program: "claude",
    },
    KnownAgent {
        adapter: "codex",
        ecosystem: Ecosystem::Npm,
        package: "@openai/codex",
        version: "0.171.0",
        program: "codex",
    },
    KnownAgent {
        adapter: "gemini-cli",
        ecosystem: Ecosystem::Npm,
        package: "@google/gemini-cli",
        version: "0.61.0",
        program: "gemini",
    },
    KnownAgent {
        adapter: "qwen-code",
        ecosystem: Ecosystem::Npm,
        package: "@qwen-code/qwen-code",
        version: "0.24.4",
        program: "qwen",
    },
    KnownAgent {
        adapter: "opencode",
        ecosystem: Ecosystem::Npm,
        package: "opencode-ai",
        version: "1.18.33",
        program: "opencode",
    },
    KnownAgent {
        adapter: "mini-swe-agent",
        ecosystem: Ecosystem::Pypi,
        package: "mini-swe-agent",
        version: "2.4.6",
        program: "mini",
    },
    KnownAgent {
        adapter: "aider",
        ecosystem: Ecosystem::Pypi,
        package: "aider-chat",
        version: "0.86.2",
        program: "aider",
    },
];

/// The known agent an adapter runs, if any.
pub fn known(adapter: &str) -> Option<&'static KnownAgent> {
    KNOWN.iter().find(|k| k.adapter == adapter)
}

/// A descriptor's `[install]` table: the agent is installed by akbench into its cache and
/// run from there (never from `PATH`). Both fields default to the adapter's known package
/// and pinned version.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InstallSpec {
    /// The package (npm or PyPI, the adapter's ecosystem), e.g. `@google/gemini-cli`.
    #[serde(default)]
    pub package: Option<String>,
    /// The exact version, e.g. `0.61.0`.
    #[serde(default)]
    pub version: Option<String>,
}

/// What to install: one cache entry.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Install {
    /// npm or PyPI.
    pub ecosystem: Ecosystem,
    /// The package.
    pub package: String,
    /// The exact version.
    pub version: String,
    /// The program it provides.
    pub program: String,
}

impl Install {
    /// The known agent at its pinned version.
    pub fn pinned(k: &KnownAgent) -> Install {
        Install {
            ecosystem: k.ecosystem,
            package: k.package.to_string(),
            version: k.version.to_string(),
            program: k.program.to_string(),
        }
    }

    /// The cache entry's folder name on `platform` ([`platform`]):
    /// `<ecosystem>-<package>-<version>-<platform>`, the package's `@` dropped and `/` as `+`
    /// (`npm-google+gemini-cli-0.61.0-linux-x86_64`).
    pub fn key(&self, platform: &str) -> String {
        let package = self.package.trim_start_matches('@').replace('/', "+");
        format!(
            "{}-{package}-{}-{platform}",
            self.ecosystem.as_str(),
            self.version
        )
    }
}

/// This machine's platform as a key part: `<os>-<arch>` (`linux-x86_64`).
pub fn platform() -> String {
    format!("{}-{}", std::env::consts::OS, std::env::consts::ARCH)
}

/// Resolves a descriptor's `[install]` for `adapter`; the error names the field and the fix.
pub fn resolve(adapter: &str, spec: &InstallSpec) -> Result<Install, String> {
    let Some(k) = known(adapter) else {
        let names: Vec<&str> = KNOWN.iter().map(|k| k.adapter).collect();
        return Err(format!(
            "field `install`: akbench installs only the agents of the adapters {}, not `{adapter}`; fix: name one of those adapters (`akbench agent list` shows them), or for another agent remove `[install]` and put it on PATH",
            names.join(", ")
        ));
    };
    let package = spec.package.as_deref().unwrap_or(k.package);
    if !valid_package(k.ecosystem, package) {
        return Err(format!(
            "field `install.package`: `{}` is not a valid {} package name; fix: give the registry's name, e.g. `{}`",
            crate::limits::elide(package),
            k.ecosystem.as_str(),
            k.package
        ));
    }
    let version = spec.version.as_deref().unwrap_or(k.version);
    if !valid_version(version) {
        return Err(format!(
            "field `install.version`: `{}` is not an exact version; fix: give one such as `{}` (no ranges, tags or paths)",
            crate::limits::elide(version),
            k.version
        ));
    }
    Ok(Install {
        ecosystem: k.ecosystem,
        package: package.to_string(),
        version: version.to_string(),
        program: k.program.to_string(),
    })
}

/// An exact version: starts with a digit; letters, digits, `.`, `-`, `+`, `_` only.
fn valid_version(v: &str) -> bool {
    v.len() <= 64
        && v.starts_with(|c: char| c.is_ascii_digit())
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '+' | '_'))
        && !v.contains("..")
}

/// An npm name (`name` or `@scope/name`, lowercase) or a PyPI name (PEP 508's).
fn valid_package(eco: Ecosystem, p: &str) -> bool {
    let part = |s: &str, upper: bool| {
        !s.is_empty()
            && s.len() <= 100
            && s.starts_with(|c: char| c.is_ascii_alphanumeric())
            && s.chars().all(|c| {
                c.is_ascii_digit()
                    || c.is_ascii_lowercase()
                    || (upper && c.is_ascii_uppercase())
                    || matches!(c, '.' | '-' | '_')
            })
    };
    match eco {
        Ecosystem::Npm => match p.strip_prefix('@') {
            Some(scoped) => scoped
                .split_once('/')
                .is_some_and(|(s, n)| part(s, false) && part(n, false)),
            None => part(p, false),
        },
        Ecosystem::Pypi => part(p, true),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_cli_adapter_has_a_known_package() {
        for (adapter, program, _) in super::super::adapters::CLI_AGENTS {
            let k = known(adapter).unwrap_or_else(|| panic!("{adapter}"));
            assert_eq!(k.program, *program, "{adapter}");
            assert!(
                resolve(adapter, &InstallSpec::default()).is_ok(),
                "{adapter}"
            );
        }
        assert_eq!(KNOWN.len(), super::super::adapters::CLI_AGENTS.len());
    }

    #[test]
    fn install_tables_resolve_or_say_what_to_fix() {
        let spec = |p: Option<&str>, v: Option<&str>| InstallSpec {
            package: p.map(str::to_string),
            version: v.map(str::to_string),
        };
        // (adapter, spec, Ok(key on linux-x86_64) or Err(the error names this))
        let cases: &[(&str, InstallSpec, Result<&str, &str>)] = &[
            (
                "gemini-cli",
                spec(None, None),
                Ok("npm-google+gemini-cli-0.61.0-linux-x86_64"),
            ),
            (
                "aider",
                spec(None, None),
                Ok("pypi-aider-chat-0.86.2-linux-x86_64"),
            ),
            (
                "codex",
                spec(None, Some("0.170.0")),
                Ok("npm-openai+codex-0.170.0-linux-x86_64"),
            ),
            (
                "opencode",
                spec(Some("@me/opencode-fork"), Some("1.0.0-rc.1")),
                Ok("npm-me+opencode-fork-1.0.0-rc.1-linux-x86_64"),
            ),
            (
                "mini-swe-agent",
                spec(Some("Mini_SWE.agent"), None),
                Ok("pypi-Mini_SWE.agent-2.4.6-linux-x86_64"),
            ),
            ("command", spec(None, None), Err("not `command`")),
            ("oracle", spec(None, None), Err("field `install`")),
            ("codex", spec(None, Some("^0.171")), Err("install.version")),
            ("codex", spec(None, Some("latest")), Err("install.version")),
            (
                "codex",
                spec(None, Some("1/../../x")),
                Err("install.version"),
            ),
            ("codex", spec(None, Some("1..2")), Err("install.version")),
            ("codex", spec(Some("@openai"), None), Err("install.package")),
            ("codex", spec(Some("Codex"), None), Err("install.package")),
            ("codex", spec(Some("../x"), None), Err("install.package")),
            (
                "aider",
                spec(Some("aider chat"), None),
                Err("install.package"),
            ),
            ("aider", spec(Some(""), None), Err("install.package")),
        ];
        for (adapter, s, want) in cases {
            let got = resolve(adapter, s).map(|i| i.key("linux-x86_64"));
            match (want, got) {
                (Ok(k), Ok(g)) => assert_eq!(*k, g, "{adapter} {s:?}"),
                (Err(needle), Err(e)) => {
                    assert!(e.contains(needle) && e.contains("fix:"), "{adapter}: {e}")
                }
                (w, g) => panic!("{adapter} {s:?}: want {w:?}, got {g:?}"),
            }
        }
    }

    #[test]
    fn the_examples_and_ci_pin_the_known_versions() {
        let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let ci = std::fs::read_to_string(repo.join(".ci/run")).unwrap();
        for k in KNOWN {
            let a = crate::agent::Agent::load(&repo.join("examples/agents"), k.adapter).unwrap();
            let spec = a.descriptor.install.clone().expect(k.adapter);
            assert_eq!(spec.package.as_deref(), Some(k.package), "{}", k.adapter);
            assert_eq!(spec.version.as_deref(), Some(k.version), "{}", k.adapter);
            // .ci/run installs the same version on PATH for providers.rs / providers_more.rs.
            let var = format!(
                "{}_VERSION={}\n",
                k.adapter.to_ascii_uppercase().replace('-', "_"),
                k.version
            );
            assert!(ci.contains(&var), "{}: .ci/run lacks {var}", k.adapter);
        }
    }

    #[test]
    fn keys_differ_by_package_version_and_platform() {
        let a = Install::pinned(known("codex").unwrap());
        let mut b = a.clone();
        b.version = "0.1.0".into();
        let keys = [
            a.key("linux-x86_64"),
            a.key("linux-aarch64"),
            b.key("linux-x86_64"),
        ];
        assert!(keys[0] != keys[1] && keys[0] != keys[2] && keys[1] != keys[2]);
        assert!(keys.iter().all(|k| !k.contains('/') && !k.starts_with('.')));
        assert!(platform().contains('-'));
    }
}
