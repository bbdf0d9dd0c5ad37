//! `[[environment.mcp_servers]]`: the MCP servers a task hands its agent as tools, read as
//! Harbor 0.25 reads them (`MCPServerConfig`: `name`, `transport` `sse` (the default),
//! `streamable-http` (or `http`) or `stdio`, `url`, `command`, `args`, `headers`), and
//! what each agent CLI is given for them.
//!
//! One rule per place:
//! - [`parse`] checks every server (a bad one is refused naming its index, key and fix; a
//!   later server of the same name replaces an earlier one, as Harbor merges them);
//! - [`header_var`] names the variable a header's value travels in: configs refer to the
//!   variable, never hold the value, and the value is resolved from the worker's
//!   environment ([`resolve_headers`], `${VAR}` / `${VAR:-default}` as Harbor) only when
//!   the agent starts, so a credential is never in a plan, a record or an argv;
//! - [`claude_code_args`] and [`codex_args`] are the CLI flags that hand the servers to
//!   claude-code (`--mcp-config`, its `mcpServers` JSON) and codex (`-c mcp_servers.NAME=`,
//!   its config.toml table); [`servers_json`] is `AKBENCH_MCP_SERVERS`, given to every
//!   agent (a `command` agent reads it);
//! - [`TAKES_MCP`] lists the adapters that take them; planning refuses the others for a
//!   task that declares servers (`spec::support`), as Harbor refuses an agent without
//!   `capabilities.mcp_servers`.
//!
//! An HTTP server is reached from the agent's environment: a sidecar service of
//! environment/docker-compose.yaml by its name (the usual case), the environment itself
//! (`localhost`), or a host through the egress proxy. A stdio server runs inside the
//! agent's environment, so the agent can read its files: a server whose data must stay
//! hidden (a simulated user's persona) belongs in a sidecar.

use std::collections::BTreeMap;
use toml::Value;

/// How the agent talks to a server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// A child process of the agent, JSON-RPC on its stdin and stdout.
    Stdio,
    /// HTTP with server-sent events (Harbor's default).
    Sse,
    /// Streamable HTTP (`http` is read as this, as Harbor does).
    StreamableHttp,
}

impl Transport {
    /// Its name in task.toml.
    pub fn as_str(self) -> &'static str {
        match self {
            Transport::Stdio => "stdio",
            Transport::Sse => "sse",
            Transport::StreamableHttp => "streamable-http",
        }
    }
}

/// One server of `[[environment.mcp_servers]]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpServer {
    /// Its name (the agent's tools are named after it: `mcp__NAME__tool` in claude-code).
    pub name: String,
    /// Its transport.
    pub transport: Transport,
    /// `sse` and `streamable-http`: where it listens.
    pub url: Option<String>,
    /// `stdio`: the program the agent starts.
    pub command: Option<String>,
    /// `stdio`: its arguments.
    pub args: Vec<String>,
    /// HTTP: headers sent with each request, as written (`${VAR}` references unresolved).
    pub headers: BTreeMap<String, String>,
}

impl McpServer {
    /// The host of an HTTP server's URL (`None` for stdio or an unreadable URL).
    pub fn host(&self) -> Option<&str> {
        let url = self.url.as_deref()?;
        let rest = url
            .strip_prefix("http://")
            .or_else(|| url.strip_prefix("https://"))?;
        let authority = rest.split(['/', '?', '#']).next()?;
        let authority = authority.rsplit('@').next()?;
        if let Some(v6) = authority.strip_prefix('[') {
            return v6.split(']').next();
        }
        authority.split(':').next().filter(|h| !h.is_empty())
    }
}

/// The adapters that take a task's MCP servers, as Harbor 0.25's agents with
/// `capabilities.mcp_servers` do: claude-code, codex, gemini-cli, qwen-code and opencode get
/// them in their own configuration ([`clients`]); mini-swe-agent, which has no MCP client,
/// gets Harbor's note in its instruction ([`instruction_note`]); `command` and `scripted`
/// agents get [`servers_json`] and use it as they will. The oracle runs the reference
/// solution and ignores them (as Harbor's oracle does). aider takes none (Harbor has no
/// aider agent with MCP): planning refuses it for such a task.
pub const TAKES_MCP: &[&str] = &[
    "claude-code",
    "codex",
    "gemini-cli",
    "qwen-code",
    "opencode",
    "mini-swe-agent",
    "command",
    "scripted",
];

/// Adapters that run a task without its MCP servers by design.
pub const IGNORES_MCP: &[&str] = &["oracle"];

/// The most servers one task may declare.
pub const MAX_SERVERS: usize = 32;

/// A refused server: its position, the key, what is wrong and the fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpError {
    /// The field (`environment.mcp_servers[1].url`).
    pub field: String,
    /// What is wrong.
    pub problem: String,
    /// What to do.
    pub fix: String,
}

/// What [`parse`] read: the servers (by name, a later one replacing an earlier one) and the
/// fields of the ones replaced (kept as ignored).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Parsed {
    /// The servers, in the order their names first appear.
    pub servers: Vec<McpServer>,
    /// `environment.mcp_servers[i]` of each server replaced by a later one of its name.
    pub replaced: Vec<String>,
}

/// Reads `environment.mcp_servers` (a list of tables).
pub fn parse(v: &Value) -> Result<Parsed, McpError> {
    let base = "environment.mcp_servers";
    let refuse = |field: String, problem: String, fix: &str| McpError {
        field,
        problem,
        fix: fix.to_string(),
    };
    let Value::Array(items) = v else {
        return Err(refuse(
            base.into(),
            format!("is a {}, not a list", v.type_str()),
            "write `[[environment.mcp_servers]]` tables, or `mcp_servers = []`",
        ));
    };
    if items.len() > MAX_SERVERS {
        return Err(refuse(
            base.into(),
            format!("names {} servers, above {MAX_SERVERS}", items.len()),
            "declare at most 32 MCP servers",
        ));
    }
    let mut out = Parsed::default();
    // For each name: its place in `out.servers` and the list index of its latest declaration.
    let mut at: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for (i, item) in items.iter().enumerate() {
        let server = one(&format!("{base}[{i}]"), item)?;
        match at.get_mut(&server.name) {
            Some((k, latest)) => {
                out.replaced.push(format!("{base}[{latest}]"));
                *latest = i;
                out.servers[*k] = server;
            }
            None => {
                at.insert(server.name.clone(), (out.servers.len(), i));
                out.servers.push(server);
            }
        }
    }
    Ok(out)
}

const KEYS: &[&str] = &["name", "transport", "url", "command", "args", "headers"];

fn one(here: &str, item: &Value) -> Result<McpServer, McpError> {
    let refuse = |key: &str, problem: String, fix: &str| McpError {
        field: if key.is_empty() {
            here.to_string()
        } else {
            format!("{here}.{key}")
        },
        problem,
        fix: fix.to_string(),
    };
    let Value::Table(t) = item else {
        return Err(refuse(
            "",
            format!("is a {}, not a table", item.type_str()),
            "write each server as a table with `name` and `url` (or `command`)",
        ));
    };
    if let Some(k) = t.keys().find(|k| !KEYS.contains(&k.as_str())) {
        return Err(refuse(
            k,
            "is not a key of an MCP server (Harbor 0.25 refuses it too)".into(),
            "use name, transport, url, command, args and headers only",
        ));
    }
    let string = |key: &str| -> Result<Option<String>, McpError> {
        match t.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(other) => Err(refuse(
                key,
                format!("is a {}, not a string", other.type_str()),
                "write a string",
            )),
        }
    };
    let name = string("name")?.ok_or_else(|| {
        refuse(
            "name",
            "is missing".into(),
            "name the server, such as `name = \"tools\"`",
        )
    })?;
    if name.is_empty()
        || name.len() > 64
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return Err(refuse(
            "name",
            format!(
                "`{}` is not 1 to 64 letters, digits, `-` or `_`",
                crate::limits::elide(&name)
            ),
            "name the server with letters, digits, `-` and `_` (agents name its tools after it)",
        ));
    }
    let transport = match string("transport")?.as_deref() {
        None | Some("sse") => Transport::Sse,
        Some("streamable-http") | Some("http") => Transport::StreamableHttp,
        Some("stdio") => Transport::Stdio,
        Some(other) => {
            return Err(refuse(
                "transport",
                format!("is `{}`", crate::limits::elide(other)),
                "write `sse` (the default), `streamable-http` or `stdio`",
            ))
        }
    };
    let url = string("url")?;
    let command = string("command")?;
    let args = match t.get("args") {
        None => Vec::new(),
        Some(Value::Array(a)) => a
            .iter()
            .map(|x| x.as_str().map(str::to_string))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| {
                refuse(
                    "args",
                    "holds a value that is not a string".into(),
                    "write a list of strings",
                )
            })?,
        Some(other) => {
            return Err(refuse(
                "args",
                format!("is a {}, not a list", other.type_str()),
                "write a list of strings",
            ))
        }
    };
    let headers = match t.get("headers") {
        None => BTreeMap::new(),
        Some(Value::Table(h)) => {
            let mut out = BTreeMap::new();
            for (k, v) in h {
                let Value::String(s) = v else {
                    return Err(refuse(
                        &format!("headers.{k}"),
                        format!("is a {}, not a string", v.type_str()),
                        "write the header's value as a string",
                    ));
                };
                check_header(k, s)
                    .map_err(|(problem, fix)| refuse(&format!("headers.{k}"), problem, fix))?;
                out.insert(k.clone(), s.clone());
            }
            out
        }
        Some(other) => {
            return Err(refuse(
                "headers",
                format!("is a {}, not a table", other.type_str()),
                "write `headers = { \"X-Team\" = \"...\" }`",
            ))
        }
    };
    match transport {
        Transport::Stdio => {
            let Some(c) = command.as_deref().filter(|c| !c.trim().is_empty()) else {
                return Err(refuse(
                    "command",
                    "is missing, and a `stdio` server is a program the agent starts".into(),
                    "give the program (`command = \"python3\"`, `args = [\"/opt/server.py\"]`)",
                ));
            };
            if c.chars().any(char::is_control) {
                return Err(refuse(
                    "command",
                    "holds a control character".into(),
                    "give a program name or path",
                ));
            }
            if url.is_some() {
                return Err(refuse(
                    "url",
                    "is set on a `stdio` server, which has none".into(),
                    "remove it, or set `transport = \"streamable-http\"` (or `sse`)",
                ));
            }
            if !headers.is_empty() {
                return Err(refuse(
                    "headers",
                    "are set on a `stdio` server; headers are for HTTP transports".into(),
                    "remove them",
                ));
            }
        }
        Transport::Sse | Transport::StreamableHttp => {
            let Some(u) = url.as_deref() else {
                return Err(refuse(
                    "url",
                    format!("is missing, and transport `{}` needs one", transport.as_str()),
                    "give the server's URL, such as `url = \"http://tools:8000/mcp\"` for a sidecar service `tools`",
                ));
            };
            let scheme = u.starts_with("http://") || u.starts_with("https://");
            if !scheme || u.chars().any(|c| c.is_control() || c.is_whitespace()) {
                return Err(refuse(
                    "url",
                    format!(
                        "`{}` is not an http:// or https:// URL",
                        crate::limits::elide(u)
                    ),
                    "give the server's URL, such as `url = \"http://tools:8000/mcp\"`",
                ));
            }
            if command.is_some() || !args.is_empty() {
                return Err(refuse(
                    if command.is_some() { "command" } else { "args" },
                    format!(
                        "is set on a `{}` server, which the agent reaches by its URL",
                        transport.as_str()
                    ),
                    "remove it, or set `transport = \"stdio\"`",
                ));
            }
        }
    }
    Ok(McpServer {
        name,
        transport,
        url,
        command,
        args,
        headers,
    })
}

/// The header names Harbor counts as credentials: their value must come from a variable.
fn credential_header(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    [
        "authorization",
        "cookie",
        "token",
        "secret",
        "key",
        "password",
        "auth",
    ]
    .iter()
    .any(|w| n.contains(w))
}

/// The `${VAR}` / `${VAR:-default}` references of a header value, in order, or why the
/// value is not one akbench (and Harbor) can resolve.
pub fn references(value: &str) -> Result<Vec<(String, Option<String>)>, String> {
    let mut out = Vec::new();
    let mut rest = value;
    while let Some(start) = rest.find("${") {
        let after = &rest[start + 2..];
        let end = after
            .find('}')
            .ok_or_else(|| "has a `${` without its `}`".to_string())?;
        let inner = &after[..end];
        let (name, default) = match inner.split_once(":-") {
            Some((n, d)) => (n, Some(d.to_string())),
            None => (inner, None),
        };
        if !crate::agent::is_env_name(name) || default.as_deref().is_some_and(|d| d.contains("${"))
        {
            return Err(format!(
                "`${{{}}}` is not a variable reference",
                crate::limits::elide(inner)
            ));
        }
        out.push((name.to_string(), default));
        rest = &after[end + 1..];
    }
    Ok(out)
}

fn check_header(name: &str, value: &str) -> Result<(), (String, &'static str)> {
    let token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+.^_`|~-".contains(c);
    if name.is_empty() || !name.chars().all(token) {
        return Err((
            "is not an HTTP header name".into(),
            "name the header with letters, digits and `-`",
        ));
    }
    if value.contains('\r') || value.contains('\n') {
        return Err(("holds a line break".into(), "write the value on one line"));
    }
    let refs = references(value).map_err(|p| (p, "write `${NAME}` or `${NAME:-default}`"))?;
    if credential_header(name) {
        let literal = {
            let mut v = value.to_string();
            for (n, d) in &refs {
                let r = match d {
                    Some(d) => format!("${{{n}:-{d}}}"),
                    None => format!("${{{n}}}"),
                };
                v = v.replacen(&r, "", 1);
            }
            v
        };
        let scheme_only = literal.trim().is_empty()
            || (literal.trim().chars().all(|c| c.is_ascii_alphabetic()) && !refs.is_empty());
        if refs
            .iter()
            .any(|(_, d)| d.as_deref().is_some_and(|d| !d.is_empty()))
            || !scheme_only
        {
            return Err((
                "holds a credential written in task.toml (a task is shared and planned as written)".into(),
                "refer to a variable without a default, such as `Bearer ${API_TOKEN}`, and set it where the worker runs",
            ));
        }
    }
    Ok(())
}

/// The variable header `h` of server `s` (their positions in [`Parsed::servers`]) travels
/// in, in the agent's environment.
pub fn header_var(s: usize, h: usize) -> String {
    format!("AKBENCH_MCP_AUTH_{s}_{h}")
}

/// One header resolved for the agent: the variable it travels in, its value, and whether it
/// is a credential (a credential header's name, as Harbor counts them): only those are
/// scrubbed from what is stored, so a plain value such as `X-Team: search` does not blank
/// every "search" in the attempt's logs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedHeader {
    /// `AKBENCH_MCP_AUTH_<s>_<h>` ([`header_var`]).
    pub var: String,
    /// The resolved value.
    pub value: String,
    /// A credential: kept out of records and logs.
    pub secret: bool,
}

/// Every header resolved (`lookup` reads the worker's environment), or the first that
/// cannot be, naming the server, the header and the variable.
pub fn resolve_headers(
    servers: &[McpServer],
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<Vec<ResolvedHeader>, String> {
    let mut out = Vec::new();
    for (s, server) in servers.iter().enumerate() {
        for (h, (name, value)) in server.headers.iter().enumerate() {
            let mut resolved = value.clone();
            let refs = references(value)
                .map_err(|e| format!("MCP server `{}` header `{name}` {e}", server.name))?;
            for (var, default) in refs {
                let written = match &default {
                    Some(d) => format!("${{{var}:-{d}}}"),
                    None => format!("${{{var}}}"),
                };
                let got = lookup(&var).or(default).ok_or_else(|| {
                    format!(
                        "MCP server `{}` header `{name}` refers to `{var}`, which is not set where the worker runs; fix: export {var} before starting the worker (or `akbench`)",
                        server.name
                    )
                })?;
                if got.contains('\r') || got.contains('\n') {
                    return Err(format!(
                        "MCP server `{}` header `{name}`: `{var}` holds a line break; fix: set it to one line",
                        server.name
                    ));
                }
                resolved = resolved.replacen(&written, &got, 1);
            }
            out.push(ResolvedHeader {
                var: header_var(s, h),
                value: resolved,
                secret: credential_header(name),
            });
        }
    }
    Ok(out)
}

/// `AKBENCH_MCP_SERVERS`: the servers as JSON ([`servers_value`]); `None` without servers.
pub fn servers_json(servers: &[McpServer]) -> Option<String> {
    (!servers.is_empty()).then(|| servers_value(servers).to_string())
}

/// The servers as a JSON list (`name`, `transport`, `url` or `command` and `args`,
/// `headers` naming each value's variable): what every agent gets, and what `akbench task
/// check --json` lists.
pub fn servers_value(servers: &[McpServer]) -> serde_json::Value {
    let list: Vec<serde_json::Value> = servers
        .iter()
        .enumerate()
        .map(|(s, server)| {
            let headers: serde_json::Map<String, serde_json::Value> = server
                .headers
                .keys()
                .enumerate()
                .map(|(h, k)| (k.clone(), format!("${{{}}}", header_var(s, h)).into()))
                .collect();
            serde_json::json!({
                "name": server.name,
                "transport": server.transport.as_str(),
                "url": server.url,
                "command": server.command,
                "args": server.args,
                "headers": headers,
            })
        })
        .collect();
    serde_json::Value::Array(list)
}

impl McpServer {
    /// One line for `akbench task check`: `warehouse: streamable-http http://warehouse:8000/mcp`
    /// or `files: stdio python3 /opt/files.py`.
    pub fn summary_line(&self) -> String {
        let target = match self.transport {
            Transport::Stdio => std::iter::once(self.command.as_deref().unwrap_or_default())
                .chain(self.args.iter().map(String::as_str))
                .collect::<Vec<_>>()
                .join(" "),
            Transport::Sse | Transport::StreamableHttp => self.url.clone().unwrap_or_default(),
        };
        let headers = if self.headers.is_empty() {
            String::new()
        } else {
            format!(
                " (headers: {})",
                self.headers.keys().cloned().collect::<Vec<_>>().join(", ")
            )
        };
        format!(
            "{}: {} {target}{headers}",
            self.name,
            self.transport.as_str()
        )
    }
}

mod clients;
pub use clients::{
    claude_code_args, codex_args, gemini_settings, instruction_note, opencode_config,
};

#[cfg(test)]
#[path = "mcp_tests.rs"]
mod tests;
