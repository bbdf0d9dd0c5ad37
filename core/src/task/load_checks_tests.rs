//! Each value that used to load and then fail every trial is refused at load, naming the
//! file, the field and the fix; the good values next to them still load.

use super::super::{Task, TaskError, TaskErrorKind};
use crate::testkit::write_task;
use std::path::Path;

/// Rewrites the fixture task's task.toml: `edit` gets the text and returns the new one.
fn task_with(root: &Path, edit: impl Fn(String) -> String) -> Result<Task, TaskError> {
    write_task(root, "t", "1.0");
    let toml = root.join("t/task.toml");
    let text = std::fs::read_to_string(&toml).unwrap();
    std::fs::write(&toml, edit(text)).unwrap();
    Task::load(&root.join("t"), root)
}

fn field_and_text(e: &TaskError) -> (String, String) {
    match &e.kind {
        TaskErrorKind::Field { field, .. } => (field.clone(), e.to_string()),
        other => (format!("{other:?}"), e.to_string()),
    }
}

/// An edit of task.toml's text.
type Edit = Box<dyn Fn(String) -> String>;

#[test]
fn values_that_failed_every_trial_are_refused_at_load() {
    let verifier = |extra: &'static str| move |t: String| format!("{t}[verifier]\n{extra}");
    let cases: Vec<(&str, Edit, &str, &str)> = vec![
        (
            "a version with a newline",
            Box::new(|t| t.replace("version = \"1.0\"", "version = \"1.0\\nx\"")),
            "version",
            "control character",
        ),
        (
            "a 300-byte version",
            Box::new(|t| t.replace("\"1.0\"", &format!("\"{}\"", "v".repeat(300)))),
            "version",
            "300 bytes is outside 1 to 128 bytes",
        ),
        (
            "protected path ../x",
            Box::new(verifier("protected_paths = [\"../x\"]\n")),
            "verifier.protected_paths",
            "`..`",
        ),
        (
            "protected path /etc/passwd",
            Box::new(verifier("protected_paths = [\"/etc/passwd\"]\n")),
            "verifier.protected_paths",
            "absolute",
        ),
        (
            "protected path a/../../b",
            Box::new(verifier("protected_paths = [\"a/../../b\"]\n")),
            "verifier.protected_paths",
            "`..`",
        ),
        (
            "tripwire file outside tests/",
            Box::new(verifier("[verifier.tripwire]\nfile = \"../task.toml\"\n")),
            "verifier.tripwire.file",
            "not inside tests/",
        ),
        (
            "tripwire file absolute",
            Box::new(verifier("[verifier.tripwire]\nfile = \"/etc/passwd\"\n")),
            "verifier.tripwire.file",
            "not inside tests/",
        ),
        (
            "tripwire file missing",
            Box::new(verifier("[verifier.tripwire]\nfile = \"test_nope.py\"\n")),
            "verifier.tripwire.file",
            "not in tests/",
        ),
        (
            "tripwire file a folder",
            Box::new(verifier("[verifier.tripwire]\nfile = \".\"\n")),
            "verifier.tripwire.file",
            "not a regular file",
        ),
        (
            "source.repo missing",
            Box::new(|t| t.replace("repos/x.bundle", "repos/nope.git")),
            "source.repo",
            "cannot be read",
        ),
        (
            "source.repo /etc",
            Box::new(|t| t.replace("repos/x.bundle", "/etc")),
            "source.repo",
            "not a git repository",
        ),
        (
            "source.repo a file that is no bundle",
            Box::new(|t| t.replace("repos/x.bundle", "t/task.toml")),
            "source.repo",
            "not a git bundle",
        ),
        (
            "source.repo file:// to a missing folder",
            Box::new(|t| t.replace("repos/x.bundle", "file:///no/such/repo.git")),
            "source.repo",
            "cannot be read",
        ),
        (
            "workdir with a 300-byte folder name",
            Box::new(|t| {
                format!(
                    "{t}[environment]\nimage = \"img:1\"\nworkdir = \"/app/{}\"\n",
                    "d".repeat(300)
                )
            }),
            "environment.workdir",
            "300 bytes is outside 1 to 255 bytes",
        ),
        (
            "workdir with a NUL",
            Box::new(|t| {
                format!("{t}[environment]\nimage = \"img:1\"\nworkdir = \"/a\\u0000b\"\n")
            }),
            "environment.workdir",
            "0x00",
        ),
        (
            "build time limit of a millisecond",
            Box::new(|t| format!("{t}[environment]\nbuild_timeout_sec = 0.001\n")),
            "environment.build_timeout_sec",
            "0.001 seconds is outside 1 to 604800 seconds",
        ),
    ];
    let mut failures = Vec::new();
    for (name, edit, field, words) in cases {
        let tmp = tempfile::tempdir().unwrap();
        match task_with(tmp.path(), edit) {
            Ok(_) => failures.push(format!("{name}: loaded")),
            Err(e) => {
                let (f, text) = field_and_text(&e);
                if f != field || !text.contains(words) || !text.contains("fix:") {
                    failures.push(format!("{name}: {f}: {text}"));
                }
                if !text.contains("task.toml") || text.len() > 1000 {
                    failures.push(format!("{name}: names no file or too long: {text}"));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_good_values_beside_them_still_load() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(tmp.path().join("t/tests")).unwrap();
    std::fs::write(
        tmp.path().join("t/tests/test_hidden.py"),
        "def test_x():\n    assert 1 == 1\n",
    )
    .unwrap();
    let t = task_with(tmp.path(), |t| {
        format!(
            "{t}[verifier]\nprotected_paths = [\"tests/akbench_hidden.rs\", \"conftest.py\", \"dir/\", \"*.pth\"]\n\
             [verifier.tripwire]\nfile = \"test_hidden.py\"\n\
             [environment]\nimage = \"img:1\"\nworkdir = \"/app/{}\"\nbuild_timeout_sec = 1\n",
            "d".repeat(255)
        )
    });
    assert!(t.is_ok(), "{t:?}");
    // A work tree and a bare repository are repositories.
    for (layout, repo) in [("work tree", "repos/w"), ("bare", "repos/b.git")] {
        let tmp = tempfile::tempdir().unwrap();
        let git = match layout {
            "work tree" => tmp.path().join(repo).join(".git"),
            _ => tmp.path().join(repo),
        };
        std::fs::create_dir_all(git.join("objects")).unwrap();
        std::fs::write(git.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        let t = task_with(tmp.path(), |t| t.replace("repos/x.bundle", repo));
        assert!(t.is_ok(), "{layout}: {t:?}");
    }
    // A remote URL is not contacted at load.
    let tmp = tempfile::tempdir().unwrap();
    let t = task_with(tmp.path(), |t| {
        t.replace("repos/x.bundle", "https://example.invalid/r.git")
    });
    assert!(t.is_ok(), "{t:?}");
}

const HEX_A: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";

/// The fixture task with `environment/<name>` holding `compose`, task.toml edited by `edit`.
fn with_compose(
    root: &Path,
    name: &str,
    compose: &str,
    edit: impl Fn(String) -> String,
) -> Result<Task, TaskError> {
    write_task(root, "t", "1.0");
    std::fs::create_dir_all(root.join("t/environment")).unwrap();
    std::fs::write(root.join("t/environment").join(name), compose).unwrap();
    task_with(root, edit)
}

fn db(hex: &str) -> String {
    format!(
        "services:\n  main:\n    depends_on: [db]\n  db:\n    image: reg.example/db@sha256:{hex}\n"
    )
}

#[test]
fn a_compose_file_loads_as_an_interactive_world_under_container_and_shared_grading() {
    let tmp = tempfile::tempdir().unwrap();
    let shared = |t: String| format!("{t}[verifier]\nenvironment_mode = \"shared\"\n");
    let name = "docker-compose.yaml";
    let root = tmp.path().join(name);
    let t = with_compose(&root, name, &db(HEX_A), shared).unwrap();
    assert_eq!(t.family, crate::task::Family::Interactive);
    let w = t.world.as_ref().unwrap();
    assert_eq!(w.services[0].name, "db");
    assert_eq!(w.main_depends_on[0].service, "db");
    t.check_runtime(true).unwrap();
    let e = t.check_runtime(false).unwrap_err();
    assert!(
        e.contains("sidecar services (db;") && e.contains("runtime: container"),
        "{e}"
    );
    // The fixture has a [source]: graded in a fresh sandbox unless it says `shared`.
    let t = with_compose(
        &tmp.path().join("sep"),
        "docker-compose.yaml",
        &db(HEX_A),
        |t| t,
    )
    .unwrap();
    let e = t.check_runtime(true).unwrap_err();
    assert!(e.contains("environment_mode = \"shared\""), "{e}");
    // `family = "interactive"` names services it must have.
    let t = task_with(&tmp.path().join("fam"), |t| {
        format!("family = \"interactive\"\n{t}")
    })
    .unwrap();
    let e = t.check_runtime(true).unwrap_err();
    assert!(e.contains("declares no sidecar services"), "{e}");
}

#[test]
fn a_compose_file_the_task_cannot_run_is_refused_naming_it() {
    let tmp = tempfile::tempdir().unwrap();
    let bad = format!(
        "services:\n  db:\n    image: reg.example/db@sha256:{HEX_A}\n    volumes: [\"./d:/d\"]\n"
    );
    let e = with_compose(&tmp.path().join("a"), "docker-compose.yaml", &bad, |t| t).unwrap_err();
    assert!(e.file.ends_with("environment/docker-compose.yaml"), "{e}");
    let shown = e.to_string();
    assert!(
        shown.contains("service `db`: `volumes` cannot take effect") && shown.contains("fix: "),
        "{shown}"
    );
    // A long refusal keeps its whole fix (it was cut mid-fix, as a parse error's text is).
    let far = "services:\n  kv:\n    build: ../../../../somewhere/far/away/from/the/task/kv\n";
    let e = with_compose(&tmp.path().join("far"), "docker-compose.yaml", far, |t| t).unwrap_err();
    let shown = e.to_string();
    assert!(
        shown.ends_with("relative to it: `./SERVICE`") && shown.len() > 200,
        "{shown}"
    );
    // `.yml` (which Harbor 0.25 does not read), alone or beside `.yaml`: refused.
    let e = with_compose(
        &tmp.path().join("yml"),
        "docker-compose.yml",
        &db(HEX_A),
        |t| t,
    )
    .unwrap_err();
    assert!(e.file.ends_with("environment/docker-compose.yml"), "{e}");
    assert!(
        e.to_string().contains("rename it to docker-compose.yaml"),
        "{e}"
    );
    let root = tmp.path().join("b");
    write_task(&root, "t", "1.0");
    std::fs::create_dir_all(root.join("t/environment")).unwrap();
    std::fs::write(root.join("t/environment/docker-compose.yml"), db(HEX_A)).unwrap();
    let e = with_compose(&root, "docker-compose.yaml", &db(HEX_A), |t| t).unwrap_err();
    assert!(e.to_string().contains("does not read"), "{e}");
    // Another family: refused naming both (steps and services together are a lifecycle:
    // task::steps::tests).
    let fam = |t: String| format!("family = \"artefact\"\n{t}");
    let e = with_compose(
        &tmp.path().join("d"),
        "docker-compose.yaml",
        &db(HEX_A),
        fam,
    )
    .unwrap_err();
    let (field, shown) = field_and_text(&e);
    assert_eq!(field, "family", "{shown}");
    assert!(shown.contains("`interactive`"), "{shown}");
}

#[test]
fn a_service_digest_is_part_of_the_release_digest() {
    let tmp = tempfile::tempdir().unwrap();
    let a = with_compose(
        &tmp.path().join("a"),
        "docker-compose.yaml",
        &db(HEX_A),
        |t| t,
    )
    .unwrap();
    let again = with_compose(
        &tmp.path().join("b"),
        "docker-compose.yaml",
        &db(HEX_A),
        |t| t,
    )
    .unwrap();
    let other = with_compose(
        &tmp.path().join("c"),
        "docker-compose.yaml",
        &db(&"b".repeat(64)),
        |t| t,
    )
    .unwrap();
    assert_eq!(a.release.digest, again.release.digest);
    assert_ne!(a.release.digest, other.release.digest);
}

/// A world whose `kv` is built from `environment/kv` (a folder with a Dockerfile), with
/// task.toml edited by `edit` (graded in the shared environment).
fn built_kv(
    root: &Path,
    compose: &str,
    edit: impl Fn(String) -> String,
) -> Result<Task, TaskError> {
    write_task(root, "t", "1.0");
    let env = root.join("t/environment");
    std::fs::create_dir_all(env.join("kv")).unwrap();
    std::fs::write(env.join("kv/Dockerfile"), "FROM scratch\n").unwrap();
    std::fs::write(env.join("docker-compose.yaml"), compose).unwrap();
    task_with(root, |t| {
        edit(format!("{t}[verifier]\nenvironment_mode = \"shared\"\n"))
    })
}

const KV: &str = "services:\n  main:\n    depends_on: [kv]\n  kv:\n    build: ./kv\n";

fn pinned(t: String, image: &str) -> String {
    format!("{t}[environment.service_images]\nkv = \"{image}\"\n")
}

#[test]
fn a_built_service_runs_once_its_pin_is_in_task_toml_and_is_refused_until_then() {
    let tmp = tempfile::tempdir().unwrap();
    let t = built_kv(&tmp.path().join("a"), KV, |t| t).unwrap();
    assert_eq!(t.family, crate::task::Family::Interactive);
    assert_eq!(t.world.as_ref().unwrap().unbuilt(), ["kv"]);
    let e = t.check_runtime(true).unwrap_err();
    assert!(
        e.contains("no image yet (kv)")
            && e.contains("fix: run `akbench image build")
            && e.contains("[environment.service_images]"),
        "{e}"
    );
    let image = format!("127.0.0.1:5000/akbench/t-kv:1.0@sha256:{HEX_A}");
    let p = built_kv(&tmp.path().join("b"), KV, |t| pinned(t, &image)).unwrap();
    assert!(p.world.as_ref().unwrap().unbuilt().is_empty());
    assert_eq!(
        p.world.as_ref().unwrap().services[0]
            .image
            .as_ref()
            .map(|i| i.to_string()),
        Some(image.clone())
    );
    p.check_runtime(true).unwrap();
    // The pin is part of the release: another pin, another digest.
    let other = image.replace(HEX_A, &"b".repeat(64));
    let q = built_kv(&tmp.path().join("c"), KV, |t| pinned(t, &other)).unwrap();
    assert_ne!(p.release.digest, q.release.digest);
    // A pin the task cannot use is refused naming the field.
    let db = "services:\n  kv:\n    build: ./kv\n  db:\n    image: reg.example/db@sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n";
    for (i, (compose, edit, field, needle)) in [
        (
            db,
            format!("[environment.service_images]\ndb = \"{image}\"\n"),
            "environment.service_images.db",
            "akbench does not build it",
        ),
        (
            KV,
            "[environment.service_images]\nweb = \"x\"\n".to_string(),
            "environment.service_images.web",
            "not an image pinned by digest",
        ),
        (
            KV,
            format!("[environment.service_images]\nweb = \"{image}\"\n"),
            "environment.service_images.web",
            "defines no such sidecar",
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let e = built_kv(&tmp.path().join(format!("bad{i}")), compose, |t| {
            format!("{t}{edit}")
        })
        .unwrap_err();
        let (f, shown) = field_and_text(&e);
        assert_eq!(f, field, "{shown}");
        assert!(shown.contains(needle) && shown.contains("fix"), "{shown}");
    }
    // A pin without a compose file.
    let e = task_with(&tmp.path().join("none"), |t| pinned(t, &image)).unwrap_err();
    let (f, shown) = field_and_text(&e);
    assert_eq!(f, "environment.service_images.kv", "{shown}");
    assert!(
        shown.contains("no environment/docker-compose.yaml"),
        "{shown}"
    );
}

#[test]
fn a_build_context_or_dockerfile_missing_or_leaving_environment_is_refused_at_load() {
    let tmp = tempfile::tempdir().unwrap();
    for (i, (compose, setup, needle)) in [
        (
            "services:\n  kv:\n    build: ./store\n",
            None,
            "`build.context` names environment/store, which is not a folder",
        ),
        (
            "services:\n  kv:\n    build: {context: ./kv, dockerfile: Other}\n",
            None,
            "`build.dockerfile` names environment/kv/Other, which is not a file",
        ),
        (
            "services:\n  kv:\n    build: ./out\n",
            Some("out"),
            "`build.context` names environment/out, which is not a folder inside environment/",
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let root = tmp.path().join(format!("r{i}"));
        if let Some(link) = setup {
            // A link from environment/ to a folder of the task outside it (with a
            // Dockerfile); a link leaving the task is refused by the loader already.
            let outside = root.join("t/elsewhere");
            std::fs::create_dir_all(&outside).unwrap();
            std::fs::write(outside.join("Dockerfile"), "FROM scratch\n").unwrap();
            std::fs::create_dir_all(root.join("t/environment")).unwrap();
            std::os::unix::fs::symlink("../elsewhere", root.join("t/environment").join(link))
                .unwrap();
        }
        let e = built_kv(&root, compose, |t| t).unwrap_err();
        assert!(e.file.ends_with("environment/docker-compose.yaml"), "{e}");
        let shown = e.to_string();
        assert!(
            shown.contains("service `kv`") && shown.contains(needle) && shown.contains("fix: "),
            "{shown}"
        );
    }
}
