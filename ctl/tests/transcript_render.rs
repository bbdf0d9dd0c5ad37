//! Benchmark (ignored by default): a trial page whose trajectory has 1,000 agent steps (each
//! with a shell call and a 30-line output), rendered by real headless Chromium from a real
//! `akbench view`; prints the browser's own navigation timings (median of 10 loads). Run it
//! with `cargo nextest run -p akbench --test transcript_render --run-ignored only
//! --no-capture` (figures in docs/PERFORMANCE.md).

mod common;

use common::spawn_view;

/// Shared with the viewer tests; this file uses only part of it.
#[allow(dead_code)]
#[path = "view/chromium.rs"]
mod chromium;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

const STEPS: usize = 1000;
const LOADS: usize = 10;

/// A claude-code stream-json transcript of `n` tool-calling turns.
fn stream(n: usize) -> String {
    use serde_json::json;
    let mut lines = vec![json!({"type": "system", "subtype": "init", "model": "m",
        "claude_code_version": "2.0.0", "session_id": "s"})];
    for i in 0..n {
        lines.push(json!({"type": "assistant", "message": {"id": format!("msg{i}"), "model": "m",
            "content": [{"type": "text", "text": format!("Step {i}: running the tests again.")},
                {"type": "tool_use", "id": format!("t{i}"), "name": "Bash",
                 "input": {"command": format!("pytest -x -k case{i}")}}],
            "usage": {"input_tokens": 10, "cache_read_input_tokens": 1000 + i, "output_tokens": 40}}}));
        let out: Vec<String> = (0..30)
            .map(|j| format!("line {j} of the output of step {i}"))
            .collect();
        lines.push(
            json!({"type": "user", "message": {"content": [{"type": "tool_result",
            "tool_use_id": format!("t{i}"), "content": out.join("\n")}]}}),
        );
    }
    lines.push(
        json!({"type": "result", "subtype": "success", "is_error": false,
        "num_turns": n, "result": "done", "total_cost_usd": 1.5}),
    );
    lines.iter().map(|l| format!("{l}\n")).collect()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

#[test]
#[ignore = "benchmark: run with --run-ignored only"]
fn a_thousand_step_transcript_page_in_chromium() {
    let bin = chromium::binary().expect("chromium is installed");
    let tmp = tempfile::tempdir().unwrap();
    let agents = tmp.path().join("agents");
    std::fs::create_dir_all(&agents).unwrap();
    let transcript = tmp.path().join("stream.jsonl");
    std::fs::write(&transcript, stream(STEPS)).unwrap();
    let script = agents.join("cc.sh");
    std::fs::write(
        &script,
        format!("#!/bin/sh\ncat '{}'\n", transcript.display()),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(
        agents.join("cc.toml"),
        format!(
            "adapter = \"claude-code\"\nprogram = \"{}\"\n",
            script.display()
        ),
    )
    .unwrap();
    // Unsandboxed: the sandbox exposes the program, not the transcript beside it.
    let single = Command::new(env!("CARGO_BIN_EXE_akbench"))
        .args([
            "run",
            "single",
            "wordcount-001",
            "--agent",
            "cc",
            "--runtime",
            "direct",
            "--json",
        ])
        .arg("--tasks-root")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/tasks"))
        .arg("--agents-root")
        .arg(&agents)
        .arg("--out")
        .arg(tmp.path().join("out"))
        .arg("--cache")
        .arg(tmp.path().join("cache"))
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&single.stdout).unwrap();
    let record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(v["record"].as_str().unwrap()).unwrap()).unwrap();
    let key = record["trial"]["key"].as_str().unwrap().to_string();
    let (mut view, url) = spawn_view(
        Command::new(env!("CARGO_BIN_EXE_akbench"))
            .arg("view")
            .arg(tmp.path().join("out"))
            .args(["--listen", "127.0.0.1:0"]),
    );
    let page = format!("{url}trials/{key}");
    let mut b = chromium::Browser::start(&bin, &tmp.path().join("chromium"));
    let (mut response, mut loaded, mut laid_out, mut paint) = (vec![], vec![], vec![], vec![]);
    let mut steps = 0;
    for _ in 0..LOADS {
        b.navigate(&page);
        // Times in ms from the navigation's start: the last byte, the load event, a forced
        // layout of the whole page done, the first contentful paint.
        let t = b.eval(
            "(() => { const n = performance.getEntriesByType('navigation')[0]; \
               document.body.getBoundingClientRect(); const after = performance.now(); \
               const p = performance.getEntriesByType('paint').find(e => e.name === 'first-contentful-paint'); \
               return [n.responseEnd, n.loadEventEnd, after, p ? p.startTime : -1, \
                       document.querySelectorAll('li.step').length]; })()",
        );
        let t: Vec<f64> = t
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap())
            .collect();
        response.push(t[0]);
        loaded.push(t[1]);
        laid_out.push(t[2]);
        paint.push(t[3]);
        steps = t[4] as usize;
    }
    let _ = view.kill();
    let _ = view.wait();
    println!(
        "{steps} steps; median of {LOADS} loads in Chromium, ms from navigation start: \
         last byte {:.0}, first contentful paint {:.0}, load event {:.0}, whole page laid out {:.0}",
        median(response),
        median(paint),
        median(loaded),
        median(laid_out)
    );
    assert!(steps > STEPS, "the transcript was rendered: {steps} steps");
}
