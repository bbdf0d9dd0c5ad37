//! `akbench image build` of a task whose sidecar is written as Harbor authors write it
//! (`build: ./kv`, the kv example), through the real binary: the builder is a script that
//! records what it is asked to run (the images it would push are pushed to a loopback
//! registry beforehand, as a builder would), the digests are read back from the registry,
//! the pins are written into task.toml, and `task check` then finds the task valid with the
//! service running over its pin (the oracle solves through the service's API, the no-op
//! agent does not).

#[path = "../../worker/tests/common/registry.rs"]
#[allow(dead_code)]
mod registry;

use serde_json::Value;
use std::path::Path;
use std::process::Command;

const KV: &str = "harbor-sidecar-kv-001";

fn run(
    args: &[&std::ffi::OsStr],
    path: Option<&str>,
    reg: &registry::Registry,
) -> (i32, Value, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_akbench"));
    cmd.args(args).env("AKBENCH_INSECURE_REGISTRIES", &reg.addr);
    if let Some(p) = path {
        cmd.env("PATH", p);
    }
    let out = cmd.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        serde_json::from_slice(&out.stdout).unwrap_or(Value::Null),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn image_build_builds_a_build_service_pins_it_in_task_toml_and_the_task_checks_valid() {
    const TEST: &str =
        "image_build_builds_a_build_service_pins_it_in_task_toml_and_the_task_checks_valid";
    if let Some(why) = registry::missing() {
        akbench_core::testkit::skip(TEST, &why);
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let reg = registry::Registry::start();
    let example = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/tasks")
        .join(KV);
    let compose = std::fs::read_to_string(example.join("environment/docker-compose.yaml")).unwrap();
    assert!(compose.contains("build: ./kv"), "{compose}");
    // What a builder would push: the task's image (the base, as environment/Dockerfile is)
    // and the service's (environment/kv/).
    let main_digest = reg.push(
        "akbench/kvtask:1",
        &[(&registry::base_tar(), "tar")],
        &["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
        Some("/app"),
        None,
    );
    let kv_digest =
        registry::service_image(&reg, tmp.path(), &example, "kv", "akbench/kvtask-kv:1");
    let dir = tmp.path().join("tasks").join(KV);
    std::fs::create_dir_all(tmp.path().join("tasks")).unwrap();
    assert!(Command::new("cp")
        .arg("-a")
        .arg(&example)
        .arg(&dir)
        .status()
        .unwrap()
        .success());
    // The builder: records its argv, builds and pushes nothing.
    let bin = tmp.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let log = tmp.path().join("builder.log");
    std::fs::write(
        bin.join("docker"),
        format!("#!/bin/sh\nprintf '%s\\n' \"$*\" >> '{}'\n", log.display()),
    )
    .unwrap();
    std::fs::set_permissions(
        bin.join("docker"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let cache = tmp.path().join("cache");
    let check = || {
        run(
            &[
                "task",
                "check",
                dir.to_str().unwrap(),
                "--runtime",
                "container",
                "--json",
                "--cache",
                cache.to_str().unwrap(),
            ]
            .map(std::ffi::OsStr::new),
            None,
            &reg,
        )
    };
    // Before the build: refused naming the service and the fix.
    let (code, _, stderr) = check();
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("has no image yet")
            && stderr.contains("its sidecar services built from `build:` (kv)")
            && stderr.contains("fix: run `akbench image build"),
        "{stderr}"
    );
    let build = |json: bool| {
        let mut args = vec![
            "image",
            "build",
            dir.to_str().unwrap(),
            "--push",
            &reg.addr,
            "--builder",
            "docker",
            "--name",
            "akbench/kvtask",
            "--tag",
            "1",
        ];
        if json {
            args.push("--json");
        }
        let args: Vec<&std::ffi::OsStr> = args.iter().map(std::ffi::OsStr::new).collect();
        run(&args, Some(&path), &reg)
    };
    let (code, built, stderr) = build(true);
    assert_eq!(code, 0, "{built} {stderr}");
    let env = dir.join("environment");
    let main_ref = format!("{}/akbench/kvtask:1", reg.addr);
    let kv_ref = format!("{}/akbench/kvtask-kv:1", reg.addr);
    assert_eq!(
        std::fs::read_to_string(&log).unwrap(),
        format!(
            "build -t {main_ref} -f {e}/Dockerfile {e}\npush {main_ref}\nbuild -t {kv_ref} -f {e}/kv/Dockerfile {e}/kv\npush {kv_ref}\n",
            e = env.display()
        )
    );
    let kv_pin = format!("{kv_ref}@{kv_digest}");
    assert_eq!(
        built["image"],
        format!("{main_ref}@{main_digest}").as_str(),
        "{built}"
    );
    assert_eq!(
        built["services"],
        serde_json::json!([{"service": "kv", "image": kv_pin, "digest": kv_digest}]),
        "{built}"
    );
    let toml = std::fs::read_to_string(dir.join("task.toml")).unwrap();
    assert!(
        toml.contains(&format!("docker_image = \"{main_ref}@{main_digest}\""))
            && toml.ends_with(&format!(
                "\n[environment.service_images]\nkv = \"{kv_pin}\"\n"
            )),
        "{toml}"
    );
    // The compose file is left as Harbor reads it.
    assert_eq!(
        std::fs::read_to_string(env.join("docker-compose.yaml")).unwrap(),
        compose
    );
    // The task is valid with the service running over its pin.
    let (code, v, stderr) = check();
    assert_eq!(code, 0, "{v} {stderr}");
    assert_eq!(v["valid"], true, "{v}");
    assert_eq!(v["services"][0]["name"], "kv", "{v}");
    assert_eq!(
        v["services"][0]["image"],
        format!("{}/akbench/kvtask-kv@{kv_digest}", reg.addr).as_str(),
        "{v}"
    );
    // A task whose own image is prebuilt (no environment/Dockerfile) builds its services
    // only, replacing their pins in place.
    std::fs::remove_file(env.join("Dockerfile")).unwrap();
    std::fs::remove_file(&log).unwrap();
    let (code, _, stderr) = build(false);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        std::fs::read_to_string(&log).unwrap(),
        format!(
            "build -t {kv_ref} -f {e}/kv/Dockerfile {e}/kv\npush {kv_ref}\n",
            e = env.display()
        )
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("task.toml")).unwrap(),
        toml
    );
}
