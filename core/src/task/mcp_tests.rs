use super::*;

fn list(toml_text: &str) -> Value {
    let t: toml::Table = toml::from_str(toml_text).unwrap();
    t["environment"]["mcp_servers"].clone()
}

#[test]
fn harbor_s_forms_are_read() {
    let p = parse(&list(
        r#"
[[environment.mcp_servers]]
name = "mcp-server"
url = "http://mcp-server:8000/sse"

[[environment.mcp_servers]]
name = "warehouse"
transport = "http"
url = "http://warehouse:8000/mcp"
headers = { "X-Team" = "search", Authorization = "Bearer ${WAREHOUSE_TOKEN}" }

[[environment.mcp_servers]]
name = "files"
transport = "stdio"
command = "python3"
args = ["/opt/files.py", "--root", "/app"]
"#,
    ))
    .unwrap();
    assert!(p.replaced.is_empty());
    let s = &p.servers;
    assert_eq!(s.len(), 3);
    assert_eq!(s[0].transport, Transport::Sse, "sse is the default");
    assert_eq!(s[0].host(), Some("mcp-server"));
    assert_eq!(
        s[1].transport,
        Transport::StreamableHttp,
        "http is streamable-http"
    );
    assert_eq!(s[1].headers.len(), 2);
    assert_eq!(s[2].transport, Transport::Stdio);
    assert_eq!(s[2].args, ["/opt/files.py", "--root", "/app"]);
    assert_eq!(s[2].host(), None);
}

#[test]
fn a_later_server_of_the_same_name_replaces_the_earlier() {
    let p = parse(&list(
        r#"
[[environment.mcp_servers]]
name = "a"
url = "http://one/sse"
[[environment.mcp_servers]]
name = "b"
url = "http://b/sse"
[[environment.mcp_servers]]
name = "a"
url = "http://two/sse"
[[environment.mcp_servers]]
name = "a"
url = "http://three/sse"
"#,
    ))
    .unwrap();
    let names: Vec<_> = p
        .servers
        .iter()
        .map(|s| (s.name.as_str(), s.host()))
        .collect();
    assert_eq!(names, [("a", Some("three")), ("b", Some("b"))]);
    assert_eq!(
        p.replaced,
        ["environment.mcp_servers[0]", "environment.mcp_servers[2]"]
    );
}

#[test]
fn hosts_are_read_from_urls() {
    let table = [
        ("http://tools:8000/mcp", Some("tools")),
        ("https://api.example.com/mcp?x=1", Some("api.example.com")),
        ("http://user:pw@svc:80/", Some("svc")),
        ("http://[::1]:8000/mcp", Some("::1")),
        ("http://localhost", Some("localhost")),
    ];
    for (url, host) in table {
        let s = McpServer {
            name: "n".into(),
            transport: Transport::Sse,
            url: Some(url.into()),
            command: None,
            args: vec![],
            headers: BTreeMap::new(),
        };
        assert_eq!(s.host(), host, "{url}");
    }
}

#[test]
fn every_bad_server_is_refused_naming_its_field() {
    let table: &[(&str, &str, &str)] = &[
        ("mcp_servers = {}", "environment.mcp_servers", "not a list"),
        ("mcp_servers = [1]", "environment.mcp_servers[0]", "not a table"),
        ("mcp_servers = [{ url = \"http://a\" }]", "environment.mcp_servers[0].name", "missing"),
        ("mcp_servers = [{ name = \"a b\", url = \"http://a\" }]", "environment.mcp_servers[0].name", "not 1 to 64"),
        ("mcp_servers = [{ name = \"a\", url = \"http://a\", colour = 1 }]", "environment.mcp_servers[0].colour", "not a key"),
        ("mcp_servers = [{ name = \"a\", transport = \"ws\", url = \"http://a\" }]", "environment.mcp_servers[0].transport", "`ws`"),
        ("mcp_servers = [{ name = \"a\" }]", "environment.mcp_servers[0].url", "needs one"),
        ("mcp_servers = [{ name = \"a\", url = \"ftp://a\" }]", "environment.mcp_servers[0].url", "not an http"),
        ("mcp_servers = [{ name = \"a\", url = \"http://a b\" }]", "environment.mcp_servers[0].url", "not an http"),
        ("mcp_servers = [{ name = \"a\", url = \"http://a\", command = \"x\" }]", "environment.mcp_servers[0].command", "reaches by its URL"),
        ("mcp_servers = [{ name = \"a\", transport = \"stdio\" }]", "environment.mcp_servers[0].command", "missing"),
        ("mcp_servers = [{ name = \"a\", transport = \"stdio\", command = \"x\", url = \"http://a\" }]", "environment.mcp_servers[0].url", "stdio"),
        ("mcp_servers = [{ name = \"a\", transport = \"stdio\", command = \"x\", headers = { A = \"b\" } }]", "environment.mcp_servers[0].headers", "stdio"),
        ("mcp_servers = [{ name = \"a\", transport = \"stdio\", command = \"x\", args = [1] }]", "environment.mcp_servers[0].args", "not a string"),
        ("mcp_servers = [{ name = \"a\", url = \"http://a\", headers = { \"X Y\" = \"b\" } }]", "environment.mcp_servers[0].headers.X Y", "header name"),
        ("mcp_servers = [{ name = \"a\", url = \"http://a\", headers = { A = \"b\\nc\" } }]", "environment.mcp_servers[0].headers.A", "line break"),
        ("mcp_servers = [{ name = \"a\", url = \"http://a\", headers = { Authorization = \"Bearer sk-123\" } }]", "environment.mcp_servers[0].headers.Authorization", "credential"),
        ("mcp_servers = [{ name = \"a\", url = \"http://a\", headers = { X-Api-Key = \"${K:-sk-1}\" } }]", "environment.mcp_servers[0].headers.X-Api-Key", "credential"),
        ("mcp_servers = [{ name = \"a\", url = \"http://a\", headers = { A = \"${1X}\" } }]", "environment.mcp_servers[0].headers.A", "not a variable"),
        ("mcp_servers = [{ name = \"a\", url = \"http://a\", headers = { A = \"${X\" } }]", "environment.mcp_servers[0].headers.A", "without its"),
    ];
    for (text, field, problem) in table {
        let doc: toml::Table = toml::from_str(&format!("[environment]\n{text}\n")).unwrap();
        let e = parse(&doc["environment"]["mcp_servers"]).unwrap_err();
        assert_eq!(e.field, *field, "{text}");
        assert!(e.problem.contains(problem), "{text}: {e:?}");
        assert!(!e.fix.is_empty(), "{text}");
    }
    let many = format!(
        "[environment]\nmcp_servers = [{}]\n",
        (0..33)
            .map(|i| format!("{{ name = \"s{i}\", url = \"http://s{i}\" }}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let doc: toml::Table = toml::from_str(&many).unwrap();
    assert!(parse(&doc["environment"]["mcp_servers"])
        .unwrap_err()
        .problem
        .contains("above 32"));
}

fn servers() -> Vec<McpServer> {
    parse(&list(
        r#"
[[environment.mcp_servers]]
name = "warehouse"
transport = "streamable-http"
url = "http://warehouse:8000/mcp"
headers = { Authorization = "Bearer ${WH_TOKEN}", X-Team = "${TEAM:-search}" }

[[environment.mcp_servers]]
name = "user"
url = "http://user:8000/sse"

[[environment.mcp_servers]]
name = "files"
transport = "stdio"
command = "python3"
args = ["/opt/files.py", "say \"hi\""]
"#,
    ))
    .unwrap()
    .servers
}

#[test]
fn headers_resolve_into_their_variables_or_name_what_is_missing() {
    let s = servers();
    let got = resolve_headers(&s, |n| (n == "WH_TOKEN").then(|| "sk-abc".to_string())).unwrap();
    assert_eq!(
        got,
        [
            ResolvedHeader {
                var: header_var(0, 0),
                value: "Bearer sk-abc".into(),
                secret: true,
            },
            // Not a credential's name: given to the agent, not scrubbed from logs.
            ResolvedHeader {
                var: header_var(0, 1),
                value: "search".into(),
                secret: false,
            },
        ]
    );
    let e = resolve_headers(&s, |_| None).unwrap_err();
    assert!(
        e.contains("`warehouse`") && e.contains("WH_TOKEN") && e.contains("fix:"),
        "{e}"
    );
    let e = resolve_headers(&s, |_| Some("a\nb".into())).unwrap_err();
    assert!(e.contains("line break"), "{e}");
}

#[test]
fn claude_code_gets_its_mcp_servers_json_with_variables_for_header_values() {
    let args = claude_code_args(&servers());
    assert_eq!(args[0], "--mcp-config");
    let v: serde_json::Value = serde_json::from_str(&args[1]).unwrap();
    assert_eq!(
        v,
        serde_json::json!({"mcpServers": {
            "warehouse": {"type": "http", "url": "http://warehouse:8000/mcp",
                "headers": {"Authorization": "${AKBENCH_MCP_AUTH_0_0}", "X-Team": "${AKBENCH_MCP_AUTH_0_1}"}},
            "user": {"type": "sse", "url": "http://user:8000/sse"},
            "files": {"type": "stdio", "command": "python3", "args": ["/opt/files.py", "say \"hi\""]},
        }})
    );
    assert!(!args[1].contains("sk-"), "no value in the argv");
    assert!(claude_code_args(&[]).is_empty());
}

#[test]
fn codex_gets_config_overrides_that_are_toml() {
    let args = codex_args(&servers());
    assert_eq!(args.len(), 6);
    assert!(
        args[1].starts_with("mcp_servers.warehouse={ url = "),
        "{}",
        args[1]
    );
    for pair in args.chunks(2) {
        assert_eq!(pair[0], "-c");
        // Each override is a valid TOML line (codex parses it as one).
        let doc: toml::Table = toml::from_str(&pair[1].replacen('=', " = ", 1)).unwrap();
        assert!(doc["mcp_servers"].is_table(), "{}", pair[1]);
    }
    let all: toml::Table = toml::from_str(
        &args
            .chunks(2)
            .map(|p| p[1].replacen('=', " = ", 1))
            .collect::<Vec<_>>()
            .join("\n"),
    )
    .unwrap();
    let m = &all["mcp_servers"];
    assert_eq!(
        m["warehouse"]["url"].as_str(),
        Some("http://warehouse:8000/mcp")
    );
    assert_eq!(
        m["warehouse"]["env_http_headers"]["Authorization"].as_str(),
        Some("AKBENCH_MCP_AUTH_0_0")
    );
    assert_eq!(m["user"]["url"].as_str(), Some("http://user:8000/sse"));
    assert_eq!(m["files"]["command"].as_str(), Some("python3"));
    assert_eq!(m["files"]["args"][1].as_str(), Some("say \"hi\""));
    assert!(codex_args(&[]).is_empty());
}

#[test]
fn gemini_and_qwen_get_mcp_servers_settings_with_sse_named_as_sse() {
    assert_eq!(
        gemini_settings(&servers()).unwrap(),
        serde_json::json!({
            "warehouse": {"httpUrl": "http://warehouse:8000/mcp",
                "headers": {"Authorization": "${AKBENCH_MCP_AUTH_0_0}", "X-Team": "${AKBENCH_MCP_AUTH_0_1}"}},
            // Not Harbor's bare `url`: Gemini CLI 0.61 reads that as streamable HTTP.
            "user": {"url": "http://user:8000/sse", "type": "sse"},
            "files": {"command": "python3", "args": ["/opt/files.py", "say \"hi\""]},
        })
    );
    assert_eq!(gemini_settings(&[]), None);
}

#[test]
fn opencode_gets_its_mcp_config_with_env_references_for_header_values() {
    assert_eq!(
        opencode_config(&servers()).unwrap(),
        serde_json::json!({"mcp": {
            "warehouse": {"type": "remote", "url": "http://warehouse:8000/mcp", "oauth": false,
                "headers": {"Authorization": "{env:AKBENCH_MCP_AUTH_0_0}", "X-Team": "{env:AKBENCH_MCP_AUTH_0_1}"}},
            "user": {"type": "remote", "url": "http://user:8000/sse", "oauth": false},
            "files": {"type": "local", "command": ["python3", "/opt/files.py", "say \"hi\""]},
        }})
    );
    assert_eq!(opencode_config(&[]), None);
}

#[test]
fn mini_swe_agent_gets_harbor_s_note_word_for_word() {
    assert_eq!(
        instruction_note(&servers()),
        "\n\nMCP Servers:\nThe following MCP servers are available for this task.\n\
         - warehouse: streamable-http transport, url: http://warehouse:8000/mcp\n\
         - user: sse transport, url: http://user:8000/sse\n\
         - files: stdio transport, command: python3 /opt/files.py say \"hi\"\n"
    );
    assert_eq!(instruction_note(&[]), "");
}

#[test]
fn every_agent_gets_the_servers_as_json() {
    let v: serde_json::Value = serde_json::from_str(&servers_json(&servers()).unwrap()).unwrap();
    assert_eq!(v[0]["name"], "warehouse");
    assert_eq!(v[0]["transport"], "streamable-http");
    assert_eq!(v[0]["headers"]["X-Team"], "${AKBENCH_MCP_AUTH_0_1}");
    assert_eq!(v[1]["transport"], "sse");
    assert_eq!(v[2]["command"], "python3");
    assert_eq!(servers_json(&[]), None);
}

#[test]
fn the_adapter_lists_name_known_adapters_once() {
    for a in TAKES_MCP.iter().chain(IGNORES_MCP) {
        assert!(crate::agent::adapters::ADAPTERS.contains(a), "{a}");
    }
    assert!(!TAKES_MCP.iter().any(|a| IGNORES_MCP.contains(a)));
}

#[test]
fn task_check_lines_name_each_server_and_never_a_header_value() {
    let lines: Vec<String> = servers().iter().map(McpServer::summary_line).collect();
    assert_eq!(
        lines,
        [
            "warehouse: streamable-http http://warehouse:8000/mcp (headers: Authorization, X-Team)",
            "user: sse http://user:8000/sse",
            "files: stdio python3 /opt/files.py say \"hi\"",
        ]
    );
}
