//! The real Gemini CLI, Qwen Code and opencode read the MCP configuration akbench hands
//! them and reach the task's servers: each CLI's own `mcp list` (which connects to every
//! configured server) is run through the adapter's launch (its wrapper writes the agent's
//! settings.json; opencode reads `OPENCODE_CONFIG_CONTENT`), against the two example
//! servers on loopback: `warehouse` over streamable HTTP with a header from a variable, and
//! the simulated `user` over SSE. Each server must be listed as connected and must have
//! seen the CLI's `initialize`. (A model is not needed to show the client connects; the
//! claude-code and codex trials in `agents_installed.rs` go on to call the tools.)

use akbench_worker::adapters::{LaunchContext, Registry};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/tasks")
}

/// An example MCP server on a free loopback port; killed on drop.
struct Server {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl Server {
    fn start(script: &Path, env: &[(&str, String)], log: PathBuf) -> Server {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut c = Command::new("python3");
        c.arg(script)
            .env("MCP_PORT", port.to_string())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap());
        for (k, v) in env {
            c.env(k, v);
        }
        let child = c.spawn().unwrap();
        let until = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < until,
                "{} did not listen",
                script.display()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Server { child, port, log }
    }

    fn initializations(&self) -> usize {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains("mcp: initialize"))
            .count()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn installed(program: &str) -> bool {
    let found = Command::new(program)
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        akbench_core::testkit::skip(
            &format!("the real `{program}` MCP client test"),
            &format!("`{program}` is not installed (.ci/run installs it from npm)"),
        );
    }
    found
}

#[test]
fn gemini_qwen_and_opencode_connect_to_the_task_s_mcp_servers() {
    let clis = [
        ("gemini-cli", "gemini"),
        ("qwen-code", "qwen"),
        ("opencode", "opencode"),
    ];
    if !clis.iter().all(|(_, p)| installed(p)) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let warehouse = Server::start(
        &examples().join("harbor-mcp-tools-001/environment/warehouse/warehouse.py"),
        &[],
        tmp.path().join("warehouse.log"),
    );
    let user_dir = examples().join("harbor-simulated-user-001/environment/user");
    let user = Server::start(
        &user_dir.join("user.py"),
        &[(
            "PERSONA",
            user_dir.join("persona.json").display().to_string(),
        )],
        tmp.path().join("user.log"),
    );
    let task_dir = tmp.path().join("tasks/mcp");
    std::fs::create_dir_all(task_dir.join("tests")).unwrap();
    std::fs::write(task_dir.join("instruction.md"), "Use the tools.\n").unwrap();
    std::fs::write(task_dir.join("tests/test.sh"), "#!/bin/sh\nexit 0\n").unwrap();
    std::fs::write(
        task_dir.join("task.toml"),
        format!(
            "[environment]\ndocker_image = \"reg.example/t@sha256:{}\"\n\
             [[environment.mcp_servers]]\nname = \"warehouse\"\ntransport = \"streamable-http\"\n\
             url = \"http://127.0.0.1:{}/mcp\"\nheaders = {{ X-Team = \"${{MCP_CLIENTS_TEAM}}\" }}\n\
             [[environment.mcp_servers]]\nname = \"user\"\ntransport = \"sse\"\n\
             url = \"http://127.0.0.1:{}/sse\"\n",
            "0".repeat(64),
            warehouse.port,
            user.port
        ),
    )
    .unwrap();
    let task = akbench_core::task::Task::load(&task_dir, &tmp.path().join("tasks")).unwrap();
    let registry = Registry::builtin();
    let mut failures = Vec::new();
    for (adapter, program) in clis {
        let before = (warehouse.initializations(), user.initializations());
        let agents = tmp.path().join(format!("agents-{adapter}"));
        std::fs::create_dir_all(&agents).unwrap();
        std::fs::write(
            agents.join("a.toml"),
            format!("adapter = \"{adapter}\"\nprogram = \"{program}\"\n"),
        )
        .unwrap();
        let agent = akbench_core::agent::Agent::load(&agents, "a").unwrap();
        let home = tmp.path().join(format!("home-{adapter}"));
        std::fs::create_dir_all(&home).unwrap();
        let launch = registry
            .resolve(&agent)
            .unwrap()
            .launch(&LaunchContext {
                task: &task,
                agent: &agent,
                workspace: tmp.path(),
                home: &home,
                instruction_file: &home.join("instruction.md"),
            })
            .unwrap();
        // The adapter's launch up to the program (`/bin/sh -c WRAPPER NAME PROGRAM`), then
        // the CLI's own `mcp list` in place of the agent's run.
        let at = if launch.argv[0] == "/bin/sh" { 4 } else { 0 };
        assert_eq!(launch.argv[at], program, "{:?}", launch.argv);
        let mut c = Command::new(&launch.argv[0]);
        c.args(&launch.argv[1..=at])
            .args(["mcp", "list"])
            .current_dir(tmp.path())
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", &home)
            .env("GEMINI_CLI_TRUST_WORKSPACE", "true")
            .env("OPENCODE_DISABLE_AUTOUPDATE", "1")
            // What the attempt sets from the header's `${MCP_CLIENTS_TEAM}`.
            .env(akbench_core::task::mcp::header_var(0, 0), "search")
            .envs(&launch.env)
            .stdin(Stdio::null());
        let out = c.output().unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let connected = |name: &str| {
            text.lines().any(|l| {
                let l = l.to_lowercase();
                l.contains(name) && l.contains("connected") && !l.contains("disconnected")
            }) || {
                // opencode prints the state on the name's line, the URL below it.
                let lines: Vec<String> = text.lines().map(str::to_lowercase).collect();
                lines.iter().any(|l| {
                    l.contains(&format!(" {name} "))
                        && l.contains("connected")
                        && !l.contains("failed")
                })
            }
        };
        for (name, server, was) in [
            ("warehouse", &warehouse, before.0),
            ("user", &user, before.1),
        ] {
            if !connected(name) {
                failures.push(format!(
                    "{adapter}: `{name}` not listed as connected:\n{text}"
                ));
            }
            if server.initializations() <= was {
                failures.push(format!("{adapter}: `{name}` saw no initialize"));
            }
        }
        // The settings the wrappers wrote name the variable, never the value.
        for f in [".gemini/settings.json", ".qwen/settings.json"] {
            let written = std::fs::read_to_string(home.join(f)).unwrap_or_default();
            if written.contains("search") {
                failures.push(format!("{adapter}: {f} holds the header's value"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
