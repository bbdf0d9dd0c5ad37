//! `akbench image build` refusals through the real binary, before any builder runs: each
//! exits 2 naming the fix and leaves task.toml as it was. (Building and pushing with docker
//! is `container.rs`, which needs a registry and a docker daemon.)

mod common;

use common::examples;

use std::process::Command;

#[test]
fn bad_inputs_are_refused_before_anything_is_built() {
    let tmp = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(examples().join("repos"), tmp.path().join("repos")).unwrap();
    let tasks = tmp.path().join("tasks");
    std::fs::create_dir_all(&tasks).unwrap();
    for t in ["pyslug-001", "harbor-pyslug-002"] {
        assert!(Command::new("cp")
            .arg("-a")
            .arg(examples().join("tasks").join(t))
            .arg(tasks.join(t))
            .status()
            .unwrap()
            .success());
    }
    // An empty PATH: no builder would be found, and none may run for a refused input.
    let empty = tmp.path().join("empty-path");
    std::fs::create_dir_all(&empty).unwrap();
    let run = |task: &str, args: &[&str]| {
        let dir = tasks.join(task);
        let before = std::fs::read(dir.join("task.toml")).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_akbench"))
            .args(["image", "build"])
            .arg(&dir)
            .args(args)
            .env("PATH", &empty)
            .output()
            .unwrap();
        assert_eq!(
            std::fs::read(dir.join("task.toml")).unwrap(),
            before,
            "{task} {args:?}: task.toml unchanged"
        );
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let harbor = "harbor-pyslug-002";
    for (task, args, needle) in [
        (
            "pyslug-001",
            &["--push", "127.0.0.1:5000"][..],
            "environment/Dockerfile is missing",
        ),
        (
            harbor,
            &["--push", "http://127.0.0.1:5000"][..],
            "not a registry",
        ),
        (
            harbor,
            &["--push", "reg.example/path"][..],
            "not a registry",
        ),
        (
            harbor,
            &["--push", "127.0.0.1:5000", "--tag", "Not A Tag"][..],
            "not an image reference",
        ),
        (
            harbor,
            &["--push", "127.0.0.1:5000", "--name", "UPPER/case"][..],
            "not an image reference",
        ),
        (
            harbor,
            &["--push", "127.0.0.1:5000"][..],
            "none of docker, podman or buildah is on PATH",
        ),
    ] {
        let (code, stderr) = run(task, args);
        assert_eq!(code, Some(2), "{task} {args:?}: {stderr}");
        assert!(
            stderr.contains(needle) && stderr.contains("fix:"),
            "{task} {args:?}: {stderr}"
        );
    }
    // A Dockerfile-only task written for Harbor (no [source], no image yet) loads: the build
    // gets as far as the builder, and says the field it will write (Harbor's key).
    let dockerfile_only = "tb-dockerfile-only";
    assert!(Command::new("cp")
        .arg("-a")
        .arg(examples().join("tasks/tb-wordfreq-001"))
        .arg(tasks.join(dockerfile_only))
        .status()
        .unwrap()
        .success());
    let toml = tasks.join(dockerfile_only).join("task.toml");
    let text = std::fs::read_to_string(&toml).unwrap();
    let text: String = text
        .lines()
        .filter(|l| !l.starts_with("docker_image") && !l.starts_with("version"))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&toml, format!("schema_version = \"1.1\"\n{text}")).unwrap();
    let (code, stderr) = run(dockerfile_only, &["--push", "127.0.0.1:5000"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("none of docker, podman or buildah is on PATH")
            && stderr.contains("will be written to `environment.docker_image`"),
        "{stderr}"
    );
    let (code, stderr) = run(
        dockerfile_only,
        &["--push", "127.0.0.1:5000", "--builder", "podman"],
    );
    assert_eq!(code, Some(3), "{stderr}");
    assert!(
        stderr.contains("failed to start `podman build -t 127.0.0.1:5000/akbench/tb-dockerfile-only:unversioned"),
        "{stderr}"
    );
    // A builder named but absent: the build fails (exit 3), nothing written.
    let (code, stderr) = run(harbor, &["--push", "127.0.0.1:5000", "--builder", "podman"]);
    assert_eq!(code, Some(3), "{stderr}");
    assert!(stderr.contains("failed to start `podman build"), "{stderr}");
}
