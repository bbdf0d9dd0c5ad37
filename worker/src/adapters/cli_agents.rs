//! `claude-code`, `codex`, `gemini-cli`, `qwen-code`, `opencode`, `mini-swe-agent` and
//! `aider`: launch their non-interactive modes and read their JSON event streams (or logs
//! printed after them) into observations. The argv
//! builders and parsers are pure code in `akbench_core::observe`, tested on recorded
//! fixtures.
//!
//! Gemini CLI and opencode report their provider retries on stderr only, so each is started
//! through `/bin/sh -c` with stderr joined to stdout ([`GEMINI_WRAPPER`],
//! [`JOIN_STDERR_WRAPPER`]): one stream keeps a retry line and the answer that ends the
//! failure in order, and the worker's provider watch (which polls stdout) sees both.

use super::{common_env, Adapter, Launch, LaunchContext};
use akbench_core::agent::Agent;
use akbench_core::observe;
use akbench_core::observe::ProviderError;
use akbench_core::record::Observations;

use akbench_core::observe::ArgvBuilder;

/// A CLI agent that speaks JSON events on stdout.
#[derive(Debug)]
pub struct CliAgentAdapter {
    name: &'static str,
    default_program: &'static str,
    argv: ArgvBuilder,
    parse: fn(&str) -> Observations,
    /// Environment set when the worker runs as root (unless the descriptor sets it).
    root_env: &'static [(&'static str, &'static str)],
    /// Environment always set (unless the descriptor sets it).
    env: &'static [(&'static str, &'static str)],
    /// A `/bin/sh -c` script the CLI is started through (`"$@"` is the CLI's argv).
    wrapper: Option<&'static str>,
    /// A `/bin/sh -c` script printing the CLI's version (`$0` is the program), for a CLI
    /// without `--version`; `None`: `<program> --version`.
    version: Option<&'static str>,
    /// How the CLI is handed a task's MCP servers (`akbench_core::task::mcp`); `None` for a
    /// CLI that takes none (planning refuses it for such a task).
    mcp: Option<McpDelivery>,
}

use akbench_core::task::mcp::McpServer;

/// How a CLI is handed a task's MCP servers, each built by `akbench_core::task::mcp`.
#[derive(Debug, Clone, Copy)]
enum McpDelivery {
    /// Flags before the instruction (claude-code, codex).
    Flags(fn(&[McpServer]) -> Vec<String>),
    /// A JSON configuration in the variable named: opencode reads `OPENCODE_CONFIG_CONTENT`
    /// (merged into one the descriptor sets); Gemini CLI's and Qwen Code's wrappers write
    /// [`MCP_SETTINGS_VAR`] into the agent's own `settings.json`.
    Env(&'static str, fn(&[McpServer]) -> Option<serde_json::Value>),
    /// Harbor's note appended to the instruction (mini-swe-agent has no MCP client).
    Instruction,
}

/// The `mcpServers` object the Gemini CLI and Qwen Code wrappers write into the agent's
/// `settings.json` ([`GEMINI_WRAPPER`], [`QWEN_WRAPPER`]).
pub const MCP_SETTINGS_VAR: &str = "AKBENCH_MCP_SETTINGS";

/// mini-swe-agent has no `--version`; its `--help` starts `This is mini-swe-agent version
/// 2.4.6.`.
const MINI_VERSION: &str = r#""$0" --help </dev/null 2>/dev/null | sed -n 's/^This is mini-swe-agent version \(.*\)\.$/\1/p' | head -n 1"#;

/// aider's `--version` prints `aider 0.86.2`.
const AIDER_VERSION: &str =
    r#""$0" --version </dev/null 2>/dev/null | sed -n 's/^aider \([0-9].*\)$/\1/p' | head -n 1"#;

/// aider's wrapper: its output joined to stdout; its analytics log and chat history in the
/// agent's home, printed after [`observe::aider::ANALYTICS_MARKER`] and
/// [`observe::aider::HISTORY_MARKER`] once it exits (its exit code kept); stdin `/dev/null`.
/// aider fetches litellm's price table from GitHub into `~/.aider/caches` unless a non-empty
/// one is there: a placeholder makes it use litellm's bundled table (no request, no error
/// line). Its repo-map cache (`.aider.tags.cache.v4`, in the repository) is removed after the
/// run unless it was there before, so the workspace holds only the agent's edits.
pub const AIDER_WRAPPER: &str = r#"d="$HOME/.aider/caches"; p="$d/model_prices_and_context_window.json"; mkdir -p "$d" && { [ -s "$p" ] || printf '%s\n' '{"akbench-offline": {}}' > "$p"; }; c=.aider.tags.cache.v4; keep=; [ -e "$c" ] && keep=1; a="$HOME/akbench-aider-analytics.jsonl"; h="$HOME/akbench-aider-chat.md"; rm -f "$a" "$h"; "$@" --analytics-log "$a" --chat-history-file "$h" --input-history-file "$HOME/akbench-aider-input" </dev/null 2>&1; rc=$?; [ -n "$keep" ] || rm -rf "$c"; printf '\n%s\n' '@@akbench: aider analytics@@'; cat "$a" 2>/dev/null; printf '\n%s\n' '@@akbench: aider chat history@@'; cat "$h" 2>/dev/null; exit $rc"#;

/// aider: unbuffered output (the worker's provider watch reads failures as they happen),
/// lines not wrapped at 80 columns (a failure's class and its "Connection error" stay on one
/// line), litellm's bundled price table, and no browser opened for a URL in an error.
const AIDER_ENV: &[(&str, &str)] = &[
    ("PYTHONUNBUFFERED", "1"),
    ("COLUMNS", "10000"),
    ("LITELLM_LOCAL_MODEL_COST_MAP", "True"),
    ("BROWSER", "true"),
];

/// Gemini CLI's wrapper: stderr joined to stdout (see the module documentation). And when
/// the provider is given by `GOOGLE_GEMINI_BASE_URL`, Gemini CLI 0.61 takes the auth type
/// `gateway`, which its headless mode then refuses ("Invalid auth method selected."): the
/// API key auth is selected in the agent's (private, empty) `~/.gemini/settings.json`
/// unless one exists; the task's MCP servers ([`MCP_SETTINGS_VAR`]) are its `mcpServers`.
pub const GEMINI_WRAPPER: &str = r#"f="$HOME/.gemini/settings.json"; if [ ! -e "$f" ]; then a=; m=; c=; [ -n "${GOOGLE_GEMINI_BASE_URL:-}" ] && a='"security":{"auth":{"selectedType":"gemini-api-key"}}'; [ -n "${AKBENCH_MCP_SETTINGS:-}" ] && m="\"mcpServers\":$AKBENCH_MCP_SETTINGS"; [ -n "$a" ] && [ -n "$m" ] && c=,; if [ -n "$a$m" ]; then mkdir -p "$HOME/.gemini" && printf '{%s%s%s}\n' "$a" "$c" "$m" > "$f"; fi; fi; exec "$@" 2>&1"#;

/// Qwen Code's wrapper: the task's MCP servers ([`MCP_SETTINGS_VAR`]) written as the
/// `mcpServers` of the agent's (private, empty) `~/.qwen/settings.json` unless one exists;
/// its output as it is.
pub const QWEN_WRAPPER: &str = r#"f="$HOME/.qwen/settings.json"; if [ -n "${AKBENCH_MCP_SETTINGS:-}" ] && [ ! -e "$f" ]; then mkdir -p "$HOME/.qwen" && printf '{"mcpServers":%s}\n' "$AKBENCH_MCP_SETTINGS" > "$f"; fi; exec "$@""#;

/// opencode's wrapper: stderr (its log, where its provider retries are) joined to stdout.
pub const JOIN_STDERR_WRAPPER: &str = r#"exec "$@" 2>&1"#;

/// opencode never updates itself nor downloads language servers during an attempt.
const OPENCODE_ENV: &[(&str, &str)] = &[
    ("OPENCODE_DISABLE_AUTOUPDATE", "1"),
    ("OPENCODE_DISABLE_LSP_DOWNLOAD", "1"),
];

/// mini-swe-agent's wrapper: its log joined to stdout, its trajectory saved in the agent's
/// home and printed after [`observe::mini_swe_agent::MARKER`] once it exits (its exit code
/// kept). stdin is `/dev/null`: in `--yolo` mode it asks nothing, and a prompt must not wait.
pub const MINI_WRAPPER: &str = r#"f="$HOME/akbench-mini-trajectory.json"; "$@" -o "$f" </dev/null 2>&1; rc=$?; printf '\n%s\n' '@@akbench: mini-swe-agent trajectory@@'; cat "$f" 2>/dev/null; exit $rc"#;

/// mini-swe-agent: no first-run wizard; a model litellm has no price for is not an error
/// (its cost is then unknown); litellm's bundled price table, not a fetch from GitHub.
const MINI_ENV: &[(&str, &str)] = &[
    ("MSWEA_CONFIGURED", "true"),
    ("MSWEA_COST_TRACKING", "ignore_errors"),
    ("LITELLM_LOCAL_MODEL_COST_MAP", "True"),
];

/// Gemini CLI overrides `--approval-mode yolo` to `default` (every tool call refused
/// headless) in a folder it does not trust; the attempt's worktree is the agent's own.
const GEMINI_ENV: &[(&str, &str)] = &[("GEMINI_CLI_TRUST_WORKSPACE", "true")];

/// Claude Code refuses `--permission-mode bypassPermissions` as root ("cannot be used with
/// root/sudo privileges") unless told it runs in a sandbox; akbench's attempts are isolated
/// (private HOME, own worktree, process group), so it sets `IS_SANDBOX=1` under root.
const CLAUDE_ROOT_ENV: &[(&str, &str)] = &[("IS_SANDBOX", "1")];

/// Claude Code (`claude -p --output-format stream-json`).
pub fn claude_code() -> CliAgentAdapter {
    CliAgentAdapter {
        name: "claude-code",
        default_program: "claude",
        argv: observe::claude_code_argv,
        parse: observe::parse_claude_code,
        root_env: CLAUDE_ROOT_ENV,
        env: &[],
        wrapper: None,
        version: None,
        mcp: Some(McpDelivery::Flags(
            akbench_core::task::mcp::claude_code_args,
        )),
    }
}

/// Codex (`codex exec --json`).
pub fn codex() -> CliAgentAdapter {
    CliAgentAdapter {
        name: "codex",
        default_program: "codex",
        argv: observe::codex_argv,
        parse: observe::parse_codex,
        root_env: &[],
        env: &[],
        wrapper: None,
        version: None,
        mcp: Some(McpDelivery::Flags(akbench_core::task::mcp::codex_args)),
    }
}

/// Gemini CLI (`gemini --output-format stream-json`, stderr joined to stdout).
pub fn gemini_cli() -> CliAgentAdapter {
    CliAgentAdapter {
        name: "gemini-cli",
        default_program: "gemini",
        argv: observe::gemini_cli_argv,
        parse: observe::parse_gemini_cli,
        root_env: &[],
        env: GEMINI_ENV,
        wrapper: Some(GEMINI_WRAPPER),
        version: None,
        mcp: Some(McpDelivery::Env(
            MCP_SETTINGS_VAR,
            akbench_core::task::mcp::gemini_settings,
        )),
    }
}

/// opencode (`opencode run --format json`, its log joined to stdout).
pub fn opencode() -> CliAgentAdapter {
    CliAgentAdapter {
        name: "opencode",
        default_program: "opencode",
        argv: observe::opencode_argv,
        parse: observe::parse_opencode,
        root_env: &[],
        env: OPENCODE_ENV,
        wrapper: Some(JOIN_STDERR_WRAPPER),
        version: None,
        mcp: Some(McpDelivery::Env(
            "OPENCODE_CONFIG_CONTENT",
            akbench_core::task::mcp::opencode_config,
        )),
    }
}

/// mini-swe-agent (`mini --yolo`, its saved trajectory printed after it).
pub fn mini_swe_agent() -> CliAgentAdapter {
    CliAgentAdapter {
        name: "mini-swe-agent",
        default_program: "mini",
        argv: observe::mini_swe_agent_argv,
        parse: observe::parse_mini_swe_agent,
        root_env: &[],
        env: MINI_ENV,
        wrapper: Some(MINI_WRAPPER),
        version: Some(MINI_VERSION),
        mcp: Some(McpDelivery::Instruction),
    }
}

/// aider (`aider --yes-always --message=...`, its analytics log and chat history printed
/// after it).
pub fn aider() -> CliAgentAdapter {
    CliAgentAdapter {
        name: "aider",
        default_program: "aider",
        argv: observe::aider_argv,
        parse: observe::parse_aider,
        root_env: &[],
        env: AIDER_ENV,
        wrapper: Some(AIDER_WRAPPER),
        version: Some(AIDER_VERSION),
        mcp: None,
    }
}

/// Qwen Code (`qwen --output-format stream-json`).
pub fn qwen_code() -> CliAgentAdapter {
    CliAgentAdapter {
        name: "qwen-code",
        default_program: "qwen",
        argv: observe::qwen_code_argv,
        parse: observe::parse_qwen_code,
        root_env: &[],
        env: &[],
        wrapper: Some(QWEN_WRAPPER),
        version: None,
        mcp: Some(McpDelivery::Env(
            MCP_SETTINGS_VAR,
            akbench_core::task::mcp::gemini_settings,
        )),
    }
}

impl CliAgentAdapter {
    /// The CLI's argv: the descriptor's `extra_args`, then the flags that hand it the task's
    /// MCP servers (`akbench_core::task::mcp`), before the instruction.
    fn build(
        &self,
        agent: &Agent,
        task: &akbench_core::task::Task,
        program: &str,
    ) -> Result<Vec<String>, String> {
        let d = &agent.descriptor;
        let (servers, note) = match self.mcp {
            Some(McpDelivery::Flags(f)) => (f(&task.mcp_servers), String::new()),
            Some(McpDelivery::Instruction) => (
                Vec::new(),
                akbench_core::task::mcp::instruction_note(&task.mcp_servers),
            ),
            Some(McpDelivery::Env(..)) | None => (Vec::new(), String::new()),
        };
        (self.argv)(
            program,
            d.model.as_deref(),
            &format!("{}{note}", task.instruction),
            &d.parameters,
            &[d.extra_args.clone(), servers].concat(),
        )
    }

    /// The agent's entry in the agent cache ([`crate::agents`]): installed now when the
    /// descriptor asks for it (`[install]`); without `[install]` and `program`, the pinned
    /// version's entry when it is installed and the program is not on the worker's `PATH`.
    fn installed(&self, agent: &Agent) -> Result<Option<crate::agents::Installed>, String> {
        use akbench_core::agent::install;
        let d = &agent.descriptor;
        let root = crate::agents::cache_root();
        if let Some(spec) = &d.install {
            let i = install::resolve(self.name, spec)?;
            return crate::agents::install(&root, &i).map(Some);
        }
        if d.program.is_some() || on_path(self.default_program) {
            return Ok(None);
        }
        Ok(install::known(self.name)
            .and_then(|k| crate::agents::find(&root, &install::Install::pinned(k))))
    }
}

/// Whether `program` is a file in a folder of the worker's `PATH`.
fn on_path(program: &str) -> bool {
    std::env::var("PATH")
        .unwrap_or_default()
        .split(':')
        .filter(|d| !d.is_empty())
        .any(|d| std::path::Path::new(d).join(program).is_file())
}

impl Adapter for CliAgentAdapter {
    fn name(&self) -> &'static str {
        self.name
    }

    fn prepare(&self, agent: &Agent) -> Result<(), String> {
        self.installed(agent).map(drop)
    }

    fn launch(&self, ctx: &LaunchContext<'_>) -> Result<Launch, String> {
        let installed = self.installed(ctx.agent)?;
        let program = match &installed {
            Some(i) => i.program.display().to_string(),
            None => ctx
                .agent
                .descriptor
                .program
                .clone()
                .unwrap_or_else(|| self.default_program.to_string()),
        };
        let cli = self.build(ctx.agent, ctx.task, &program)?;
        // An installed agent's entry, or a program given by path, is exposed read-only in
        // the sandbox and bound at the same path in a task image (one on PATH is part of
        // the toolchain).
        let readable = match &installed {
            Some(i) => vec![i.dir.clone()],
            None => cli
                .first()
                .filter(|p| p.starts_with('/'))
                .map(|p| vec![std::path::PathBuf::from(p)])
                .unwrap_or_default(),
        };
        let argv = match self.wrapper {
            None => cli,
            Some(script) => ["/bin/sh", "-c", script, self.name]
                .iter()
                .map(|s| s.to_string())
                .chain(cli)
                .collect(),
        };
        let mut env = common_env(ctx)?;
        if let Some(McpDelivery::Env(var, config)) = self.mcp {
            if let Some(mut value) = config(&ctx.task.mcp_servers) {
                // A configuration the descriptor gives in the same variable keeps its own
                // keys; the task's servers are added to its table of them.
                if let Some(own) = env.get(var) {
                    value = merged(var, own, value)?;
                }
                env.insert(var.to_string(), value.to_string());
            }
        }
        for (k, v) in self.env {
            env.entry((*k).to_string())
                .or_insert_with(|| (*v).to_string());
        }
        // SAFETY: geteuid has no preconditions and cannot fail.
        if unsafe { libc::geteuid() } == 0 {
            for (k, v) in self.root_env {
                env.entry((*k).to_string())
                    .or_insert_with(|| (*v).to_string());
            }
        }
        Ok(Launch {
            argv,
            env,
            readable,
        })
    }

    fn version_argv(&self, launch: &Launch) -> Option<Vec<String>> {
        // Wrapped: `/bin/sh -c <script> <name> <program> ...`.
        let program = launch
            .argv
            .get(if self.wrapper.is_some() { 4 } else { 0 })?;
        Some(match self.version {
            None => vec![program.clone(), "--version".into()],
            Some(script) => vec![
                "/bin/sh".into(),
                "-c".into(),
                script.into(),
                program.clone(),
            ],
        })
    }

    fn observe(&self, stdout: &str, _stderr: &str) -> Observations {
        (self.parse)(stdout)
    }

    fn provider_failure(&self, stdout: &str) -> Option<ProviderError> {
        (self.parse)(stdout).provider_error
    }

    fn refused_to_start(&self, stdout: &str, stderr: &str) -> Option<String> {
        if observe::emits_events(stdout)
            || (self.name == "mini-swe-agent" && stdout.contains("mini-swe-agent (step "))
            || (self.name == "aider" && observe::aider::started(stdout))
        {
            return None;
        }
        // The first line naming an error, else its first line; stderr first (with stderr
        // joined to stdout, a usage text may come before the error, or after it).
        let lines: Vec<&str> = stderr
            .lines()
            .chain(stdout.lines())
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect();
        // A usage line (argparse's, on one line under aider's `COLUMNS`) names every flag,
        // some holding those words: the error comes after it.
        let names_error = |l: &&&str| {
            let l = l.to_ascii_lowercase();
            if l.starts_with("usage:") {
                return false;
            }
            ["error", "unknown", "invalid"]
                .iter()
                .any(|w| l.contains(w))
        };
        let line = lines
            .iter()
            .find(names_error)
            .or(lines.first())
            .copied()
            .unwrap_or("no output at all");
        Some(format!("`{}` printed no event; it said: {line}", self.name))
    }
}

/// `own` (the descriptor's JSON object in `var`) with `servers` merged in: each top-level
/// table of `servers` (`mcp`) joined to the same table of `own`, a server of the task's
/// replacing one of the same name.
fn merged(var: &str, own: &str, servers: serde_json::Value) -> Result<serde_json::Value, String> {
    let mut own: serde_json::Value = serde_json::from_str(own)
        .ok()
        .filter(serde_json::Value::is_object)
        .ok_or_else(|| {
            format!("the agent's `{var}` is not a JSON object, so the task's MCP servers cannot be added to it; fix: write it as a JSON object, or leave it out")
        })?;
    for (key, table) in servers.as_object().into_iter().flatten() {
        let slot = own.as_object_mut().map(|o| {
            o.entry(key.clone())
                .or_insert_with(|| serde_json::json!({}))
        });
        match (slot.and_then(|s| s.as_object_mut()), table.as_object()) {
            (Some(slot), Some(table)) => slot.extend(table.clone()),
            _ => {
                return Err(format!(
                    "the agent's `{var}` has `{key}` that is not a JSON object; fix: make it an object, or leave it out"
                ))
            }
        }
    }
    Ok(own)
}

#[cfg(test)]
mod tests {
    /// A task (image-only, so nothing to clone) with two MCP servers, and an agent of
    /// `adapter`, loaded from files as the worker loads them.
    fn task_and_agent(
        dir: &std::path::Path,
        adapter: &str,
    ) -> (akbench_core::task::Task, akbench_core::agent::Agent) {
        let t = dir.join("tasks/mcp-task");
        std::fs::create_dir_all(t.join("tests")).unwrap();
        std::fs::write(t.join("instruction.md"), "Ask the tools.\n").unwrap();
        std::fs::write(t.join("tests/test.sh"), "#!/bin/sh\nexit 0\n").unwrap();
        std::fs::write(
            t.join("task.toml"),
            "[environment]\ndocker_image = \"reg.example/t@sha256:0000000000000000000000000000000000000000000000000000000000000000\"\n\
             [[environment.mcp_servers]]\nname = \"local\"\ntransport = \"streamable-http\"\nurl = \"http://localhost:8000/mcp\"\n\
             headers = { Authorization = \"Bearer ${MCP_TEST_TOKEN}\" }\n\
             [[environment.mcp_servers]]\nname = \"files\"\ntransport = \"stdio\"\ncommand = \"python3\"\nargs = [\"/opt/files.py\"]\n",
        )
        .unwrap();
        let task = akbench_core::task::Task::load(&t, &dir.join("tasks")).unwrap();
        std::fs::create_dir_all(dir.join("agents")).unwrap();
        std::fs::write(
            dir.join("agents/a.toml"),
            format!("adapter = \"{adapter}\"\nprogram = \"/opt/cli\"\n"),
        )
        .unwrap();
        let agent = akbench_core::agent::Agent::load(&dir.join("agents"), "a").unwrap();
        (task, agent)
    }

    /// `adapter`'s launch of the task of [`task_and_agent`] under `dir`.
    fn launched(
        adapter: &super::CliAgentAdapter,
        dir: &std::path::Path,
    ) -> crate::adapters::Launch {
        use crate::adapters::{Adapter, LaunchContext};
        let (task, agent) = task_and_agent(dir, adapter.name);
        let home = dir.join("home");
        adapter
            .launch(&LaunchContext {
                task: &task,
                agent: &agent,
                workspace: dir,
                home: &home,
                instruction_file: &home.join("instruction.md"),
            })
            .unwrap()
    }

    #[test]
    fn claude_code_and_codex_get_the_task_s_mcp_servers_before_the_instruction() {
        let dir = tempfile::tempdir().unwrap();
        for (adapter, flag) in [
            (super::claude_code(), "--mcp-config"),
            (super::codex(), "-c"),
        ] {
            let launch = launched(&adapter, dir.path());
            let argv = &launch.argv;
            let at = argv.iter().position(|a| a == flag).unwrap();
            let dashes = argv.iter().position(|a| a == "--").unwrap();
            assert!(at < dashes, "{argv:?}");
            assert_eq!(argv[dashes + 1], "Ask the tools.\n");
            let joined = argv.join(" ");
            assert!(
                joined.contains("http://localhost:8000/mcp") && joined.contains("/opt/files.py"),
                "{argv:?}"
            );
            assert!(
                joined.contains("AKBENCH_MCP_AUTH_0_0"),
                "the header's variable: {argv:?}"
            );
            let servers: serde_json::Value =
                serde_json::from_str(&launch.env["AKBENCH_MCP_SERVERS"]).unwrap();
            assert_eq!(servers[1]["name"], "files");
        }
    }

    #[test]
    fn gemini_qwen_opencode_and_mini_swe_agent_get_the_task_s_mcp_servers() {
        let dir = tempfile::tempdir().unwrap();
        for adapter in [
            super::gemini_cli(),
            super::qwen_code(),
            super::opencode(),
            super::mini_swe_agent(),
        ] {
            let launch = launched(&adapter, dir.path());
            let json = |var: &str| -> serde_json::Value {
                serde_json::from_str(&launch.env[var]).unwrap()
            };
            let joined = launch.argv.join(" ");
            match adapter.name {
                "gemini-cli" | "qwen-code" => {
                    let v = json(super::MCP_SETTINGS_VAR);
                    assert_eq!(v["local"]["httpUrl"], "http://localhost:8000/mcp");
                    assert_eq!(
                        v["local"]["headers"]["Authorization"],
                        "${AKBENCH_MCP_AUTH_0_0}"
                    );
                    assert_eq!(v["files"]["args"][0], "/opt/files.py");
                }
                "opencode" => {
                    let v = json("OPENCODE_CONFIG_CONTENT");
                    assert_eq!(
                        v["mcp"]["local"]["headers"]["Authorization"],
                        "{env:AKBENCH_MCP_AUTH_0_0}"
                    );
                    assert_eq!(v["mcp"]["files"]["command"][1], "/opt/files.py");
                }
                _ => {
                    assert!(
                        joined.contains("Ask the tools.\n\n\nMCP Servers:\n")
                            && joined.contains("- local: streamable-http transport, url: http://localhost:8000/mcp\n"),
                        "{joined}"
                    );
                    assert!(!launch.env.contains_key(super::MCP_SETTINGS_VAR));
                }
            }
            // Never a header's value, only its variable.
            assert!(
                !format!("{:?}", launch.env).contains("Bearer"),
                "{}",
                adapter.name
            );
        }
    }

    /// The wrappers write the agent's settings.json: the API key auth when a base URL is set
    /// (Gemini CLI), the task's servers as `mcpServers`; nothing when neither; never over a
    /// file that is there.
    #[test]
    fn the_gemini_and_qwen_wrappers_write_settings_with_the_task_s_servers() {
        let servers = r#"{"w":{"httpUrl":"http://w:8000/mcp"}}"#;
        for (wrapper, folder) in [
            (super::GEMINI_WRAPPER, ".gemini"),
            (super::QWEN_WRAPPER, ".qwen"),
        ] {
            for (base, mcp) in [(false, false), (true, false), (false, true), (true, true)] {
                let home = tempfile::tempdir().unwrap();
                let mut c = std::process::Command::new("/bin/sh");
                c.args(["-c", wrapper, "cli", "true"])
                    .env("HOME", home.path());
                c.env_remove("GOOGLE_GEMINI_BASE_URL")
                    .env_remove(super::MCP_SETTINGS_VAR);
                if base {
                    c.env("GOOGLE_GEMINI_BASE_URL", "http://127.0.0.1:9");
                }
                if mcp {
                    c.env(super::MCP_SETTINGS_VAR, servers);
                }
                assert!(c.status().unwrap().success());
                let file = home.path().join(folder).join("settings.json");
                let auth = base && folder == ".gemini";
                if !auth && !mcp {
                    assert!(!file.exists(), "{folder} {base} {mcp}");
                    continue;
                }
                let v: serde_json::Value =
                    serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
                assert_eq!(
                    v["security"]["auth"]["selectedType"].is_string(),
                    auth,
                    "{v}"
                );
                assert_eq!(v["mcpServers"]["w"]["httpUrl"].is_string(), mcp, "{v}");
                // A settings file that is there is kept.
                std::fs::write(&file, "{}").unwrap();
                assert!(c.status().unwrap().success());
                assert_eq!(std::fs::read_to_string(&file).unwrap(), "{}");
            }
        }
    }

    #[test]
    fn a_descriptor_s_opencode_config_keeps_its_keys_and_gains_the_servers() {
        let servers = serde_json::json!({"mcp": {"w": {"type": "remote"}}});
        let own = r#"{"provider": {"p": {}}, "mcp": {"mine": {"type": "local"}, "w": {"old": 1}}}"#;
        let m = super::merged("OPENCODE_CONFIG_CONTENT", own, servers.clone()).unwrap();
        assert_eq!(
            m,
            serde_json::json!({"provider": {"p": {}}, "mcp": {"mine": {"type": "local"}, "w": {"type": "remote"}}})
        );
        for bad in ["[1]", "not json", r#"{"mcp": 3}"#] {
            let e = super::merged("OPENCODE_CONFIG_CONTENT", bad, servers.clone()).unwrap_err();
            assert!(
                e.contains("OPENCODE_CONFIG_CONTENT") && e.contains("fix:"),
                "{e}"
            );
        }
    }

    /// The CLIs that are handed MCP servers are the ones core's plan-time rule lets run a
    /// task with servers (`akbench_core::task::mcp::TAKES_MCP`).
    #[test]
    fn the_clis_given_mcp_servers_are_those_planning_allows() {
        use akbench_core::task::mcp::TAKES_MCP;
        for a in [
            super::claude_code(),
            super::codex(),
            super::gemini_cli(),
            super::qwen_code(),
            super::opencode(),
            super::mini_swe_agent(),
            super::aider(),
        ] {
            assert_eq!(a.mcp.is_some(), TAKES_MCP.contains(&a.name), "{}", a.name);
        }
    }

    #[test]
    fn the_mini_wrapper_prints_the_marker_the_parser_looks_for() {
        assert!(super::MINI_WRAPPER.contains(akbench_core::observe::mini_swe_agent::MARKER));
    }

    #[test]
    fn the_aider_wrapper_prints_the_markers_the_parser_looks_for() {
        use akbench_core::observe::aider::{ANALYTICS_MARKER, HISTORY_MARKER};
        let w = super::AIDER_WRAPPER;
        assert!(w.find(ANALYTICS_MARKER).unwrap() < w.find(HISTORY_MARKER).unwrap());
    }
}
