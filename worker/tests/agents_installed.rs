//! Agents installed by akbench (a descriptor's `[install]`, `akbench_worker::agents`): the
//! adapter installs the agent's package at its pinned version into the agent cache, with
//! its runtime (Node.js or Python), and the real CLI solves the example task against the
//! loopback fake provider in the sandbox and in a task image that has neither the agent
//! nor its runtime (the Debian test image: python3, git, no node), under the `container`
//! runtime. Also: an entry's runtime runs in an empty root, PATH before the installed
//! entry without `[install]`, and concurrent installs of one entry. The cache is shared by
//! the test runs (`$CARGO_TARGET_DIR/akbench-agents`): an agent is installed once. Skipped, with a printed notice, where the package registries'
//! clients (npm, python3 -m venv), patchelf or the container runtime's needs are missing.

mod common;

use akbench_core::lifecycle::State;
use akbench_core::record::RunRecord;
use akbench_worker::orchestrator::Silent;
use akbench_worker::process::CancelToken;
use akbench_worker::runtime::RuntimeKind;
use common::fake_provider::{FakeProvider, Mode, FINAL_ANSWER};
use common::registry::{base_tar, missing, Registry};
use common::Corpus;
use std::process::Command;

const FIX: &str = "echo 42 > value.txt";

/// The shared agent cache, under the build's target folder.
fn cache() -> std::path::PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"));
    let dir = target.join("akbench-agents");
    // Canonical (no `..`): the entry's programs report the path they run from.
    std::fs::create_dir_all(&dir).unwrap();
    dir.canonicalize().unwrap()
}

/// Why agents cannot be installed here, if they cannot.
fn cannot_install() -> Option<String> {
    let works = |argv: &[&str]| {
        Command::new(argv[0])
            .args(&argv[1..])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if !works(&["npm", "--version"]) || !works(&["node", "--version"]) {
        return Some("node and npm are not installed (apt-get install nodejs npm)".into());
    }
    if !works(&["/usr/bin/python3", "-c", "import ensurepip"]) {
        return Some("python3-venv is not installed".into());
    }
    if !works(&["patchelf", "--version"]) {
        return Some("patchelf is not installed (apt-get install patchelf)".into());
    }
    None
}

/// The descriptor of `adapter` installed by akbench, pointed at the fake provider (as
/// providers.rs and providers_more.rs point the CLIs on PATH).
fn descriptor(adapter: &str, p: &FakeProvider) -> String {
    let (url, oai) = (p.base_url(), p.openai_base_url());
    let (top, tables) = match adapter {
        "claude-code" => (
            "model = \"claude-sonnet-4-5\"\n".to_string(),
            format!(
                "[env]\nANTHROPIC_BASE_URL = \"{url}\"\nANTHROPIC_API_KEY = \"sk-fake\"\n\
                 CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC = \"1\"\n"
            ),
        ),
        "codex" => (
            format!(
                "model = \"gpt-5-codex\"\nextra_args = [\"-c\", \"model_provider=\\\"fake\\\"\", \
                 \"-c\", \"model_providers.fake={{ name = \\\"fake\\\", base_url = \\\"{oai}\\\", env_key = \\\"FAKE_KEY\\\", wire_api = \\\"responses\\\" }}\"]\n"
            ),
            "[parameters]\nsandbox = \"bypass\"\n[env]\nFAKE_KEY = \"sk-fake\"\n".to_string(),
        ),
        "gemini-cli" => (
            "model = \"gemini-2.5-pro\"\n".to_string(),
            format!(
                "[env]\nGOOGLE_GEMINI_BASE_URL = \"{url}\"\nGEMINI_API_KEY = \"sk-fake\"\n"
            ),
        ),
        "qwen-code" => (
            "model = \"qwen3-coder-plus\"\n".to_string(),
            format!("[env]\nOPENAI_BASE_URL = \"{oai}\"\nOPENAI_API_KEY = \"sk-fake\"\n"),
        ),
        "opencode" => (
            "model = \"fake/m1\"\n".to_string(),
            format!(
                "[env]\nOPENCODE_DISABLE_MODELS_FETCH = \"1\"\n\
                 OPENCODE_CONFIG_CONTENT = '{{\"provider\":{{\"fake\":{{\"npm\":\"@ai-sdk/openai-compatible\",\"name\":\"fake\",\"options\":{{\"baseURL\":\"{oai}\",\"apiKey\":\"sk-fake\"}},\"models\":{{\"m1\":{{\"name\":\"m1\"}}}}}}}}}}'\n"
            ),
        ),
        "mini-swe-agent" | "aider" => (
            "model = \"openai/m1\"\n".to_string(),
            format!("[env]\nOPENAI_API_BASE = \"{oai}\"\nOPENAI_API_KEY = \"sk-fake\"\n"),
        ),
        other => panic!("no descriptor for {other}"),
    };
    // A price, for the CLIs that report no cost here (core::agent::price): every record
    // then has a cost, reported or marked computed.
    format!(
        "adapter = \"{adapter}\"\nnetwork = [\"{}\"]\n{top}{tables}\
         [price]\ninput_per_mtok = 2.0\noutput_per_mtok = 8.0\n[install]\n",
        p.endpoint()
    )
}

fn run(c: &Corpus, task: &str, agent: &str, runtime: RuntimeKind) -> RunRecord {
    let t = c.task(task);
    let a = c.agent(agent);
    let name = format!("{agent}-{task}");
    let mut req = c.request(&t, &a, &name);
    req.options.runtime = runtime;
    // Far beyond what a run takes (the first one installs the agent).
    req.options.agent_timeout_sec = Some(600.0);
    let rec = c
        .orchestrator()
        .run_trial(
            &req,
            &akbench_core::dispatch::Backoff::NONE,
            &Silent,
            &CancelToken::new(),
        )
        .unwrap()
        .record;
    rec.validate().unwrap();
    rec
}

fn dump(c: &Corpus, name: &str, rec: &RunRecord) -> String {
    let dir = c.root().join("out").join(name).join("a1");
    format!(
        "record: {}\nstdout:\n{}\nstderr:\n{}",
        serde_json::to_string_pretty(&rec.attempts[0]).unwrap(),
        std::fs::read_to_string(dir.join("agent.stdout.log")).unwrap_or_default(),
        std::fs::read_to_string(dir.join("agent.stderr.log")).unwrap_or_default()
    )
}

/// `adapter`, installed by akbench, solves `answer` in the sandbox and `answer-image` in
/// the test image (which has no node), each with the installed version.
fn solves_in_the_sandbox_and_in_an_image(adapter: &str, test: &str) {
    if let Some(why) = cannot_install().or_else(missing) {
        akbench_core::testkit::skip(test, &why);
        return;
    }
    // SAFETY: set before any thread of this test reads the environment.
    unsafe { std::env::set_var(akbench_worker::agents::CACHE_ENV, cache()) };
    let reg = Registry::start();
    // SAFETY: as above.
    unsafe { std::env::set_var("AKBENCH_INSECURE_REGISTRIES", &reg.addr) };
    let base = base_tar();
    let listing = Command::new("tar").arg("-tf").arg(&base).output().unwrap();
    let listing = String::from_utf8_lossy(&listing.stdout);
    assert!(
        !listing.lines().any(|l| l.ends_with("bin/node")),
        "the test image must not have node"
    );
    reg.push(
        "akbench/base:bookworm",
        &[(&base, "tar")],
        &["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
        Some("/srv/work"),
        None,
    );
    let c = common::corpus();
    common::grade_quietly(&c, "answer");
    c.add_task(
        "answer-image",
        &c.commit,
        common::TEST_SH,
        &format!(
            "[environment]\nimage = \"{}/akbench/base:bookworm\"\n[mutation]\npatch = \"mutation.patch\"\n",
            reg.addr
        ),
    );
    std::fs::copy(
        c.tasks().join("answer/mutation.patch"),
        c.tasks().join("answer-image/mutation.patch"),
    )
    .unwrap();
    let p = FakeProvider::start(Mode::Up, Some(FIX));
    c.add_agent("agent", &descriptor(adapter, &p), None);
    let known = akbench_core::agent::install::known(adapter).unwrap();
    for (task, runtime) in [
        ("answer", RuntimeKind::Sandbox),
        ("answer-image", RuntimeKind::Container),
    ] {
        let rec = run(&c, task, "agent", runtime);
        let ctx = || {
            format!(
                "{task}: {}\nprovider log {:?}",
                dump(&c, &format!("agent-{task}"), &rec),
                p.log()
            )
        };
        assert_eq!(rec.outcome.state, State::Completed, "{}", ctx());
        assert_eq!(rec.outcome.ok, Some(true), "{}", ctx());
        let obs = &rec.attempts[0].observations;
        // aider's answer is followed by the file it writes.
        assert!(
            obs.final_message.as_deref().is_some_and(
                |m| m == FINAL_ANSWER || (adapter == "aider" && m.starts_with(FINAL_ANSWER))
            ),
            "{}",
            ctx()
        );
        // Tokens, and a cost: Claude Code reports its own; the others report none for the
        // fake provider's unpriced models, so it is computed from the descriptor's price.
        assert!(
            obs.input_tokens.is_some() && obs.output_tokens.is_some(),
            "{}",
            ctx()
        );
        assert!(obs.cost_usd.is_some_and(|c| c > 0.0), "{}", ctx());
        assert_eq!(obs.cost_computed, adapter != "claude-code", "{}", ctx());
        // The installed CLI's version, asked of the installed program.
        let traj = c
            .root()
            .join("out")
            .join(format!("agent-{task}"))
            .join("a1/trajectory.json");
        let t: akbench_core::trajectory::Trajectory =
            serde_json::from_str(&std::fs::read_to_string(traj).unwrap()).unwrap();
        // (codex says `codex-cli 0.171.0`.)
        assert_eq!(
            t.agent.version.split_whitespace().last(),
            Some(known.version),
            "{}",
            ctx()
        );
    }
    // Installed once, listed as installed.
    let rows = akbench_worker::agents::list(&cache());
    let row = rows.iter().find(|r| r.adapter == adapter).unwrap();
    let dir = row.installed.as_ref().expect("listed as installed");
    assert!(dir.join("bin").join(known.program).is_file());
}

/// One test per known agent: `$name` installed by akbench solves in the sandbox and in the
/// image without it.
macro_rules! installed_solves {
    ($($test:ident: $adapter:literal,)*) => {$(
        #[test]
        fn $test() {
            solves_in_the_sandbox_and_in_an_image($adapter, stringify!($test));
        }
    )*};
}

installed_solves! {
    claude_code_installed_solves_in_the_sandbox_and_in_an_image_without_node: "claude-code",
    codex_installed_solves_in_the_sandbox_and_in_an_image_without_node: "codex",
    gemini_cli_installed_solves_in_the_sandbox_and_in_an_image_without_node: "gemini-cli",
    qwen_code_installed_solves_in_the_sandbox_and_in_an_image_without_node: "qwen-code",
    opencode_installed_solves_in_the_sandbox_and_in_an_image_without_node: "opencode",
    mini_swe_agent_installed_solves_in_the_sandbox_and_in_an_image: "mini-swe-agent",
    aider_installed_solves_in_the_sandbox_and_in_an_image: "aider",
}

#[test]
fn every_known_agent_has_a_test_here() {
    let text = include_str!("agents_installed.rs");
    for k in akbench_core::agent::install::KNOWN {
        assert!(
            text.contains(&format!(": \"{}\",", k.adapter)),
            "{}",
            k.adapter
        );
    }
}

/// Two installs of one entry at once build it once; a crashed install's leftovers (an
/// entry without its marker, a temporary folder) are replaced; a second install finds it.
#[test]
fn concurrent_installs_build_one_entry_and_replace_a_crashed_one() {
    let test = "concurrent_installs_build_one_entry_and_replace_a_crashed_one";
    if let Some(why) = cannot_install() {
        akbench_core::testkit::skip(test, &why);
        return;
    }
    use akbench_core::agent::install::{known, platform, Install};
    use akbench_worker::agents;
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("agents");
    let what = Install::pinned(known("gemini-cli").unwrap());
    let key = what.key(&platform());
    std::fs::create_dir_all(root.join(&key).join("half-written")).unwrap();
    std::fs::create_dir_all(root.join(format!(".tmp-{key}-4194304/pkg"))).unwrap();
    assert!(agents::find(&root, &what).is_none());
    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(|| agents::install(&root, &what));
        let b = s.spawn(|| agents::install(&root, &what));
        (a.join().unwrap().unwrap(), b.join().unwrap().unwrap())
    });
    assert_eq!(a, b);
    assert_eq!(a.dir, root.join(&key));
    assert!(!a.dir.join("half-written").exists());
    assert_eq!(a.marker.install, what);
    assert!(a.marker.runtime.starts_with("node v"), "{:?}", a.marker);
    let left: Vec<String> = std::fs::read_dir(&root)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !n.ends_with(".lock"))
        .collect();
    assert_eq!(left, vec![key.clone()]);
    let v = Command::new(&a.program).arg("--version").output().unwrap();
    assert_eq!(String::from_utf8_lossy(&v.stdout).trim(), what.version);
    // The entry is readable by anyone (the sandbox's user) and its runtime is its own.
    let mode = |p: &std::path::Path| {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(p).unwrap().permissions().mode()
    };
    assert_eq!(mode(&a.program) & 0o555, 0o555);
    assert_eq!(mode(&a.dir.join("rt/bin/node")) & 0o555, 0o555);
    assert_eq!(agents::install(&root, &what).unwrap(), a);
}

/// Without `[install]` the program on PATH is run, as before; when it is not on PATH, the
/// pinned version's installed entry is; `program` always wins.
#[test]
fn without_install_the_path_comes_first_then_the_installed_entry() {
    let test = "without_install_the_path_comes_first_then_the_installed_entry";
    if let Some(why) = cannot_install() {
        akbench_core::testkit::skip(test, &why);
        return;
    }
    use akbench_worker::adapters::{LaunchContext, Registry};
    // SAFETY: set before any thread of this test reads the environment.
    unsafe { std::env::set_var(akbench_worker::agents::CACHE_ENV, cache()) };
    let what = akbench_core::agent::install::Install::pinned(
        akbench_core::agent::install::known("gemini-cli").unwrap(),
    );
    let entry = akbench_worker::agents::install(&cache(), &what).unwrap();
    let c = common::corpus();
    let t = c.task("answer");
    // A PATH holding a `gemini` of its own.
    let bin = c.root().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::write(bin.join("gemini"), "#!/bin/sh\n").unwrap();
    let program = |toml: &str, path: &std::path::Path| {
        c.add_agent("g", toml, None);
        let a = c.agent("g");
        // SAFETY: as above; nothing else runs in this test's process.
        unsafe { std::env::set_var("PATH", path) };
        let launch = Registry::builtin()
            .resolve(&a)
            .unwrap()
            .launch(&LaunchContext {
                task: &t,
                agent: &a,
                workspace: c.root(),
                home: c.root(),
                instruction_file: &c.root().join("instruction.md"),
            })
            .unwrap();
        // The gemini wrapper: `/bin/sh -c <script> gemini-cli <program> ...`.
        (launch.argv[4].clone(), launch.readable)
    };
    let plain = "adapter = \"gemini-cli\"\n";
    assert_eq!(program(plain, &bin), ("gemini".to_string(), vec![]));
    let empty = c.root().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    assert_eq!(
        program(plain, &empty),
        (entry.program.display().to_string(), vec![entry.dir.clone()])
    );
    assert_eq!(
        program("adapter = \"gemini-cli\"\nprogram = \"/opt/g\"\n", &empty).0,
        "/opt/g"
    );
    assert_eq!(
        program("adapter = \"gemini-cli\"\n[install]\n", &bin).0,
        entry.program.display().to_string()
    );
}

/// An installed entry's runtime needs nothing outside the entry: in an empty root (bwrap,
/// the entry alone bound, no /usr, no /lib, no /bin/sh) its node runs gemini-cli and its
/// python (the standard library's compiled modules included) runs mini-swe-agent.
#[test]
fn installed_runtimes_need_nothing_outside_their_entry() {
    let test = "installed_runtimes_need_nothing_outside_their_entry";
    if let Some(why) = cannot_install().or_else(missing) {
        akbench_core::testkit::skip(test, &why);
        return;
    }
    use akbench_core::agent::install::{known, Install};
    let install = |adapter: &str| {
        akbench_worker::agents::install(&cache(), &Install::pinned(known(adapter).unwrap()))
            .unwrap()
    };
    let empty_root = |entry: &std::path::Path, argv: &[String]| {
        let out = Command::new("bwrap")
            .args(["--unshare-all", "--die-with-parent", "--tmpfs", "/"])
            .arg("--ro-bind")
            .args([entry, entry])
            .args(["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"])
            .args(["--clearenv", "--setenv", "HOME", "/tmp", "--"])
            .args(argv)
            .output()
            .unwrap();
        let text = format!(
            "{argv:?}: {:?}\nstdout:\n{}\nstderr:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "{text}");
        (String::from_utf8_lossy(&out.stdout).into_owned(), text)
    };
    let s = |p: std::path::PathBuf| p.display().to_string();
    let gemini = install("gemini-cli");
    let (out, text) = empty_root(
        &gemini.dir,
        &[
            s(gemini.dir.join("rt/bin/node")),
            s(gemini.dir.join("pkg/node_modules/.bin/gemini")),
            "--version".into(),
        ],
    );
    assert_eq!(out.trim(), "0.61.0", "{text}");
    let (out, text) = empty_root(
        &gemini.dir,
        &[
            s(gemini.dir.join("rt/bin/node")),
            "-p".into(),
            "require('fs').existsSync('/usr') + ' ' + process.execPath".into(),
        ],
    );
    assert_eq!(
        out.trim(),
        format!("false {}", gemini.dir.join("rt/bin/node").display()),
        "{text}"
    );
    let mini = install("mini-swe-agent");
    let python = std::fs::read_dir(mini.dir.join("rt/bin"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("python"))
        })
        .unwrap();
    let (out, text) = empty_root(
        &mini.dir,
        &[
            s(python.clone()),
            "-c".into(),
            "import sys, ssl, sqlite3, ctypes, json, os; print(sys.prefix, os.path.exists('/usr'))"
                .into(),
        ],
    );
    assert_eq!(
        out.trim(),
        format!("{} False", mini.dir.join("rt").display()),
        "{text}"
    );
    let (out, text) = empty_root(
        &mini.dir,
        &[
            s(python),
            "-s".into(),
            s(mini.dir.join("rt/lib/python3/dist-packages/bin/mini")),
            "--help".into(),
        ],
    );
    assert!(
        out.contains("This is mini-swe-agent version 2.4.6."),
        "{text}"
    );
}

/// An install that cannot be made here (the registry has no such version: npm's own error)
/// ends the attempt `infrastructure_error` before the agent starts, naming the install: the
/// worker's problem, never the agent's, and retried like any infrastructure failure.
#[test]
fn an_install_that_fails_is_an_infrastructure_error() {
    const TEST: &str = "an_install_that_fails_is_an_infrastructure_error";
    if let Some(why) = cannot_install() {
        akbench_core::testkit::skip(TEST, &why);
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // SAFETY: set before any thread of this test reads the environment.
    unsafe { std::env::set_var(akbench_worker::agents::CACHE_ENV, dir.path()) };
    let c = common::corpus();
    common::grade_quietly(&c, "answer");
    let p = FakeProvider::start(Mode::Up, Some(FIX));
    let toml =
        descriptor("gemini-cli", &p).replace("[install]\n", "[install]\nversion = \"0.0.1\"\n");
    c.add_agent("agent", &toml, None);
    let rec = run(&c, "answer", "agent", RuntimeKind::Sandbox);
    let ctx = || dump(&c, "agent-answer", &rec);
    assert_eq!(rec.outcome.state, State::InfrastructureError, "{}", ctx());
    let cause = rec.attempts[0].cause.clone().unwrap_or_default();
    assert!(
        cause.starts_with("failed to install the agent on this worker:") && cause.contains("0.0.1"),
        "{cause}"
    );
    assert!(rec.attempts[0].agent_process.is_none(), "{}", ctx());
    assert!(p.log().is_empty(), "the agent never started: {:?}", p.log());
}

/// An installer that does not finish in its time (`AKBENCH_AGENT_INSTALL_TIMEOUT_SEC`, here
/// half a second for an npm install that takes seconds) is stopped with its process group:
/// the attempt ends `infrastructure_error` naming the deadline, and nothing of the entry
/// is left (no folder, no temporary one).
#[test]
fn an_install_past_its_deadline_is_stopped_and_is_an_infrastructure_error() {
    const TEST: &str = "an_install_past_its_deadline_is_stopped_and_is_an_infrastructure_error";
    if let Some(why) = cannot_install() {
        akbench_core::testkit::skip(TEST, &why);
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // SAFETY: set before any thread of this test reads the environment.
    unsafe {
        std::env::set_var(akbench_worker::agents::CACHE_ENV, dir.path());
        std::env::set_var("AKBENCH_AGENT_INSTALL_TIMEOUT_SEC", "0.5");
    }
    let c = common::corpus();
    common::grade_quietly(&c, "answer");
    let p = FakeProvider::start(Mode::Up, Some(FIX));
    c.add_agent("agent", &descriptor("gemini-cli", &p), None);
    let rec = run(&c, "answer", "agent", RuntimeKind::Sandbox);
    let ctx = || dump(&c, "agent-answer", &rec);
    assert_eq!(rec.outcome.state, State::InfrastructureError, "{}", ctx());
    let cause = rec.attempts[0].cause.clone().unwrap_or_default();
    assert!(
        cause.starts_with("failed to install the agent on this worker:")
            && cause.contains("did not finish in 0.5 s and was stopped"),
        "{cause}"
    );
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !n.ends_with(".lock"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// The bins a scripted model writes from `get_part`'s answers (one JSON object per call,
/// the text Claude Code hands back as the tool's result).
fn bins_from_parts(results: &[String]) -> String {
    let lines: Vec<String> = results
        .iter()
        .map(|r| tool_text(r))
        .map(|r| {
            let json = r.find('{').zip(r.rfind('}')).map(|(a, b)| &r[a..=b]);
            let v: serde_json::Value = json
                .and_then(|j| serde_json::from_str(j).ok())
                .unwrap_or_default();
            match (v["sku"].as_str(), v["bin"].as_str()) {
                (Some(sku), Some(bin)) => format!("'{sku} {bin}'"),
                _ => format!("'unreadable result: {}'", r.replace('\'', "")),
            }
        })
        .collect();
    format!("printf '%s\\n' {} > /app/bins.txt", lines.join(" "))
}

/// A tool result's text: as Claude Code hands it back (the text itself), or wrapped as an MCP
/// `CallToolResult` (`{"content": [{"type": "text", "text": ...}]}`, as codex may).
fn tool_text(r: &str) -> String {
    let v: serde_json::Value = serde_json::from_str(r).unwrap_or_default();
    let parts = v["content"]
        .as_array()
        .or(v["Ok"]["content"].as_array())
        .or(v.as_array());
    match parts {
        Some(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join(""),
        None => r.to_string(),
    }
}

/// The backup settings a scripted model writes from the simulated user's answers (its
/// `ask_user` results, in the order asked: schedule, retention, target).
fn backup_from_answers(results: &[String]) -> String {
    let words: Vec<&str> = results
        .iter()
        .flat_map(|r| r.split(|c: char| c.is_whitespace() || c == '"'))
        .collect();
    let time = words
        .iter()
        .find_map(|w| {
            let (h, m) = w.trim_end_matches(['.', ',']).split_once(':')?;
            Some((h.parse::<u32>().ok()?, m.parse::<u32>().ok()?))
        })
        .map(|(h, m)| format!("{m} {h} * * *"))
        .unwrap_or_default();
    let days = words
        .windows(2)
        .find(|w| w[1].starts_with("days"))
        .and_then(|w| w[0].parse::<u32>().ok())
        .unwrap_or(0);
    let target = words
        .iter()
        .find(|w| w.starts_with("/mnt"))
        .map(|w| w.trim_end_matches(['.', ',']))
        .unwrap_or_default();
    let json = serde_json::json!({"schedule": time, "retention_days": days, "target": target});
    format!("printf '%s' '{json}' > /app/backup.json")
}

/// One agent in one MCP example's world: see [`agent_in_an_mcp_world`].
struct McpCase<'a> {
    adapter: &'a str,
    test: &'a str,
    example: &'a str,
    service: &'a str,
    /// The server's tools the model must be offered.
    offered: &'a [&'a str],
    /// The tool calls the scripted model makes, in order.
    calls: Vec<(&'a str, serde_json::Value)>,
    /// The shell command it then runs, made of the calls' results.
    then: fn(&[String]) -> String,
    /// Lines the server's log must hold.
    logged: Vec<String>,
}

/// The real agent of `case.adapter` (Claude Code, codex), installed by akbench, in an MCP
/// example's world (its environment over the Debian test image, which has no node, and the
/// MCP server as a sidecar): it is handed the task's `[[environment.mcp_servers]]`, the
/// model is offered the server's tools, makes its calls through the agent's own MCP client,
/// writes the answer with the shell tool, and the task's grader passes. The server's log
/// (kept in the attempt's folder) shows each call.
fn agent_in_an_mcp_world(case: McpCase<'_>) {
    let McpCase {
        adapter,
        test,
        example,
        service,
        offered,
        calls,
        then,
        logged,
    } = case;
    if let Some(why) = cannot_install() {
        akbench_core::testkit::skip(test, &why);
        return;
    }
    if !common::container_trial::runs_here(test) {
        return;
    }
    // SAFETY: set before any thread of this test reads the environment.
    unsafe { std::env::set_var(akbench_worker::agents::CACHE_ENV, cache()) };
    let (reg, c) = common::container_trial::registry_and_corpus();
    common::registry::sidecar_example(&reg, c.root(), &c.tasks().join("mcp"), example, &[service]);
    let p = FakeProvider::start(Mode::Up, None);
    p.call_tool_first(common::fake_provider::ToolFirst {
        calls: calls
            .iter()
            .map(|(tool, input)| (format!("mcp__{service}__{tool}"), input.clone()))
            .collect(),
        then,
    });
    // Claude Code's tool search off: the MCP tools are offered with the others.
    let agent =
        descriptor(adapter, &p).replace("[env]\n", "[env]\nENABLE_TOOL_SEARCH = \"false\"\n");
    c.add_agent("agent", &agent, None);
    let rec = common::container_trial::run_in_container(&c, "mcp", "agent", "agent-mcp", 600.0, 0);
    let log = common::container_trial::first_attempt_file(
        &c,
        "agent-mcp",
        &format!("services/{service}.stderr.log"),
    );
    let ctx = || {
        format!(
            "{}\nprovider log {:?}\ntools offered {:?}\nthe server's: {}\nserver log:\n{log}",
            dump(&c, "agent-mcp", &rec),
            p.log(),
            p.tools_seen(),
            p.tool_spec(&format!("mcp__{service}"))
        )
    };
    // Claude Code offers `mcp__SERVER__TOOL`; codex a `namespace` tool `mcp__SERVER`
    // holding the server's functions.
    let namespace = p.tool_spec(&format!("mcp__{service}"));
    for tool in offered {
        let flat = p.tools_seen().contains(&format!("mcp__{service}__{tool}"));
        let nested = namespace["tools"]
            .as_array()
            .is_some_and(|fs| fs.iter().any(|f| f["name"] == *tool));
        assert!(flat || nested, "{tool} not offered: {}", ctx());
    }
    for line in &logged {
        assert!(log.contains(line), "no `{line}`: {}", ctx());
    }
    assert_eq!(rec.outcome.state, State::Completed, "{}", ctx());
    assert_eq!(rec.outcome.ok, Some(true), "{}", ctx());
    assert_eq!(
        rec.attempts[0].observations.final_message.as_deref(),
        Some(FINAL_ANSWER),
        "{}",
        ctx()
    );
    // The agent that ran is the one asked for (its CLI's version is recorded).
    assert_eq!(
        rec.attempts[0]
            .provenance
            .as_ref()
            .and_then(|p| p.adapter.as_deref()),
        Some(adapter),
        "{}",
        ctx()
    );
}

const SKUS: [&str; 3] = ["HX-2201", "GS-0450", "BR-7716"];

/// harbor-mcp-tools-001 over streamable HTTP: three `get_part` calls.
fn warehouse_case<'a>(adapter: &'a str, test: &'a str) -> McpCase<'a> {
    McpCase {
        adapter,
        test,
        example: "harbor-mcp-tools-001",
        service: "warehouse",
        offered: &["get_part", "search_parts"],
        calls: SKUS
            .iter()
            .map(|s| ("get_part", serde_json::json!({ "sku": s })))
            .collect(),
        then: bins_from_parts,
        logged: SKUS
            .iter()
            .map(|s| format!("mcp: tools/call get_part {{\"sku\": \"{s}\"}}"))
            .collect(),
    }
}

#[test]
fn claude_code_reaches_the_task_s_mcp_server_and_solves_with_its_tools() {
    agent_in_an_mcp_world(warehouse_case(
        "claude-code",
        "claude_code_reaches_the_task_s_mcp_server_and_solves_with_its_tools",
    ));
}

/// codex over streamable HTTP (its `-c mcp_servers.warehouse={ url = ... }`).
#[test]
fn codex_reaches_the_task_s_mcp_server_and_solves_with_its_tools() {
    agent_in_an_mcp_world(warehouse_case(
        "codex",
        "codex_reaches_the_task_s_mcp_server_and_solves_with_its_tools",
    ));
}

/// harbor-simulated-user-001 over SSE: the simulated user is asked three questions.
#[test]
fn claude_code_asks_the_simulated_user_over_sse_and_solves() {
    let questions = [
        "When should the backup run?",
        "How many days of backups should be kept?",
        "Which folder should the backups go to?",
    ];
    agent_in_an_mcp_world(McpCase {
        adapter: "claude-code",
        test: "claude_code_asks_the_simulated_user_over_sse_and_solves",
        example: "harbor-simulated-user-001",
        service: "user",
        offered: &["ask_user"],
        calls: questions
            .iter()
            .map(|q| ("ask_user", serde_json::json!({ "question": q })))
            .collect(),
        then: backup_from_answers,
        logged: questions
            .iter()
            .map(|q| format!("mcp: tools/call ask_user {{\"question\": \"{q}\"}}"))
            .collect(),
    });
}
