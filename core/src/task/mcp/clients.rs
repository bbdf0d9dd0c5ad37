//! How each agent CLI is handed a task's MCP servers: the configuration it reads, built
//! from [`McpServer`]s as Harbor 0.25's installed agents build theirs (claude-code's
//! `--mcp-config`, codex's `-c mcp_servers.NAME`, Gemini CLI's and Qwen Code's
//! `mcpServers` settings, opencode's `mcp` config), and Harbor's note for mini-swe-agent,
//! which has no MCP client. A header's value is never written: each names its variable
//! ([`header_var`]) in the CLI's own syntax, which the CLI expands from its environment.
//!
//! Where Harbor's mapping is wrong for the CLI version akbench pins, this one differs and
//! says why (Gemini CLI 0.61 reads a bare `url` as streamable HTTP: an SSE server is given
//! `"type": "sse"`).

use super::{header_var, McpServer, Transport};

/// claude-code's `--mcp-config` (its `mcpServers` JSON, a header's value given as
/// `${VARIABLE}`, which claude-code expands from its environment); empty without servers.
pub fn claude_code_args(servers: &[McpServer]) -> Vec<String> {
    if servers.is_empty() {
        return Vec::new();
    }
    let mut map = serde_json::Map::new();
    for (s, server) in servers.iter().enumerate() {
        let entry = match server.transport {
            Transport::Stdio => serde_json::json!({
                "type": "stdio",
                "command": server.command,
                "args": server.args,
            }),
            Transport::Sse | Transport::StreamableHttp => {
                let mut e = serde_json::json!({
                    "type": if server.transport == Transport::Sse { "sse" } else { "http" },
                    "url": server.url,
                });
                if !server.headers.is_empty() {
                    let h: serde_json::Map<String, serde_json::Value> = server
                        .headers
                        .keys()
                        .enumerate()
                        .map(|(h, k)| (k.clone(), format!("${{{}}}", header_var(s, h)).into()))
                        .collect();
                    e["headers"] = h.into();
                }
                e
            }
        };
        map.insert(server.name.clone(), entry);
    }
    let config = serde_json::json!({ "mcpServers": map });
    vec!["--mcp-config".into(), config.to_string()]
}

/// A TOML basic string (JSON's escapes are TOML's).
fn toml_string(s: &str) -> String {
    serde_json::Value::String(s.to_string()).to_string()
}

/// codex's `-c mcp_servers.NAME={...}` overrides (its config.toml `[mcp_servers.NAME]`: `url`
/// with `env_http_headers` naming each header's variable, or `command` and `args`); empty
/// without servers.
pub fn codex_args(servers: &[McpServer]) -> Vec<String> {
    let mut out = Vec::new();
    for (s, server) in servers.iter().enumerate() {
        let table = match server.transport {
            Transport::Stdio => format!(
                "{{ command = {}, args = [{}] }}",
                toml_string(server.command.as_deref().unwrap_or_default()),
                server
                    .args
                    .iter()
                    .map(|a| toml_string(a))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Transport::Sse | Transport::StreamableHttp => {
                let mut t = format!(
                    "{{ url = {}",
                    toml_string(server.url.as_deref().unwrap_or_default())
                );
                if !server.headers.is_empty() {
                    let h: Vec<String> = server
                        .headers
                        .keys()
                        .enumerate()
                        .map(|(h, k)| {
                            format!("{} = {}", toml_string(k), toml_string(&header_var(s, h)))
                        })
                        .collect();
                    t.push_str(&format!(", env_http_headers = {{ {} }}", h.join(", ")));
                }
                t.push_str(" }");
                t
            }
        };
        out.push("-c".into());
        // A bare key: codex splits the key path on dots and keeps quotes as part of the
        // name (checked with codex 0.171's `mcp list`); names are letters, digits, `-`, `_`.
        out.push(format!("mcp_servers.{}={table}", server.name));
    }
    out
}

/// Gemini CLI's and Qwen Code's `mcpServers` object (their `settings.json`): `httpUrl` for
/// streamable HTTP, `url` with `"type": "sse"` for SSE (Harbor writes a bare `url`, which
/// Gemini CLI 0.61 reads as streamable HTTP and cannot connect to an SSE server: checked
/// with `gemini mcp list`), `command` and `args` for stdio; headers as `${VARIABLE}`, which
/// both expand from their environment. `None` without servers.
pub fn gemini_settings(servers: &[McpServer]) -> Option<serde_json::Value> {
    if servers.is_empty() {
        return None;
    }
    let mut map = serde_json::Map::new();
    for (s, server) in servers.iter().enumerate() {
        let mut e = match server.transport {
            Transport::Stdio => serde_json::json!({
                "command": server.command,
                "args": server.args,
            }),
            Transport::StreamableHttp => serde_json::json!({ "httpUrl": server.url }),
            Transport::Sse => serde_json::json!({ "url": server.url, "type": "sse" }),
        };
        if server.transport != Transport::Stdio && !server.headers.is_empty() {
            e["headers"] = headers(server, s, |var| format!("${{{var}}}"));
        }
        map.insert(server.name.clone(), e);
    }
    Some(map.into())
}

/// opencode's config (`OPENCODE_CONFIG_CONTENT`, merged over its own): `mcp.NAME` as
/// Harbor writes it, `{"type": "local", "command": [command, args...]}` or `{"type":
/// "remote", "url", "oauth": false}` (no OAuth detection on a 401), headers as
/// `{env:VARIABLE}`, opencode's own syntax. `None` without servers.
pub fn opencode_config(servers: &[McpServer]) -> Option<serde_json::Value> {
    if servers.is_empty() {
        return None;
    }
    let mut map = serde_json::Map::new();
    for (s, server) in servers.iter().enumerate() {
        let e = match server.transport {
            Transport::Stdio => serde_json::json!({
                "type": "local",
                "command": server.command.iter().chain(server.args.iter()).collect::<Vec<_>>(),
            }),
            Transport::Sse | Transport::StreamableHttp => {
                let mut e = serde_json::json!({
                    "type": "remote",
                    "url": server.url,
                    "oauth": false,
                });
                if !server.headers.is_empty() {
                    e["headers"] = headers(server, s, |var| format!("{{env:{var}}}"));
                }
                e
            }
        };
        map.insert(server.name.clone(), e);
    }
    Some(serde_json::json!({ "mcp": map }))
}

/// Harbor's note for mini-swe-agent, which has no MCP client (appended to the
/// instruction, word for word): each server's name, transport and URL or command. Empty
/// without servers.
pub fn instruction_note(servers: &[McpServer]) -> String {
    if servers.is_empty() {
        return String::new();
    }
    let mut out =
        String::from("\n\nMCP Servers:\nThe following MCP servers are available for this task.\n");
    for s in servers {
        match s.transport {
            Transport::Stdio => out.push_str(&format!(
                "- {}: stdio transport, command: {} {}\n",
                s.name,
                s.command.as_deref().unwrap_or_default(),
                s.args.join(" ")
            )),
            t => out.push_str(&format!(
                "- {}: {} transport, url: {}\n",
                s.name,
                t.as_str(),
                s.url.as_deref().unwrap_or_default()
            )),
        }
    }
    out
}

/// A server's headers, each value naming its variable in a CLI's syntax (`wrap`).
fn headers(server: &McpServer, s: usize, wrap: impl Fn(&str) -> String) -> serde_json::Value {
    server
        .headers
        .keys()
        .enumerate()
        .map(|(h, k)| (k.clone(), wrap(&header_var(s, h)).into()))
        .collect::<serde_json::Map<String, serde_json::Value>>()
        .into()
}
