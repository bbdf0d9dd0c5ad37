//! Table tests of the walk over Harbor's keys: each accepted value, each refused one with
//! its message (the file, the key and the fix), never a raw TOML error.

use super::super::{Task, TaskErrorKind};
use super::*;
use crate::egress::AllowedHost;

/// A task folder (image-only) whose task.toml is `toml`, loaded.
fn load(toml: &str) -> Result<Task, TaskError> {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t");
    std::fs::create_dir_all(dir.join("tests")).unwrap();
    std::fs::write(dir.join("task.toml"), toml).unwrap();
    std::fs::write(dir.join("instruction.md"), "Do it.\n").unwrap();
    std::fs::write(dir.join("tests/test.sh"), "exit 0\n").unwrap();
    Task::load(&dir, tmp.path())
}

const BASE: &str = "[environment]\ndocker_image = \"reg.example/x:1\"\n";

#[test]
fn refused_values_name_the_file_the_key_and_the_fix() {
    // (task.toml, field named, words of the problem)
    let cases: &[(&str, &str, &str)] = &[
        ("schema_version = \"2.0\"\n", "schema_version", "1.0 to 1.4"),
        ("schema_version = 1.1\n", "schema_version", "not a string"),
        ("[task]\ndescription = \"x\"\n", "task.name", "is missing"),
        (
            "[task]\nname = \"noslash\"\n",
            "task.name",
            "not `org/name`",
        ),
        ("[task]\nname = \"a/../b\"\n", "task.name", "not `org/name`"),
        (
            "[task]\nname = \"o/n\"\nversion = \"\"\n",
            "task.version",
            "is empty",
        ),
        (
            "[task]\nname = \"o/n\"\nkeywords = \"k\"\n",
            "task.keywords",
            "not a list",
        ),
        (
            "[task]\nname = \"o/n\"\nauthors = [{ email = \"e\" }]\n",
            "task.authors",
            "no `name`",
        ),
        ("artifacts = \"/app\"\n", "artifacts", "not a list"),
        (
            "artifacts = [\"/etc/passwd\"]\n",
            "artifacts",
            "outside the working folder",
        ),
        ("artifacts = [\"/app/../etc\"]\n", "artifacts", "`..`"),
        (
            "artifacts = [{ source = \"/app\", destination = \"/abs\" }]\n",
            "artifacts.destination",
            "relative path",
        ),
        (
            "artifacts = [{ source = \"/app\", destination = \"manifest.json\" }]\n",
            "artifacts.destination",
            "manifest.json",
        ),
        (
            "artifacts = [{ source = \"/data\", service = \"db\" }]\n",
            "artifacts.service",
            "sidecar",
        ),
        (
            "artifacts = [{ destination = \"x\" }]\n",
            "artifacts",
            "no `source`",
        ),
        (
            "[[steps]]\nname = \"a/b\"\n",
            "steps.name",
            "portable folder name",
        ),
        (
            "[agent]\nuser = \"a b\"\n",
            "agent.user",
            "not a user name or uid",
        ),
        (
            "[agent]\ntimeout_sec = \"long\"\n",
            "agent.timeout_sec",
            "not a number",
        ),
        (
            "[agent]\nnetwork_mode = \"bridge\"\n",
            "agent.network_mode",
            "not a network mode",
        ),
        (
            "[agent]\nallowed_hosts = [\"pypi.org\"]\n",
            "agent.allowed_hosts",
            "only valid",
        ),
        (
            "[agent]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"https://pypi.org\"]\n",
            "agent.allowed_hosts",
            "not URLs",
        ),
        ("[verifier]\nuser = -1\n", "verifier.user", "not a uid"),
        (
            "[verifier]\nenv = { A = 1 }\n",
            "verifier.env",
            "not a string",
        ),
        (
            "[[verifier.collect]]\ncommand = \"pg_dump > /x\"\n",
            "verifier.collect",
            "collect hook",
        ),
        (
            "[verifier.environment]\ndocker_image = \"other:1\"\n",
            "verifier.environment.docker_image",
            "unlike `environment.docker_image`",
        ),
        (
            "[verifier]\nenvironment_mode = \"together\"\n",
            "verifier.environment_mode",
            "not an environment mode",
        ),
        ("gpus = 1\n", "environment.gpus", "GPU"),
        ("gpus = -1\n", "environment.gpus", "at least 0"),
        (
            "tpu = { type = \"v6e\", topology = \"2x4\" }\n",
            "environment.tpu",
            "does not take effect",
        ),
        (
            "mcp_servers = [{ name = \"m\", url = \"ftp://m\" }]\n",
            "environment.mcp_servers[0].url",
            "not an http",
        ),
        (
            "mcp_servers = [{ name = \"m\", url = \"http://m:8000/sse\" }]\n",
            "environment.mcp_servers",
            "server `m`'s url names host `m`, which is not a service",
        ),
        (
            "mcp_servers = {}\n",
            "environment.mcp_servers",
            "not a list",
        ),
        ("memory = \"lots\"\n", "environment.memory", "not a size"),
        (
            "memory = \"2G\"\nmemory_mb = 1024\n",
            "environment.memory",
            "2048 MiB but `memory_mb` is 1024",
        ),
        (
            "storage = \"10G\"\nstorage_mb = 4096\n",
            "environment.storage",
            "10240 MiB",
        ),
        ("cpus = 0\n", "environment.cpus", "above 0"),
        ("os = \"windows\"\n", "environment.os", "not `linux`"),
        (
            "env = { \"A-B\" = \"1\" }\n",
            "environment.env",
            "not an environment-variable name",
        ),
        (
            "env = { A = \"${1BAD}\" }\n",
            "environment.env",
            "not a variable name",
        ),
        ("env = \"A=1\"\n", "environment.env", "not a table"),
        (
            "skills_dir = \"skills\"\n",
            "environment.skills_dir",
            "absolute",
        ),
        (
            "allow_internet = \"yes\"\n",
            "environment.allow_internet",
            "not true or false",
        ),
        (
            "allowed_hosts = [\"pypi.org\"]\n",
            "environment.allowed_hosts",
            "only valid",
        ),
        (
            "healthcheck = { interval_sec = 5 }\n",
            "environment.healthcheck",
            "command",
        ),
        // akbench's own tables refuse what they do not take (a typo would change what runs).
        (
            "[source]\nrepo = \"r\"\nbogus = 1\n",
            "source.bogus",
            "not a field of akbench's [source]",
        ),
        ("[source]\nrepo = 5\n", "source.repo", "not a string"),
        (
            "[mutation]\npatch = \"p\"\nextra = true\n",
            "mutation.extra",
            "not a field",
        ),
        (
            "[verifier.tripwire]\nenabled = \"no\"\n",
            "verifier.tripwire.enabled",
            "not a boolean",
        ),
        ("family = \"quantum\"\n", "family", "`quantum`"),
        ("id = 7\n", "id", "not a string"),
    ];
    for (toml, field, needle) in cases {
        // Top-level keys and other sections go before the base's [environment]; the keys of
        // [environment] under it.
        let top = toml.starts_with('[')
            || ["schema", "artifacts", "family", "id"]
                .iter()
                .any(|k| toml.starts_with(k));
        let text = if top {
            format!("{toml}{BASE}")
        } else {
            format!("{BASE}{toml}")
        };
        let e = load(&text)
            .map(|_| ())
            .err()
            .unwrap_or_else(|| panic!("{toml}: loaded"));
        let msg = e.to_string();
        let TaskErrorKind::Field { field: got, .. } = &e.kind else {
            panic!("{toml}: not a field error: {msg}");
        };
        assert_eq!(got, field, "{toml}: {msg}");
        assert!(
            msg.contains("task.toml") && msg.contains(needle) && msg.contains("; fix: "),
            "{toml}: {msg}"
        );
    }
}

#[test]
fn accepted_values_resolve_as_harbor_resolves_them() {
    // Terminal-Bench 2.1's task.toml as it ships (pypi-server), plus a source task.
    let tb21 = "schema_version = \"1.1\"\nartifacts = []\n\n[task]\nname = \"terminal-bench/pypi-server\"\ndescription = \"d\"\nkeywords = [\"coding\"]\n[[task.authors]]\nname = \"A\"\nemail = \"a@example.com\"\n\n[metadata]\ndifficulty = \"medium\"\n\n[verifier]\ntimeout_sec = 900.0\n\n[agent]\ntimeout_sec = 900.0\n\n[environment]\nbuild_timeout_sec = 600.0\ndocker_image = \"alexgshaw/pypi-server:20251031\"\ncpus = 1\nmemory_mb = 2048\nstorage_mb = 10240\ngpus = 0\nallow_internet = true\nmcp_servers = []\n\n[verifier.env]\n\n[environment.env]\n\n[solution.env]\n";
    let t = load(tb21).unwrap();
    assert_eq!(t.harbor_name.as_deref(), Some("terminal-bench/pypi-server"));
    assert_eq!(t.release.version, crate::task::UNVERSIONED);
    assert_eq!(t.requirements.storage_mb, Some(10240));
    assert_eq!(t.network.agent, NetworkMode::Public);
    let ignored: Vec<&str> = t
        .fields
        .iter()
        .filter(|u| u.handling == "ignored")
        .map(|u| u.field.as_str())
        .collect();
    assert_eq!(
        ignored,
        [
            "metadata",
            "task.authors",
            "task.description",
            "task.keywords"
        ],
        "{:?}",
        t.fields
    );
    // Legacy Terminal-Bench 2.0: version, memory / storage sizes.
    let t = load(&format!(
        "version = \"1.0\"\n{BASE}memory = \"2G\"\nstorage = \"10G\"\ncpus = 1.5\n"
    ))
    .unwrap();
    assert_eq!(t.release.version, "1.0");
    assert_eq!(t.requirements.memory_mb, Some(2048));
    assert_eq!(t.requirements.storage_mb, Some(10240));
    assert_eq!(t.requirements.cpus, Some(2));
    // [task] version wins over the top-level one.
    let t = load(&format!(
        "version = \"1.0\"\n[task]\nname = \"o/n\"\nversion = \"3\"\n{BASE}"
    ))
    .unwrap();
    assert_eq!(t.release.version, "3");
    // Networks: phase overrides, allowlists, allow_internet ignored beside network_mode.
    let t = load(&format!(
        "[agent]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"PyPI.org.\", \"*.github.com\"]\n[verifier.environment]\nallow_internet = false\n{BASE}network_mode = \"public\"\nallow_internet = false\n"
    ))
    .unwrap();
    assert_eq!(
        t.network.agent,
        NetworkMode::Allowlist(vec![
            AllowedHost::Hostname("pypi.org".into()),
            AllowedHost::Wildcard("github.com".into())
        ])
    );
    assert_eq!(t.network.verifier, NetworkMode::NoNetwork);
    assert!(t
        .fields
        .iter()
        .any(|u| u.field == "environment.allow_internet" && u.handling == "ignored"));
    // [verifier.environment] alone: Harbor's default `public` for grading.
    let t = load(&format!(
        "[verifier.environment]\ncpus = 1\n{BASE}cpus = 1\nnetwork_mode = \"no-network\"\n"
    ))
    .unwrap();
    assert_eq!(t.network.agent, NetworkMode::NoNetwork);
    assert_eq!(t.network.verifier, NetworkMode::Public);
    // Users: names and uids as the text the worker looks up in the image.
    let t = load(&format!(
        "[agent]\nuser = \"agent:staff\"\n[verifier]\nuser = 0\n{BASE}"
    ))
    .unwrap();
    assert_eq!(t.file.agent.user.as_deref(), Some("agent:staff"));
    assert_eq!(t.file.verifier.user.as_deref(), Some("0"));
    assert!(t
        .fields
        .iter()
        .any(|u| u.field == "verifier.user" && u.handling == "applied"));
    // Unknown keys are kept as ignored, never dropped.
    let t = load(&format!(
        "colour = \"red\"\n[agent]\ntimout_sec = 5\n{BASE}flavour = 1\n"
    ))
    .unwrap();
    for f in ["colour", "agent.timout_sec", "environment.flavour"] {
        assert!(
            t.fields
                .iter()
                .any(|u| u.field == f && u.handling == "ignored" && u.why == UNKNOWN_KEY),
            "{f}: {:?}",
            t.fields
        );
    }
}

#[test]
fn environment_values_are_literals_or_named_references_resolved_on_the_worker() {
    let cases = [
        (
            "plain",
            EnvValue::Literal {
                value: "plain".into(),
            },
        ),
        (
            "${TOKEN}",
            EnvValue::Reference {
                name: "TOKEN".into(),
                default: None,
            },
        ),
        (
            "${MODE:-fast}",
            EnvValue::Reference {
                name: "MODE".into(),
                default: Some("fast".into()),
            },
        ),
        (
            "${MODE:-}",
            EnvValue::Reference {
                name: "MODE".into(),
                default: Some(String::new()),
            },
        ),
        (
            "pre${X}",
            EnvValue::Literal {
                value: "pre${X}".into(),
            },
        ),
        (
            "${}",
            EnvValue::Literal {
                value: "${}".into(),
            },
        ),
    ];
    for (written, want) in cases {
        assert_eq!(EnvValue::parse(written), want, "{written}");
    }
    let env: BTreeMap<String, EnvValue> = [("A", "${SET}"), ("B", "${UNSET:-d}"), ("C", "lit")]
        .into_iter()
        .map(|(k, v)| (k.to_string(), EnvValue::parse(v)))
        .collect();
    let lookup = |n: &str| (n == "SET").then(|| "from-worker".to_string());
    let got = resolve_env(&env, lookup).unwrap();
    assert_eq!(got["A"], "from-worker");
    assert_eq!(got["B"], "d");
    assert_eq!(got["C"], "lit");
    let missing: BTreeMap<String, EnvValue> =
        [("K".to_string(), EnvValue::parse("${NOPE}"))].into();
    let e = resolve_env(&missing, lookup).unwrap_err();
    assert!(
        e.contains("`${NOPE}`") && e.contains("fix: export NOPE"),
        "{e}"
    );
    assert_eq!(size_to_mb("2G"), Some(2048));
    assert_eq!(size_to_mb(" 512m "), Some(512));
    assert_eq!(size_to_mb("1024K"), Some(1));
    assert_eq!(size_to_mb("0.5G"), Some(512));
    assert_eq!(size_to_mb("10"), None);
}

#[test]
fn syntax_errors_are_refused_with_a_fix_and_an_unbuilt_dockerfile_waits() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("c");
    std::fs::create_dir_all(dir.join("tests")).unwrap();
    std::fs::create_dir_all(dir.join("environment")).unwrap();
    std::fs::write(dir.join("task.toml"), BASE).unwrap();
    std::fs::write(dir.join("instruction.md"), "x\n").unwrap();
    std::fs::write(dir.join("tests/test.sh"), "exit 0\n").unwrap();
    std::fs::write(dir.join("task.toml"), "[environment\n").unwrap();
    let e = Task::load(&dir, tmp.path()).unwrap_err().to_string();
    assert!(e.contains("fix: correct the TOML syntax"), "{e}");
    // Dockerfile only: loads, waits for `image build`, refused by every runtime until then.
    std::fs::write(dir.join("task.toml"), "schema_version = \"1.1\"\n").unwrap();
    std::fs::write(dir.join("environment/Dockerfile"), "FROM scratch\n").unwrap();
    let t = Task::load(&dir, tmp.path()).unwrap();
    assert!(t.image_only() && t.image_unbuilt && t.image.is_none());
    let e = t.check_runtime(true).unwrap_err();
    assert!(
        e.contains("akbench image build") && e.contains("no image yet"),
        "{e}"
    );
    // docker_image wins over the Dockerfile, which is kept as ignored.
    std::fs::write(dir.join("task.toml"), BASE).unwrap();
    let t = Task::load(&dir, tmp.path()).unwrap();
    assert!(!t.image_unbuilt);
    assert!(t
        .fields
        .iter()
        .any(|u| u.field == "environment/Dockerfile" && u.handling == "ignored"));
}
