//! Table tests of the compose reader ([`super::parse`]): every key class, every
//! `depends_on` and healthcheck form, interpolation, and the refusals (the value syntaxes
//! alone are `values_tests.rs`).

use super::values::interpolate;
use super::*;

const HEX: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";

fn img() -> String {
    format!("registry.example/db@sha256:{HEX}")
}

/// A file with one sidecar `api` whose extra lines are `body` (indented under it).
fn one(body: &str) -> String {
    let mut s = format!("services:\n  api:\n    image: {}\n", img());
    for l in body.lines() {
        s.push_str("    ");
        s.push_str(l);
        s.push('\n');
    }
    s
}

fn api(body: &str) -> Service {
    let w = parse(&one(body)).unwrap_or_else(|e| panic!("{body}: {e}"));
    w.services[0].clone()
}

fn refused(text: &str) -> WorldError {
    match parse(text) {
        Ok(w) => panic!("accepted:\n{text}\n{w:?}"),
        Err(e) => e,
    }
}

#[test]
fn interpolation_is_refused_and_a_double_dollar_is_a_dollar() {
    assert_eq!(interpolate("a$$b").unwrap(), "a$b");
    assert_eq!(interpolate("cost: 5$").unwrap(), "cost: 5$");
    assert_eq!(interpolate("$1 $-").unwrap(), "$1 $-");
    for (bad, name) in [
        ("${PORT}", "${PORT}"),
        ("x${PORT:-80}y", "${PORT:-80}"),
        ("$HOME/x", "$HOME"),
        ("a $_b", "$_b"),
        ("${open", "${open"),
    ] {
        let e = interpolate(bad).unwrap_err();
        assert!(e.contains(&format!("`{name}`")), "{bad}: {e}");
    }
    // In a file: named with the service and the key; `$$` reaches the service as `$`.
    let e = refused(&one("environment:\n  URL: http://${HOST}/"));
    assert_eq!(
        (e.service.as_deref(), e.key.as_str()),
        (Some("api"), "environment")
    );
    assert!(
        e.to_string().contains("${HOST}") && e.to_string().contains("`$$`"),
        "{e}"
    );
    assert_eq!(
        api("command: [\"echo\", \"$$PATH\"]").command.unwrap(),
        ["echo", "$PATH"]
    );
    let e = refused("services:\n  api:\n    image: ${IMG}\n");
    assert_eq!(e.key, "image");
}

#[test]
fn a_full_sidecar_reads_every_key_that_takes_effect() {
    let text = format!(
        r#"version: "3.8"
name: ignored
x-common: &common
  restart: "no"
services:
  main:
    depends_on:
      api:
        condition: service_healthy
    environment:
      API_URL: http://api:8080
  db:
    image: {img}
    command: postgres -c fsync=off
  api:
    <<: *common
    image: reg.example:5000/team/api:1.2@sha256:{HEX}
    entrypoint: ["/bin/api"]
    command: ["--port", 8080]
    environment:
      - MODE=test
      - EMPTY=
      - EQ=a=b
    working_dir: /srv
    user: 1000
    depends_on: [db]
    healthcheck:
      test: ["CMD", "curl", "-f", "http://localhost:8080/health"]
      interval: 2s
      timeout: 1m30s
      start_period: 500ms
      start_interval: 1s
      retries: 10
    expose: ["8080"]
    ports: ["8080:8080"]
    container_name: api
    hostname: api
    init: false
    labels: {{team: x}}
"#,
        img = img()
    );
    let w = parse(&text).unwrap();
    assert_eq!(
        w.main_depends_on,
        [Dependency {
            service: "api".into(),
            condition: Condition::ServiceHealthy
        }]
    );
    assert_eq!(w.main_environment["API_URL"], "http://api:8080");
    let names: Vec<&str> = w.services.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["db", "api"]);
    let db = &w.services[0];
    assert_eq!(
        db.image.as_ref().unwrap().digest.as_deref(),
        Some(format!("sha256:{HEX}").as_str())
    );
    assert_eq!(
        db.command.as_deref().unwrap(),
        ["postgres", "-c", "fsync=off"]
    );
    assert_eq!(
        (db.entrypoint.as_ref(), db.healthcheck.as_ref()),
        (None, None)
    );
    let a = &w.services[1];
    assert_eq!(
        (
            a.image.as_ref().unwrap().registry.as_str(),
            a.image.as_ref().unwrap().repository.as_str(),
            a.image.as_ref().unwrap().tag.as_deref()
        ),
        ("reg.example:5000", "team/api", Some("1.2"))
    );
    assert_eq!(a.entrypoint.as_deref().unwrap(), ["/bin/api"]);
    assert_eq!(a.command.as_deref().unwrap(), ["--port", "8080"]);
    let env: Vec<(&str, &str)> = a
        .environment
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert_eq!(env, [("EMPTY", ""), ("EQ", "a=b"), ("MODE", "test")]);
    assert_eq!(
        (a.working_dir.as_deref(), a.user.as_deref()),
        (Some("/srv"), Some("1000"))
    );
    assert_eq!(
        a.depends_on,
        [Dependency {
            service: "db".into(),
            condition: Condition::ServiceStarted
        }]
    );
    assert_eq!(
        a.healthcheck,
        Some(Healthcheck {
            command: "curl -f http://localhost:8080/health".into(),
            interval_sec: 2.0,
            timeout_sec: 90.0,
            start_period_sec: 0.5,
            start_interval_sec: 1.0,
            retries: 10,
        })
    );
    let order: Vec<&str> = w
        .start_order()
        .unwrap()
        .iter()
        .map(|s| s.name.as_str())
        .collect();
    assert_eq!(order, ["db", "api"]);
}

#[test]
fn every_depends_on_form_is_read() {
    let deps = |body: &str| {
        let text = format!(
            "services:\n  db:\n    image: {}\n    healthcheck:\n      test: \"true\"\n  api:\n    image: {}\n    depends_on:\n{}",
            img(),
            img(),
            body.lines().map(|l| format!("      {l}\n")).collect::<String>()
        );
        parse(&text).map(|w| w.services[1].depends_on.clone())
    };
    let d = |c| {
        vec![Dependency {
            service: "db".into(),
            condition: c,
        }]
    };
    for (body, want) in [
        ("- db", d(Condition::ServiceStarted)),
        ("db: {}", d(Condition::ServiceStarted)),
        (
            "db:\n  condition: service_started",
            d(Condition::ServiceStarted),
        ),
        (
            "db:\n  condition: service_healthy",
            d(Condition::ServiceHealthy),
        ),
        (
            "db:\n  condition: service_completed_successfully",
            d(Condition::ServiceCompletedSuccessfully),
        ),
        (
            "db:\n  condition: service_healthy\n  required: true",
            d(Condition::ServiceHealthy),
        ),
    ] {
        assert_eq!(deps(body).unwrap(), want, "{body}");
    }
    for (body, key, needle) in [
        (
            "db:\n  condition: service_ready",
            "depends_on.db.condition",
            "not a condition",
        ),
        (
            "db:\n  required: false",
            "depends_on.db.required",
            "none is optional",
        ),
        (
            "db:\n  restart: true",
            "depends_on.db.restart",
            "restarts no service",
        ),
        (
            "db:\n  wait: 1",
            "depends_on.db.wait",
            "not a key of a dependency",
        ),
        ("db: service_healthy", "depends_on.db", "not a mapping"),
        ("- db\n- db", "depends_on", "twice"),
        ("- nope", "depends_on", "does not define"),
        ("- api", "depends_on", "cycle"),
        ("- main", "depends_on", "names `main`"),
    ] {
        let e = deps(body).unwrap_err();
        assert_eq!(e.key, key, "{body}: {e}");
        assert!(e.to_string().contains(needle), "{body}: {e}");
    }
    let e = refused(&format!(
        "services:\n  a:\n    image: {i}\n    depends_on: [b]\n  b:\n    image: {i}\n    depends_on: [a]\n",
        i = img()
    ));
    assert!(e.problem.contains("cycle: a -> b -> a"), "{e}");
    let e = refused(&format!(
        "services:\n  db:\n    image: {}\n  api:\n    image: {}\n    depends_on:\n      db:\n        condition: service_healthy\n",
        img(),
        img()
    ));
    assert!(
        e.to_string()
            .contains("`db` to be healthy, but it has no healthcheck"),
        "{e}"
    );
    let e = refused("services:\n  main:\n    depends_on: [ghost]\n");
    assert!(e.problem.contains("`main` depends on `ghost`"), "{e}");
}

#[test]
fn every_healthcheck_form_is_read_with_dockers_defaults() {
    let hc = |body: &str| {
        api(&format!(
            "healthcheck:\n{}",
            body.lines().map(|l| format!("  {l}\n")).collect::<String>()
        ))
        .healthcheck
    };
    let cmd = |body: &str| hc(body).map(|h| h.command);
    assert_eq!(
        cmd("test: [\"CMD\", \"pg_isready\", \"-U\", \"a b\"]").unwrap(),
        "pg_isready -U 'a b'"
    );
    assert_eq!(
        cmd("test: [\"CMD-SHELL\", \"pg_isready || exit 1\"]").unwrap(),
        "pg_isready || exit 1"
    );
    assert_eq!(
        cmd("test: curl -f localhost || exit 1").unwrap(),
        "curl -f localhost || exit 1"
    );
    assert_eq!(cmd("test: [\"NONE\"]"), None);
    assert_eq!(cmd("disable: true"), None);
    assert_eq!(
        cmd("disable: false\ntest: [\"CMD\", \"true\"]").unwrap(),
        "true"
    );
    let d = hc("test: [\"CMD\", \"true\"]").unwrap();
    assert_eq!(
        (
            d.interval_sec,
            d.timeout_sec,
            d.start_period_sec,
            d.start_interval_sec,
            d.retries
        ),
        (30.0, 30.0, 0.0, 5.0, 3)
    );
    // 0 is Docker's default.
    let z = hc("test: \"true\"\ninterval: 0s\ntimeout: 0s\nretries: 0").unwrap();
    assert_eq!((z.interval_sec, z.timeout_sec, z.retries), (30.0, 30.0, 3));
    for (body, key, needle) in [
        ("interval: 5s", "healthcheck", "no `test`"),
        ("test: [\"CMD\"]", "healthcheck.test", "wrong number"),
        (
            "test: [\"CMD-SHELL\", \"a\", \"b\"]",
            "healthcheck.test",
            "wrong number",
        ),
        (
            "test: [\"NONE\", \"x\"]",
            "healthcheck.test",
            "wrong number",
        ),
        (
            "test: [\"curl\", \"x\"]",
            "healthcheck.test",
            "not CMD, CMD-SHELL or NONE",
        ),
        ("test: []", "healthcheck.test", "empty list"),
        ("test: \" \"", "healthcheck.test", "is empty"),
        ("test: {a: 1}", "healthcheck.test", "is a mapping"),
        ("test: \"true\"\ndisable: true", "healthcheck", "both"),
        (
            "test: \"true\"\ndisable: yes",
            "healthcheck.disable",
            "not a boolean",
        ),
        (
            "test: \"true\"\ninterval: 10",
            "healthcheck.interval",
            "not a string",
        ),
        (
            "test: \"true\"\ntimeout: 5x",
            "healthcheck.timeout",
            "unknown unit",
        ),
        (
            "test: \"true\"\nstart_period: 25h",
            "healthcheck.start_period",
            "longer than a day",
        ),
        (
            "test: \"true\"\nstart_interval: soon",
            "healthcheck.start_interval",
            "not a duration",
        ),
        (
            "test: \"true\"\nretries: -1",
            "healthcheck.retries",
            "whole number",
        ),
        (
            "test: \"true\"\nretries: 1001",
            "healthcheck.retries",
            "whole number",
        ),
        (
            "test: \"true\"\nport: 1",
            "healthcheck.port",
            "not a key of a healthcheck",
        ),
    ] {
        let text = one(&format!(
            "healthcheck:\n{}",
            body.lines().map(|l| format!("  {l}\n")).collect::<String>()
        ));
        let e = refused(&text);
        assert_eq!(
            (e.service.as_deref(), e.key.as_str()),
            (Some("api"), key),
            "{body}: {e}"
        );
        assert!(e.to_string().contains(needle), "{body}: {e}");
    }
    let e = refused(&one("healthcheck: curl"));
    assert!(e.problem.contains("not a mapping"), "{e}");
}

#[test]
fn the_value_forms_of_command_environment_user_and_working_dir() {
    assert_eq!(api("command: []").command.unwrap(), Vec::<String>::new());
    assert_eq!(api("command: null").command, None);
    assert_eq!(
        api("entrypoint: sh -c 'exec x'").entrypoint.unwrap(),
        ["sh", "-c", "exec x"]
    );
    assert_eq!(
        api("command: [run, true, 1.5]").command.unwrap(),
        ["run", "true", "1.5"]
    );
    let env = api("environment:\n  N: 1\n  B: true\n  S: ''").environment;
    assert_eq!(
        env.into_iter().collect::<Vec<_>>(),
        [
            ("B".into(), "true".into()),
            ("N".into(), "1".into()),
            ("S".into(), String::new())
        ]
    );
    assert!(api("environment:").environment.is_empty());
    assert_eq!(api("user: \"app:app\"").user.as_deref(), Some("app:app"));
    for (body, key, needle) in [
        ("command: a && b", "command", "operator"),
        ("command: {a: 1}", "command", "not a string or a list"),
        ("command: [[a]]", "command", "not a string or number"),
        (
            "environment:\n  - MODE",
            "environment",
            "`MODE` has no value",
        ),
        (
            "environment:\n  MODE:",
            "environment",
            "`MODE` has no value",
        ),
        ("environment:\n  - 1", "environment", "not a string"),
        ("environment:\n  - =x", "environment", "not a variable name"),
        (
            "environment:\n  A B: x",
            "environment",
            "not a variable name",
        ),
        (
            "environment: MODE=x",
            "environment",
            "not a list or a mapping",
        ),
        ("environment:\n  A: [1]", "environment.A", "not a string"),
        ("working_dir: srv", "working_dir", "not an absolute path"),
        ("working_dir: 1", "working_dir", "not a string"),
        ("user: [a]", "user", "not a string"),
    ] {
        let e = refused(&one(body));
        assert_eq!(
            (e.service.as_deref(), e.key.as_str()),
            (Some("api"), key),
            "{body}: {e}"
        );
        assert!(e.to_string().contains(needle), "{body}: {e}");
    }
}

#[test]
fn a_sidecar_image_must_be_pinned_by_digest() {
    let plain = "services:\n  db:\n    image: postgres:16\n";
    let e = refused(plain);
    assert_eq!(
        (e.service.as_deref(), e.key.as_str()),
        (Some("db"), "image")
    );
    assert!(e.problem.contains("not pinned by digest"), "{e}");
    assert!(
        e.fix.contains("pin it by digest") && e.fix.contains("postgres:16@sha256:"),
        "{e}"
    );
    let e = refused("services:\n  db:\n    image: Postgres@sha256:abc\n");
    assert!(e.problem.contains("not an image reference"), "{e}");
    let e = refused("services:\n  db:\n    command: [x]\n");
    assert_eq!(
        (e.key.as_str(), e.problem.as_str()),
        ("image", "is missing")
    );
    let e = refused("services:\n  db:\n    image: [x]\n");
    assert!(e.problem.contains("not a string"), "{e}");
    let w = parse(&format!(
        "services:\n  db:\n    image: postgres@sha256:{HEX}\n"
    ))
    .unwrap();
    assert_eq!(
        w.services[0].image.as_ref().unwrap().repository,
        "library/postgres"
    );
}

#[test]
fn every_sidecar_key_is_taken_a_no_op_or_refused_by_name() {
    for body in [
        "expose: [\"5432\"]",
        "ports: [\"5432:5432\", {target: 80, published: 8080}]",
        "container_name: api",
        "hostname: api",
        "restart: \"no\"",
        "restart: no",
        "init: false",
        "labels: [a=b]",
        "pull_policy: always",
        "x-note: anything",
    ] {
        api(body);
    }
    for (body, needle) in [
        ("volumes: [\"./data:/data\"]", "its own file system"),
        ("tmpfs: /run", "its own file system"),
        ("networks: [back]", "one private network"),
        ("network_mode: host", "one private network"),
        ("links: [db]", "one private network"),
        ("extra_hosts: [\"a:1.2.3.4\"]", "one private network"),
        ("dns: 8.8.8.8", "one private network"),
        ("privileged: true", "unprivileged"),
        ("cap_add: [NET_ADMIN]", "unprivileged"),
        ("devices: [/dev/fuse]", "unprivileged"),
        ("security_opt: [seccomp=unconfined]", "unprivileged"),
        ("pid: host", "unprivileged"),
        ("ipc: host", "unprivileged"),
        ("ulimits: {nofile: 1024}", "unprivileged"),
        (
            "deploy: {resources: {}}",
            "each service runs with the task's own limits",
        ),
        (
            "mem_limit: 1g",
            "each service runs with the task's own limits",
        ),
        ("env_file: .env", "write the variables in `environment:`"),
        ("secrets: [token]", "mounts no file"),
        ("configs: [conf]", "mounts no file"),
        ("profiles: [debug]", "every service of the file runs"),
        ("stdin_open: true", "not a key akbench runs a service with"),
        ("container_name: db-1", "not the service's name"),
        ("hostname: other", "not the service's name"),
        ("restart: always", "not restarted"),
        ("restart: on-failure", "not restarted"),
        ("init: true", "no init process"),
        ("command: !reset []", "YAML tag `!reset`"),
        ("environment: !override {A: b}", "YAML tag `!override`"),
    ] {
        let key = body.split(':').next().unwrap();
        let e = refused(&one(body));
        assert_eq!(
            (e.service.as_deref(), e.key.as_str()),
            (Some("api"), key),
            "{body}"
        );
        let shown = e.to_string();
        assert!(
            shown.starts_with(&format!("service `api`: `{key}` ")),
            "{shown}"
        );
        assert!(
            shown.contains(needle) && shown.contains("; fix: "),
            "{body}: {shown}"
        );
    }
}

#[test]
fn main_takes_depends_on_and_environment_and_harbors_own_keys_are_decided() {
    let main = |body: &str| {
        format!(
            "services:\n  main:\n{}  api:\n    image: {}\n",
            body.lines()
                .map(|l| format!("    {l}\n"))
                .collect::<String>(),
            img()
        )
    };
    for body in [
        "build: .",
        "build:\n  context: .",
        "command: [\"sh\", \"-c\", \"sleep infinity\"]",
        "pull_policy: build",
        "container_name: main",
        "hostname: main",
        "expose: [\"80\"]",
        "ports: [\"80:80\"]",
        "restart: \"no\"",
        "init: false",
        "environment: [A=1]",
        "depends_on: [api]",
    ] {
        parse(&main(body)).unwrap_or_else(|e| panic!("{body}: {e}"));
    }
    let w = parse(&main("environment: [A=1]\ndepends_on: [api]")).unwrap();
    assert_eq!(w.main_environment["A"], "1");
    assert_eq!(w.main_depends_on[0].service, "api");
    assert_eq!(w.services.len(), 1);
    for (body, key, needle) in [
        (
            "build:\n  context: ./other",
            "build",
            "change the task's image",
        ),
        (
            "build:\n  context: .\n  dockerfile: Other",
            "build",
            "change the task's image",
        ),
        ("image: alpine", "image", "docker_image"),
        (
            "command: [\"python\", \"serve.py\"]",
            "command",
            "what main runs",
        ),
        ("entrypoint: [sh]", "entrypoint", "what main runs"),
        (
            "healthcheck:\n  test: \"true\"",
            "healthcheck",
            "[environment] healthcheck",
        ),
        ("working_dir: /app", "working_dir", "[environment] workdir"),
        ("user: root", "user", "[agent] user"),
        ("network_mode: none", "network_mode", "one private network"),
        ("volumes: [\"./x:/x\"]", "volumes", "own file system"),
        ("deploy: {}", "deploy", "cpus"),
        (
            "container_name: box",
            "container_name",
            "not the service's name",
        ),
        ("privileged: true", "privileged", "unprivileged"),
    ] {
        let e = refused(&main(body));
        assert_eq!(
            (e.service.as_deref(), e.key.as_str()),
            (Some("main"), key),
            "{body}: {e}"
        );
        assert!(e.to_string().contains(needle), "{body}: {e}");
    }
}

#[test]
fn the_top_level_keys_and_the_service_names() {
    let ok = format!("version: \"3\"\nname: x\nx-a: 1\nnetworks: {{}}\nvolumes:\nconfigs: {{}}\nsecrets: {{}}\nservices:\n  db:\n    image: {}\n", img());
    assert_eq!(parse(&ok).unwrap().services.len(), 1);
    assert!(parse("services: {}\n").unwrap().services.is_empty());
    for (text, key, needle) in [
        (
            "networks:\n  back: {}\nservices: {}\n",
            "networks",
            "one private network",
        ),
        (
            "volumes:\n  data: {}\nservices: {}\n",
            "volumes",
            "own file system",
        ),
        (
            "configs:\n  c: {file: x}\nservices: {}\n",
            "configs",
            "remove the top-level",
        ),
        (
            "secrets:\n  s: {file: x}\nservices: {}\n",
            "secrets",
            "remove the top-level",
        ),
        (
            "include: [other.yaml]\nservices: {}\n",
            "include",
            "not a compose key",
        ),
        ("version: \"3\"\n", "services", "is missing"),
        ("services: [db]\n", "services", "not a mapping"),
        ("services:\n  db:\n", "", "not a mapping of keys"),
        ("services:\n  Db:\n    image: x\n", "", "not a DNS label"),
        ("services:\n  -db:\n    image: x\n", "", "not a DNS label"),
        ("services:\n  db_1:\n    image: x\n", "", "not a DNS label"),
        (
            "services:\n  localhost:\n    image: x\n",
            "",
            "already gives itself",
        ),
        ("[1, 2]\n", "", "not a mapping of top-level keys"),
        ("services: {\n", "", "not valid YAML"),
        ("services: {}\nservices: {}\n", "", "not valid YAML"),
    ] {
        let e = refused(text);
        assert_eq!(e.key, key, "{text}: {e}");
        assert!(e.to_string().contains(needle), "{text}: {e}");
    }
    let long = "a".repeat(63);
    parse(&format!("services:\n  {long}:\n    image: {}\n", img())).unwrap();
    let e = refused(&format!("services:\n  {long}a:\n    image: {}\n", img()));
    assert!(e.problem.contains("DNS label"), "{e}");
    let many = |n: usize| {
        let mut s = String::from("services:\n  main:\n    environment: [A=1]\n");
        for i in 0..n {
            s.push_str(&format!("  s{i}:\n    image: {}\n", img()));
        }
        s
    };
    assert_eq!(
        parse(&many(MAX_SIDECARS)).unwrap().services.len(),
        MAX_SIDECARS
    );
    let e = refused(&many(MAX_SIDECARS + 1));
    assert_eq!(e.service.as_deref(), Some("s32"));
    assert!(e.problem.contains("32"), "{e}");
}

#[test]
fn the_summary_names_each_service_its_pinned_image_and_what_it_waits_for() {
    let w = parse(&format!(
        "services:\n  main:\n    depends_on: [api]\n  db:\n    image: reg.example/db:16@sha256:{HEX}\n  api:\n    image: {}\n    depends_on:\n      db: {{condition: service_completed_successfully}}\n",
        img()
    ))
    .unwrap();
    assert_eq!(
        w.summary_lines(),
        [
            format!("db reg.example/db@sha256:{HEX}"),
            format!(
                "api {}, depends on db (service_completed_successfully)",
                img()
            ),
            "main (the task's environment), depends on api (service_started)".to_string(),
        ]
    );
    let json = serde_json::to_value(w.summary()).unwrap();
    assert_eq!(
        json[0],
        serde_json::json!({"name": "db", "image": format!("reg.example/db@sha256:{HEX}"), "depends_on": []})
    );
    assert_eq!(
        json[2],
        serde_json::json!({"name": "main", "depends_on": [{"service": "api", "condition": "service_started"}]})
    );
}

#[test]
fn every_refused_key_is_refused_with_its_reason_and_documented() {
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/tasks.md")).unwrap();
    let section = doc
        .split("### Sidecar services")
        .nth(1)
        .expect("a Sidecar services section")
        .split("\n### ")
        .next()
        .unwrap();
    for (keys, why, fix) in REFUSED {
        for key in *keys {
            for owner in ["api", "main"] {
                let text = format!(
                    "services:\n  {owner}:\n    {key}: x\n  db:\n    image: {}\n",
                    img()
                );
                let e = refused(&text);
                assert_eq!(
                    (e.service.as_deref(), e.key.as_str()),
                    (Some(owner), *key),
                    "{e}"
                );
                // main's `build` has its own reason (the task's image).
                if !(owner == "main" && *key == "build") {
                    assert_eq!((e.problem.as_str(), e.fix.as_str()), (*why, *fix), "{key}");
                }
            }
            assert!(
                section.contains(&format!("`{key}`")),
                "docs/tasks.md: `{key}`"
            );
        }
    }
    for key in [
        "image",
        "entrypoint",
        "command",
        "environment",
        "working_dir",
        "user",
        "depends_on",
        "healthcheck",
        "expose",
        "ports",
        "labels",
        "pull_policy",
        "container_name",
        "hostname",
        "restart",
        "init",
    ] {
        assert!(
            section.contains(&format!("`{key}`")),
            "docs/tasks.md: `{key}`"
        );
    }
}

/// A file with one sidecar `kv` whose lines are `body` (no `image:` unless it says so).
fn kv(body: &str) -> String {
    let mut s = "services:\n  kv:\n".to_string();
    for l in body.lines() {
        s.push_str("    ");
        s.push_str(l);
        s.push('\n');
    }
    s
}

#[test]
fn a_sidecar_built_from_a_folder_of_environment_reads_its_context_and_dockerfile() {
    let b = |context: &str, dockerfile: &str| {
        Some(Build {
            context: context.into(),
            dockerfile: dockerfile.into(),
        })
    };
    for (body, build) in [
        ("build: ./kv", b("kv", "kv/Dockerfile")),
        ("build: kv/", b("kv", "kv/Dockerfile")),
        ("build: .", b(".", "Dockerfile")),
        ("build: ./services/../kv", b("kv", "kv/Dockerfile")),
        ("build: {context: ./kv}", b("kv", "kv/Dockerfile")),
        (
            "build:\n  context: kv\n  dockerfile: docker/Dockerfile.kv\n  x-note: 1",
            b("kv", "kv/docker/Dockerfile.kv"),
        ),
        (
            "build: {context: ./kv, dockerfile: ../kv.Dockerfile}",
            b("kv", "kv.Dockerfile"),
        ),
        // An `image:` beside `build:` that is a name, not a pin: compose's tag for the
        // build, and akbench builds it.
        ("image: team/kv:dev\nbuild: ./kv", b("kv", "kv/Dockerfile")),
    ] {
        let w = parse(&kv(body)).unwrap_or_else(|e| panic!("{body}: {e}"));
        assert_eq!(w.services[0].build, build, "{body}");
        assert_eq!(w.services[0].image, None, "{body}");
        assert_eq!(w.unbuilt(), ["kv"], "{body}");
    }
    // A pin by digest beside `build:` wins: akbench runs it and builds nothing.
    let w = parse(&kv(&format!("image: {}\nbuild: ./kv", img()))).unwrap();
    assert_eq!(w.services[0].build, None);
    assert_eq!(w.services[0].image.as_ref().unwrap().to_string(), img());
    assert!(w.unbuilt().is_empty());
    // The summary shows where an unbuilt service comes from.
    let w = parse(&kv("build: ./kv")).unwrap();
    assert_eq!(
        w.summary_lines(),
        ["kv (built from environment/kv; not built yet)"]
    );
    assert_eq!(
        serde_json::to_value(w.summary()).unwrap()[0],
        serde_json::json!({"name": "kv", "build": "kv", "depends_on": []})
    );
}

#[test]
fn a_build_that_leaves_environment_or_takes_other_keys_is_refused_by_name() {
    for (body, key, needle) in [
        (
            "build: ..",
            "build.context",
            "leaves the task's environment/",
        ),
        (
            "build: ./kv/../../x",
            "build.context",
            "leaves the task's environment/",
        ),
        ("build: /srv/kv", "build.context", "absolute path"),
        (
            "build: https://github.com/a/b.git#main",
            "build.context",
            "remote context",
        ),
        (
            "build: git@github.com:a/b.git",
            "build.context",
            "remote context",
        ),
        ("build: \"\"", "build.context", "empty"),
        (
            "build: {context: kv, dockerfile: ../../Dockerfile}",
            "build.dockerfile",
            "leaves the task's environment/",
        ),
        (
            "build: {context: kv, dockerfile: /Dockerfile}",
            "build.dockerfile",
            "absolute path",
        ),
        (
            "build: {dockerfile: Dockerfile}",
            "build.context",
            "is missing",
        ),
        ("build: {context: [kv]}", "build.context", "not a string"),
        ("build: [kv]", "build", "not a folder or a mapping"),
        (
            "build: {context: kv, args: {A: b}}",
            "build.args",
            "`ARG`'s default",
        ),
        (
            "build: {context: kv, target: run}",
            "build.target",
            "last one",
        ),
        (
            "build: {context: kv, dockerfile_inline: FROM x}",
            "build.dockerfile_inline",
            "`dockerfile:`",
        ),
        (
            "build: {context: kv, ssh: [default]}",
            "build.ssh",
            "context and Dockerfile only",
        ),
        (
            "build: {context: kv, frobnicate: 1}",
            "build.frobnicate",
            "context and Dockerfile only",
        ),
    ] {
        let e = refused(&kv(body));
        assert_eq!(
            (e.service.as_deref(), e.key.as_str()),
            (Some("kv"), key),
            "{body}: {e}"
        );
        assert!(
            e.to_string().contains(needle) && e.to_string().contains("; fix: "),
            "{body}: {e}"
        );
    }
    // Neither `image:` nor `build:`: the fix names both.
    let e = refused(&kv("command: [x]"));
    assert_eq!(e.key, "image");
    assert!(e.fix.contains("build: ./SERVICE"), "{e}");
    // Every refused build key is documented.
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/tasks.md")).unwrap();
    let row = doc
        .lines()
        .find(|l| l.starts_with("| `build` | takes effect |"))
        .expect("docs/tasks.md: the sidecar's `build` row");
    for (keys, _) in BUILD_KEYS_REFUSED {
        for key in *keys {
            assert!(
                row.contains(&format!("`build.{key}`")) || row.contains(&format!("`{key}`")),
                "docs/tasks.md's `build` row: `{key}`"
            );
        }
    }
}

#[test]
fn a_built_service_takes_its_pin_from_task_toml_and_a_stray_pin_is_refused() {
    let pin = |text: &str| crate::image::ImageRef::parse(text).unwrap();
    let pins = |list: &[(&str, &str)]| -> BTreeMap<String, crate::image::ImageRef> {
        list.iter().map(|(n, i)| (n.to_string(), pin(i))).collect()
    };
    let text = format!(
        "services:\n  kv:\n    build: ./kv\n  db:\n    image: {}\n  web:\n    image: {}\n    build: ./web\n",
        img(),
        img()
    );
    let built = format!("127.0.0.1:5000/akbench/t-kv:1.0@sha256:{HEX}");
    let mut w = parse(&text).unwrap();
    assert_eq!(w.unbuilt(), ["kv"]);
    w.pin_built(&pins(&[("kv", &built)])).unwrap();
    assert!(w.unbuilt().is_empty());
    assert_eq!(w.services[0].image, Some(pin(&built)));
    for (name, needle) in [
        ("db", "akbench does not build it"),
        ("web", "akbench does not build it"),
        ("cache", "defines no such sidecar"),
    ] {
        let mut w = parse(&text).unwrap();
        let e = w.pin_built(&pins(&[(name, &built)])).unwrap_err();
        assert_eq!(e.service.as_deref(), Some(name));
        assert!(e.problem.contains(needle), "{name}: {e}");
    }
    let mut w = parse(&text).unwrap();
    let e = w
        .pin_built(&pins(&[("kv", "127.0.0.1:5000/akbench/t-kv:1.0")]))
        .unwrap_err();
    assert!(e.problem.contains("not pinned by digest"), "{e}");
}
