//! A loopback model provider for tests: the Anthropic Messages API (`POST /v1/messages`,
//! streaming and not), the OpenAI Responses API (`POST /v1/responses`, streaming), OpenAI
//! Chat Completions (`POST /v1/chat/completions`, streaming and not, `stream_options`
//! usage chunk) and Gemini's `models/M:generateContent` / `:streamGenerateContent?alt=sse`
//! (`usageMetadata`), far enough for one tool call and a final answer. Every answer reports
//! 100 prompt tokens (20 of them cached) and 10 output tokens.
//!
//! The conversation is scripted (or, for Claude Code, scripted to call another tool first:
//! [`ToolFirst`]): the first request of a conversation (no tool result in it)
//! is answered with one call of the request's shell tool running [`FakeProvider::fix`] (or,
//! with no fix, with the final answer at once); a request carrying a tool result gets the
//! final answer. An agent offering no tool that asks for whole files back (aider's `whole`
//! edit format) gets the final answer followed by the file a fix `echo <text> > <file>`
//! writes, in aider's file listing format. The [`Mode`] can be changed at any time: `Down` closes the listening socket
//! (connections are refused) and `Up` binds the same port again; `Status(n)` answers every
//! request with HTTP n and the provider's own error body.
//!
//! It is a hand-written HTTP/1.1 server on tokio (one request per connection, `Connection:
//! close`), so a mode change takes effect on the very next request: no keep-alive connection
//! outlives it.
#![allow(dead_code)]

use serde_json::{json, Value};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// How the provider answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Answers the scripted conversation.
    Up,
    /// Refuses connections (nothing listens on the port).
    Down,
    /// Answers every request with this HTTP status and an error body.
    Status(u16),
}

struct Shared {
    mode: Mutex<Mode>,
    fix: Mutex<Option<String>>,
    requests: AtomicU64,
    log: Mutex<Vec<String>>,
    tool_first: Mutex<Option<ToolFirst>>,
    tools_seen: Mutex<std::collections::BTreeSet<String>>,
    tool_specs: Mutex<std::collections::BTreeMap<String, Value>>,
}

/// A conversation that calls other tools first (an MCP server's, as Claude Code names them:
/// `mcp__SERVER__TOOL`), one after the other, then the shell tool with the command `then`
/// makes of their result texts, then answers (Anthropic Messages only;
/// [`FakeProvider::call_tool_first`]); for the OpenAI Responses API (codex) the call goes to the
/// offered function whose name ends with the tool's.
#[derive(Clone)]
pub struct ToolFirst {
    /// Each call: the tool's name and its input.
    pub calls: Vec<(String, Value)>,
    /// The shell command to run given the calls' result texts, in order.
    pub then: fn(&[String]) -> String,
}

/// A running fake provider.
pub struct FakeProvider {
    addr: SocketAddr,
    shared: Arc<Shared>,
    rt: tokio::runtime::Runtime,
    server: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

/// Final answer text of every scripted conversation.
pub const FINAL_ANSWER: &str = "Done: value.txt now holds the answer.";

impl FakeProvider {
    /// Starts on a free loopback port in `mode`, with `fix` as the shell command the scripted
    /// conversation runs (None: the model answers without touching anything).
    pub fn start(mode: Mode, fix: Option<&str>) -> FakeProvider {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let listener = rt.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
        let addr = listener.local_addr().unwrap();
        let shared = Arc::new(Shared {
            mode: Mutex::new(Mode::Up),
            fix: Mutex::new(fix.map(str::to_string)),
            requests: AtomicU64::new(0),
            log: Mutex::new(Vec::new()),
            tool_first: Mutex::new(None),
            tools_seen: Mutex::new(Default::default()),
            tool_specs: Mutex::new(Default::default()),
        });
        let p = FakeProvider {
            addr,
            shared,
            rt,
            server: Mutex::new(None),
        };
        p.serve(listener);
        p.set_mode(mode);
        p
    }

    fn serve(&self, listener: TcpListener) {
        let shared = self.shared.clone();
        let handle = self.rt.spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let shared = shared.clone();
                tokio::spawn(async move {
                    let _ = handle(stream, &shared).await;
                });
            }
        });
        *self.server.lock().unwrap() = Some(handle);
    }

    /// Changes how the next requests are answered.
    pub fn set_mode(&self, mode: Mode) {
        let was = std::mem::replace(&mut *self.shared.mode.lock().unwrap(), mode);
        if mode == Mode::Down && was != Mode::Down {
            if let Some(h) = self.server.lock().unwrap().take() {
                h.abort();
                // Wait until the listener is dropped, so the port refuses from now on.
                let _ = self.rt.block_on(h);
            }
        } else if mode != Mode::Down && was == Mode::Down {
            let listener = self
                .rt
                .block_on(TcpListener::bind(self.addr))
                .expect("rebind the fake provider's port");
            self.serve(listener);
        }
    }

    /// `http://127.0.0.1:port` (Anthropic clients add `/v1/messages`).
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// `127.0.0.1:port`: the endpoint an agent descriptor declares (`network`) so the sandbox
    /// forwards it.
    pub fn endpoint(&self) -> String {
        self.addr.to_string()
    }

    /// `http://127.0.0.1:port/v1` (OpenAI clients add `/responses`).
    pub fn openai_base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Requests answered so far (any mode but `Down`).
    pub fn requests(&self) -> u64 {
        self.shared.requests.load(Ordering::SeqCst)
    }

    /// Scripts the Anthropic conversation as [`ToolFirst`] says (once the tool is offered).
    pub fn call_tool_first(&self, script: ToolFirst) {
        *self.shared.tool_first.lock().unwrap() = Some(script);
    }

    /// The names of every tool offered to the model so far (Anthropic Messages).
    pub fn tools_seen(&self) -> Vec<String> {
        self.shared
            .tools_seen
            .lock()
            .unwrap()
            .iter()
            .cloned()
            .collect()
    }

    /// The last spec offered of the tool `name` (`Null` when never offered).
    pub fn tool_spec(&self, name: &str) -> Value {
        self.shared
            .tool_specs
            .lock()
            .unwrap()
            .get(name)
            .cloned()
            .unwrap_or(Value::Null)
    }

    /// `METHOD path -> status` of every request answered so far.
    pub fn log(&self) -> Vec<String> {
        self.shared.log.lock().unwrap().clone()
    }
}

async fn handle(mut stream: TcpStream, shared: &Shared) -> std::io::Result<()> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    let (head_end, content_length) = loop {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(pos) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..pos]).to_ascii_lowercase();
            let len = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or(0);
            break (pos + 4, len);
        }
    };
    while buf.len() < head_end + content_length {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let request_line = head.lines().next().unwrap_or_default().to_string();
    let mut parts = request_line.split_whitespace();
    let method = parts.next().unwrap_or_default().to_string();
    let path = parts.next().unwrap_or_default().to_string();
    let path = path.split('?').next().unwrap_or_default().to_string();
    let body: Value = serde_json::from_slice(&buf[head_end..]).unwrap_or(Value::Null);

    shared.requests.fetch_add(1, Ordering::SeqCst);
    let mode = *shared.mode.lock().unwrap();
    let fix = shared.fix.lock().unwrap().clone();
    if let Some(tools) = body["tools"].as_array() {
        let mut seen = shared.tools_seen.lock().unwrap();
        seen.extend(
            tools
                .iter()
                .filter_map(|t| t["name"].as_str())
                .map(str::to_string),
        );
        let mut specs = shared.tool_specs.lock().unwrap();
        for t in tools {
            if let Some(n) = t["name"].as_str() {
                specs.insert(n.to_string(), t.clone());
            }
        }
    }
    let tool_first = shared.tool_first.lock().unwrap().clone();
    let (status, content_type, text) = match tool_first {
        Some(script) if mode == Mode::Up && method == "POST" && path.ends_with("/v1/messages") => {
            anthropic_reply(&body, tool_first_block(&body, &script))
        }
        Some(script) if mode == Mode::Up && method == "POST" && path.ends_with("/responses") => (
            200,
            SSE,
            openai_reply(&body, openai_tool_first(&body, &script)),
        ),
        _ => answer(mode, &method, &path, &body, fix.as_deref()),
    };
    shared
        .log
        .lock()
        .unwrap()
        .push(format!("{method} {path} -> {status}"));
    let reason = match status {
        200 => "OK",
        401 => "Unauthorized",
        404 => "Not Found",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        _ => "Status",
    };
    // A rate limit says when to come back, as real providers do (`retry-after-ms` is the
    // OpenAI SDK's): a short wait, so a CLI's own retries take seconds, not minutes (Qwen
    // Code's took 100 s without it before it reported the limit).
    let retry_after = if status == 429 {
        "retry-after: 1\r\nretry-after-ms: 50\r\n"
    } else {
        ""
    };
    let response = format!(
        "HTTP/1.1 {status} {reason}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\nrequest-id: req_fake\r\nx-request-id: req_fake\r\n{retry_after}\r\n{text}",
        text.len()
    );
    stream.write_all(response.as_bytes()).await?;
    stream.shutdown().await
}

const JSON: &str = "application/json";
const SSE: &str = "text/event-stream";

fn answer(
    mode: Mode,
    method: &str,
    path: &str,
    body: &Value,
    fix: Option<&str>,
) -> (u16, &'static str, String) {
    let openai = path.ends_with("/responses") || path.ends_with("/chat/completions");
    let gemini = path.contains(":generateContent")
        || path.contains(":streamGenerateContent")
        || path.contains(":countTokens");
    if let Mode::Status(code) = mode {
        if gemini {
            return (code, JSON, gemini_error_body(code));
        }
        return (code, JSON, error_body(openai, code));
    }
    if method != "POST" {
        // Model listings and the like: an empty list.
        return (200, JSON, json!({"data": [], "object": "list"}).to_string());
    }
    if path.ends_with("/messages/count_tokens") {
        return (200, JSON, json!({"input_tokens": 12}).to_string());
    }
    if path.ends_with("/messages") {
        return anthropic(body, fix);
    }
    if path.ends_with("/chat/completions") {
        return chat_completions(body, fix);
    }
    if openai {
        return (200, SSE, openai_stream(body, fix));
    }
    if path.contains(":countTokens") {
        return (200, JSON, json!({"totalTokens": 12}).to_string());
    }
    if gemini {
        return gemini_answer(path, body, fix);
    }
    (
        404,
        JSON,
        json!({"type": "error", "error": {"type": "not_found_error", "message": format!("no route {path}")}})
            .to_string(),
    )
}

fn error_body(openai: bool, code: u16) -> String {
    let (kind, message) = match code {
        401 => ("authentication_error", "invalid x-api-key"),
        403 => ("permission_error", "this key may not use this model"),
        429 => ("rate_limit_error", "rate limit exceeded, slow down"),
        529 => ("overloaded_error", "overloaded"),
        _ => ("api_error", "internal server error"),
    };
    if openai {
        json!({"error": {"message": message, "type": kind, "code": kind, "param": null}})
            .to_string()
    } else {
        json!({"type": "error", "error": {"type": kind, "message": message}}).to_string()
    }
}

// ---- Anthropic Messages ----

/// True when the conversation already holds a tool result (the tool call was made).
fn anthropic_has_tool_result(body: &Value) -> bool {
    body["messages"].as_array().is_some_and(|ms| {
        ms.iter().any(|m| {
            m["content"].as_array().is_some_and(|blocks| {
                blocks
                    .iter()
                    .any(|b| b["type"].as_str() == Some("tool_result"))
            })
        })
    })
}

fn anthropic_tool(body: &Value) -> Option<String> {
    body["tools"]
        .as_array()?
        .iter()
        .filter_map(|t| t["name"].as_str())
        .find(|n| *n == "Bash")
        .map(str::to_string)
}

/// The tool results of the conversation's messages, in order, as text.
fn anthropic_tool_results(body: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for m in body["messages"].as_array().into_iter().flatten() {
        for b in m["content"].as_array().into_iter().flatten() {
            if b["type"].as_str() != Some("tool_result") {
                continue;
            }
            out.push(match &b["content"] {
                Value::String(s) => s.clone(),
                Value::Array(parts) => parts
                    .iter()
                    .filter_map(|p| p["text"].as_str())
                    .collect::<Vec<_>>()
                    .join(""),
                _ => String::new(),
            });
        }
    }
    out
}

/// [`ToolFirst`]'s next block: its next call (when the tool is offered), then the shell with
/// the command made of the results, then the final answer.
fn tool_first_block(body: &Value, script: &ToolFirst) -> Value {
    let offered = |name: &str| {
        body["tools"]
            .as_array()
            .is_some_and(|ts| ts.iter().any(|t| t["name"].as_str() == Some(name)))
    };
    let results = anthropic_tool_results(body);
    let k = results.len();
    match (script.calls.get(k), anthropic_tool(body)) {
        (Some((tool, input)), _) if offered(tool) => json!({"type": "tool_use",
            "id": format!("toolu_fake_call_{k}"), "name": tool, "input": input}),
        (None, Some(shell)) if k == script.calls.len() => json!({"type": "tool_use",
            "id": "toolu_fake_shell", "name": shell,
            "input": {"command": (script.then)(&results), "description": "Write the answer"}}),
        _ => json!({"type": "text", "text": FINAL_ANSWER}),
    }
}

fn anthropic(body: &Value, fix: Option<&str>) -> (u16, &'static str, String) {
    let tool = anthropic_tool(body);
    let block = match (fix, tool) {
        (Some(cmd), Some(tool)) if !anthropic_has_tool_result(body) => json!({
            "type": "tool_use", "id": "toolu_fake_1", "name": tool,
            "input": {"command": cmd, "description": "Write the answer"}
        }),
        // Side requests (titles, summaries) and the final answer.
        _ => json!({"type": "text", "text": FINAL_ANSWER}),
    };
    anthropic_reply(body, block)
}

/// An Anthropic Messages answer holding one block (streamed when asked).
fn anthropic_reply(body: &Value, block: Value) -> (u16, &'static str, String) {
    let model = body["model"].as_str().unwrap_or("claude-fake").to_string();
    let stop = if block["type"] == "tool_use" {
        "tool_use"
    } else {
        "end_turn"
    };
    let usage = json!({"input_tokens": 100, "cache_creation_input_tokens": 0,
                       "cache_read_input_tokens": 20, "output_tokens": 10});
    if body["stream"].as_bool() != Some(true) {
        let msg = json!({"id": "msg_fake", "type": "message", "role": "assistant", "model": model,
            "content": [block], "stop_reason": stop, "stop_sequence": null, "usage": usage});
        return (200, JSON, msg.to_string());
    }
    let mut events = vec![(
        "message_start",
        json!({"type": "message_start", "message": {"id": format!("msg_fake_{}", uuid::Uuid::now_v7().simple()),
            "type": "message", "role": "assistant", "model": model, "content": [],
            "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": 100, "cache_creation_input_tokens": 0,
                      "cache_read_input_tokens": 20, "output_tokens": 1}}}),
    )];
    if block["type"] == "tool_use" {
        events.push((
            "content_block_start",
            json!({"type": "content_block_start", "index": 0,
                   "content_block": {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}}),
        ));
        events.push((
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0,
                   "delta": {"type": "input_json_delta", "partial_json": block["input"].to_string()}}),
        ));
    } else {
        events.push((
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ));
        events.push((
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0,
                   "delta": {"type": "text_delta", "text": block["text"]}}),
        ));
    }
    events.push((
        "content_block_stop",
        json!({"type": "content_block_stop", "index": 0}),
    ));
    events.push((
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
               "usage": {"output_tokens": 10}}),
    ));
    events.push(("message_stop", json!({"type": "message_stop"})));
    (200, SSE, sse(&events))
}

fn sse(events: &[(&str, Value)]) -> String {
    events
        .iter()
        .map(|(name, data)| format!("event: {name}\ndata: {data}\n\n"))
        .collect()
}

// ---- OpenAI Responses ----

fn openai_has_tool_result(body: &Value) -> bool {
    body["input"].as_array().is_some_and(|items| {
        items.iter().any(|i| {
            i["type"]
                .as_str()
                .is_some_and(|t| t.ends_with("call_output"))
        })
    })
}

/// The request's shell tool and the arguments that run `cmd` with it.
fn openai_shell_call(body: &Value, cmd: &str) -> Option<(String, String)> {
    let tools = body["tools"].as_array()?;
    for name in ["shell_command", "shell", "exec_command", "local_shell"] {
        let Some(tool) = tools.iter().find(|t| t["name"].as_str() == Some(name)) else {
            continue;
        };
        let props = &tool["parameters"]["properties"];
        let args = if props.get("cmd").is_some() {
            json!({"cmd": cmd})
        } else if props["command"]["type"] == "array" {
            json!({"command": ["bash", "-lc", cmd]})
        } else {
            json!({"command": cmd})
        };
        return Some((name.to_string(), args.to_string()));
    }
    None
}

/// The function call outputs of a Responses conversation, in order, as text.
fn openai_tool_results(body: &Value) -> Vec<String> {
    body["input"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|i| {
            i["type"]
                .as_str()
                .is_some_and(|t| t.ends_with("call_output"))
        })
        .map(|i| match &i["output"] {
            Value::String(s) => s.clone(),
            Value::Array(parts) => parts
                .iter()
                .filter_map(|p| p["text"].as_str())
                .collect::<Vec<_>>()
                .join(""),
            other => other.to_string(),
        })
        .collect()
}

/// [`ToolFirst`]'s next item for a Responses conversation: its next call, then the shell,
/// then `None` (the final answer). A call goes to the offered function whose name ends with
/// the call's tool, or, as codex offers an MCP server's tools, to the function of that name
/// in the `namespace` tool named `mcp__SERVER` (the third value: the namespace).
fn openai_tool_first(body: &Value, script: &ToolFirst) -> Option<(String, String, Option<String>)> {
    let tools: Vec<&Value> = body["tools"].as_array().into_iter().flatten().collect();
    let results = openai_tool_results(body);
    let k = results.len();
    match script.calls.get(k) {
        Some((tool, input)) => {
            let short = tool.trim_start_matches("mcp__");
            if let Some(t) = tools
                .iter()
                .filter_map(|t| t["name"].as_str())
                .find(|n| *n == tool || n.ends_with(short))
            {
                return Some((t.to_string(), input.to_string(), None));
            }
            let (server, function) = short.split_once("__")?;
            let namespace = format!("mcp__{server}");
            tools
                .iter()
                .find(|t| t["type"] == "namespace" && t["name"] == namespace.as_str())?["tools"]
                .as_array()?
                .iter()
                .any(|f| f["name"] == function)
                .then(|| (function.to_string(), input.to_string(), Some(namespace)))
        }
        None if k == script.calls.len() => {
            openai_shell_call(body, &(script.then)(&results)).map(|(n, a)| (n, a, None))
        }
        None => None,
    }
}

fn openai_stream(body: &Value, fix: Option<&str>) -> String {
    let call = match fix {
        Some(cmd) if !openai_has_tool_result(body) => openai_shell_call(body, cmd),
        _ => None,
    };
    openai_reply(body, call.map(|(n, a)| (n, a, None)))
}

/// A streamed Responses answer: one function call (name, arguments, namespace), or (`None`)
/// the final answer.
fn openai_reply(body: &Value, call: Option<(String, String, Option<String>)>) -> String {
    let model = body["model"].as_str().unwrap_or("gpt-fake").to_string();
    let id = format!("resp_fake_{}", uuid::Uuid::now_v7().simple());
    let n = openai_tool_results(body).len();
    let item = match &call {
        Some((name, args, namespace)) => {
            let mut item = json!({"type": "function_call", "id": format!("fc_fake_{n}"),
                "call_id": format!("call_fake_{n}"), "name": name, "arguments": args, "status": "completed"});
            if let Some(ns) = namespace {
                item["namespace"] = ns.clone().into();
            }
            item
        }
        None => {
            json!({"type": "message", "id": "msg_fake_1", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": FINAL_ANSWER, "annotations": []}]})
        }
    };
    let response = |status: &str, output: Value| {
        json!({"id": id, "object": "response", "created_at": 0, "status": status, "model": model,
               "output": output,
               "usage": {"input_tokens": 100, "input_tokens_details": {"cached_tokens": 20},
                         "output_tokens": 10, "output_tokens_details": {"reasoning_tokens": 0},
                         "total_tokens": 110}})
    };
    let mut events = vec![
        (
            "response.created",
            json!({"type": "response.created", "response": response("in_progress", json!([]))}),
        ),
        (
            "response.output_item.added",
            json!({"type": "response.output_item.added", "output_index": 0, "item": item}),
        ),
    ];
    if call.is_none() {
        events.push((
            "response.output_text.delta",
            json!({"type": "response.output_text.delta", "item_id": "msg_fake_1", "output_index": 0,
                   "content_index": 0, "delta": FINAL_ANSWER}),
        ));
    }
    events.push((
        "response.output_item.done",
        json!({"type": "response.output_item.done", "output_index": 0, "item": item}),
    ));
    events.push((
        "response.completed",
        json!({"type": "response.completed", "response": response("completed", json!([item]))}),
    ));
    sse(&events)
}

// ---- OpenAI Chat Completions ----

/// The command mini-swe-agent's model must run to end the task.
pub const MINI_SUBMIT: &str = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT";

/// The shell tools the agents speaking Chat Completions or Gemini offer, first found wins.
const SHELL_TOOLS: &[&str] = &["run_shell_command", "bash", "shell", "execute_bash"];

fn chat_has_tool_result(body: &Value) -> bool {
    body["messages"]
        .as_array()
        .is_some_and(|ms| ms.iter().any(|m| m["role"].as_str() == Some("tool")))
}

/// The request's shell tool (Chat Completions `tools[].function`).
fn chat_shell_tool(body: &Value) -> Option<String> {
    let names: Vec<&str> = body["tools"]
        .as_array()?
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    SHELL_TOOLS
        .iter()
        .find(|n| names.contains(n))
        .map(|n| n.to_string())
}

/// What aider's `whole` edit format asks the model for (in its request).
const AIDER_WHOLE: &str = "*file listing*";

/// The file listing (aider's `whole` format) writing what `fix` (`echo <text> > <file>`)
/// writes, when `body` is aider's request in that format (no tools).
fn aider_listing(body: &Value, fix: &str) -> Option<String> {
    let (text, file) = fix.strip_prefix("echo ")?.split_once(" > ")?;
    let asks = body["tools"].is_null() && body["messages"].to_string().contains(AIDER_WHOLE);
    asks.then(|| format!("{file}\n```\n{text}\n```\n"))
}

fn chat_completions(body: &Value, fix: Option<&str>) -> (u16, &'static str, String) {
    let model = body["model"].as_str().unwrap_or("gpt-fake").to_string();
    // mini-swe-agent ends a run only with this command, never with a plain answer.
    let submit = body["messages"].to_string().contains(MINI_SUBMIT);
    let call = match (fix, chat_shell_tool(body)) {
        (Some(cmd), Some(tool)) if !chat_has_tool_result(body) => {
            Some((tool, cmd.to_string(), Value::Null))
        }
        (_, Some(tool)) if submit => {
            Some((tool, format!("echo {MINI_SUBMIT}"), json!(FINAL_ANSWER)))
        }
        _ => None,
    };
    let usage = json!({"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110,
                       "prompt_tokens_details": {"cached_tokens": 20}});
    if let Some(listing) = fix.and_then(|f| aider_listing(body, f)) {
        let message =
            json!({"role": "assistant", "content": format!("{FINAL_ANSWER}\n\n{listing}")});
        let resp = json!({"id": "chatcmpl-fake-aider", "object": "chat.completion", "created": 0,
            "model": model, "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            "usage": usage});
        return (200, JSON, resp.to_string());
    }
    let (message, finish) = match &call {
        Some((tool, cmd, content)) => (
            json!({"role": "assistant", "content": content,
                "tool_calls": [{"id": format!("call_fake_{}", uuid::Uuid::now_v7().simple()),
                "type": "function", "function": {"name": tool,
                "arguments": json!({"command": cmd, "description": "Write the answer"}).to_string()}}]}),
            "tool_calls",
        ),
        None => (
            json!({"role": "assistant", "content": FINAL_ANSWER}),
            "stop",
        ),
    };
    let id = format!("chatcmpl-fake-{}", uuid::Uuid::now_v7().simple());
    if body["stream"].as_bool() != Some(true) {
        let resp = json!({"id": id, "object": "chat.completion", "created": 0, "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}], "usage": usage});
        return (200, JSON, resp.to_string());
    }
    let mut delta = message.clone();
    if let Some(calls) = delta["tool_calls"].as_array_mut() {
        for (i, c) in calls.iter_mut().enumerate() {
            c["index"] = json!(i);
        }
    }
    let chunk = |choices: Value, usage: Value| {
        json!({"id": id, "object": "chat.completion.chunk", "created": 0, "model": model,
               "choices": choices, "usage": usage})
    };
    let chunks = [
        chunk(
            json!([{"index": 0, "delta": delta, "finish_reason": null}]),
            Value::Null,
        ),
        chunk(
            json!([{"index": 0, "delta": {}, "finish_reason": finish}]),
            Value::Null,
        ),
        chunk(json!([]), usage),
    ];
    let mut text: String = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
    text.push_str("data: [DONE]\n\n");
    (200, SSE, text)
}

// ---- Gemini generateContent ----

fn gemini_error_body(code: u16) -> String {
    let (status, message) = match code {
        401 => (
            "UNAUTHENTICATED",
            "API key not valid. Please pass a valid API key.",
        ),
        403 => ("PERMISSION_DENIED", "this key may not use this model"),
        429 => (
            "RESOURCE_EXHAUSTED",
            "Resource has been exhausted (e.g. check quota).",
        ),
        503 => (
            "UNAVAILABLE",
            "The model is overloaded. Please try again later.",
        ),
        _ => ("INTERNAL", "An internal error has occurred."),
    };
    json!({"error": {"code": code, "message": message, "status": status}}).to_string()
}

fn gemini_has_tool_result(body: &Value) -> bool {
    body["contents"].as_array().is_some_and(|cs| {
        cs.iter().any(|c| {
            c["parts"]
                .as_array()
                .is_some_and(|ps| ps.iter().any(|p| p.get("functionResponse").is_some()))
        })
    })
}

fn gemini_shell_tool(body: &Value) -> Option<String> {
    let names: Vec<&str> = body["tools"]
        .as_array()?
        .iter()
        .filter_map(|t| t["functionDeclarations"].as_array())
        .flatten()
        .filter_map(|f| f["name"].as_str())
        .collect();
    SHELL_TOOLS
        .iter()
        .find(|n| names.contains(n))
        .map(|n| n.to_string())
}

fn gemini_answer(path: &str, body: &Value, fix: Option<&str>) -> (u16, &'static str, String) {
    let model = path
        .rsplit('/')
        .next()
        .and_then(|m| m.split(':').next())
        .unwrap_or("gemini-fake")
        .to_string();
    let part = match (fix, gemini_shell_tool(body)) {
        (Some(cmd), Some(tool)) if !gemini_has_tool_result(body) => json!({
            "functionCall": {"name": tool, "args": {"command": cmd, "description": "Write the answer"}}
        }),
        _ => json!({"text": FINAL_ANSWER}),
    };
    let resp = json!({
        "candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 100, "candidatesTokenCount": 10, "totalTokenCount": 110,
                          "cachedContentTokenCount": 20},
        "modelVersion": model,
        "responseId": format!("resp_fake_{}", uuid::Uuid::now_v7().simple()),
    });
    if path.contains(":streamGenerateContent") {
        return (200, SSE, format!("data: {resp}\r\n\r\n"));
    }
    (200, JSON, resp.to_string())
}
