//! Real headless Chromium for the viewer's tests: `--dump-dom` / `--screenshot` runs, and a
//! small DevTools-protocol client (a minimal WebSocket over std TcpStream) for pages that must
//! be watched while they change.

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// The Chromium binary, when installed.
pub fn binary() -> Option<PathBuf> {
    ["chromium", "chromium-browser"].iter().find_map(|b| {
        std::env::var_os("PATH").and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|d| d.join(b))
                .find(|p| p.is_file())
        })
    })
}

/// Flags of every run (CI runs as root).
fn base(profile: &Path) -> Vec<String> {
    [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1280,1800",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([format!("--user-data-dir={}", profile.display())])
    .collect()
}

/// The DOM of `url` after its scripts ran.
pub fn dump_dom(bin: &Path, profile: &Path, url: &str) -> String {
    let out = Command::new(bin)
        .args(base(profile))
        .arg("--dump-dom")
        .arg(url)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "chromium --dump-dom {url}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Saves a screenshot of `url` to `file`.
pub fn screenshot(bin: &Path, profile: &Path, url: &str, file: &Path) {
    let out = Command::new(bin)
        .args(base(profile))
        .arg(format!("--screenshot={}", file.display()))
        .arg(url)
        .output()
        .unwrap();
    assert!(
        out.status.success() && file.is_file(),
        "chromium --screenshot {url}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A browser driven over the DevTools protocol, with one page attached.
pub struct Browser {
    child: Child,
    ws: TcpStream,
    session: String,
    next_id: u64,
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Browser {
    /// Starts Chromium with remote debugging on a free port and opens one blank page.
    pub fn start(bin: &Path, profile: &Path) -> Browser {
        let mut child = Command::new(bin)
            .args(base(profile))
            .arg("--remote-debugging-port=0")
            .arg("about:blank")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Chromium announces its endpoint on stderr: wait for that line.
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let ws_url = loop {
            let line = lines
                .next()
                .expect("chromium exited before announcing DevTools")
                .unwrap();
            if let Some(u) = line.strip_prefix("DevTools listening on ") {
                break u.trim().to_string();
            }
        };
        // Keep draining stderr so Chromium never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        let rest = ws_url.strip_prefix("ws://").unwrap();
        let (host, path) = rest.split_once('/').unwrap();
        let mut ws = TcpStream::connect(host).unwrap();
        write!(
            ws,
            "GET /{path} HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
             Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
        )
        .unwrap();
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            ws.read_exact(&mut byte).unwrap();
            head.push(byte[0]);
        }
        assert!(
            head.starts_with(b"HTTP/1.1 101"),
            "{}",
            String::from_utf8_lossy(&head)
        );
        let mut b = Browser {
            child,
            ws,
            session: String::new(),
            next_id: 0,
        };
        let target = b.call(None, "Target.createTarget", json!({"url": "about:blank"}));
        let target_id = target["targetId"].as_str().unwrap().to_string();
        let s = b.call(
            None,
            "Target.attachToTarget",
            json!({"targetId": target_id, "flatten": true}),
        );
        b.session = s["sessionId"].as_str().unwrap().to_string();
        b.page("Page.enable", json!({}));
        b
    }

    /// Sends a command to the attached page and returns its result.
    pub fn page(&mut self, method: &str, params: Value) -> Value {
        let s = self.session.clone();
        self.call(Some(&s), method, params)
    }

    /// Navigates and waits for the page's load event.
    pub fn navigate(&mut self, url: &str) {
        self.page("Page.navigate", json!({"url": url}));
        self.wait_event("Page.loadEventFired");
    }

    /// Evaluates `expr` in the page (awaiting a promise) and returns its value.
    pub fn eval(&mut self, expr: &str) -> Value {
        let r = self.page(
            "Runtime.evaluate",
            json!({"expression": expr, "awaitPromise": true, "returnByValue": true}),
        );
        assert!(r.get("exceptionDetails").is_none(), "{expr}: {r}");
        r["result"]["value"].clone()
    }

    /// Saves a PNG of the page.
    pub fn screenshot(&mut self, file: &Path) {
        let r = self.page(
            "Page.captureScreenshot",
            json!({"format": "png", "captureBeyondViewport": true}),
        );
        std::fs::write(file, base64_decode(r["data"].as_str().unwrap())).unwrap();
    }

    fn call(&mut self, session: Option<&str>, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let mut msg = json!({"id": id, "method": method, "params": params});
        if let Some(s) = session {
            msg["sessionId"] = json!(s);
        }
        self.send(&msg.to_string());
        loop {
            let v = self.recv();
            if v["id"] == json!(id) {
                assert!(v.get("error").is_none(), "{method}: {v}");
                return v["result"].clone();
            }
        }
    }

    fn wait_event(&mut self, method: &str) {
        loop {
            let v = self.recv();
            if v["method"] == json!(method) {
                return;
            }
        }
    }

    fn send(&mut self, text: &str) {
        let p = text.as_bytes();
        let mut frame = vec![0x81u8];
        match p.len() {
            n if n < 126 => frame.push(0x80 | n as u8),
            n if n < 65536 => {
                frame.push(0x80 | 126);
                frame.extend_from_slice(&(n as u16).to_be_bytes());
            }
            n => {
                frame.push(0x80 | 127);
                frame.extend_from_slice(&(n as u64).to_be_bytes());
            }
        }
        // A zero mask key: the payload goes as is.
        frame.extend_from_slice(&[0, 0, 0, 0]);
        frame.extend_from_slice(p);
        self.ws.write_all(&frame).unwrap();
    }

    fn recv(&mut self) -> Value {
        let mut message = Vec::new();
        loop {
            let mut h = [0u8; 2];
            self.ws.read_exact(&mut h).unwrap();
            let fin = h[0] & 0x80 != 0;
            let opcode = h[0] & 0x0f;
            let len = match h[1] & 0x7f {
                126 => {
                    let mut l = [0u8; 2];
                    self.ws.read_exact(&mut l).unwrap();
                    u16::from_be_bytes(l) as usize
                }
                127 => {
                    let mut l = [0u8; 8];
                    self.ws.read_exact(&mut l).unwrap();
                    u64::from_be_bytes(l) as usize
                }
                n => n as usize,
            };
            let mut payload = vec![0u8; len];
            self.ws.read_exact(&mut payload).unwrap();
            match opcode {
                0x8 => panic!("chromium closed the DevTools connection"),
                0x9 | 0xA => continue,
                _ => message.extend_from_slice(&payload),
            }
            if fin {
                return serde_json::from_slice(&message).unwrap();
            }
        }
    }
}

fn base64_decode(s: &str) -> Vec<u8> {
    let val = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => panic!("not base64: {c}"),
    };
    let bytes: Vec<u8> = s
        .bytes()
        .filter(|&c| c != b'=' && !c.is_ascii_whitespace())
        .collect();
    let mut out = Vec::with_capacity(bytes.len() * 3 / 4);
    for chunk in bytes.chunks(4) {
        let mut n = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            n |= u32::from(val(c)) << (18 - 6 * i);
        }
        out.push((n >> 16) as u8);
        if chunk.len() > 2 {
            out.push((n >> 8) as u8);
        }
        if chunk.len() > 3 {
            out.push(n as u8);
        }
    }
    out
}
