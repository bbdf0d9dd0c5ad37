use super::*;
use std::fs;

const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";

fn write_task(root: &Path, name: &str, toml: &str) -> PathBuf {
    let dir = root.join(name);
    fs::create_dir_all(dir.join("tests")).unwrap();
    fs::write(dir.join("task.toml"), toml).unwrap();
    fs::write(dir.join("instruction.md"), "Fix the bug.\n").unwrap();
    fs::write(dir.join("tests/test.sh"), "exit 0\n").unwrap();
    crate::testkit::write_bundle_header(root);
    dir
}

fn good_toml() -> String {
    format!("version = \"1.0\"\n[source]\nrepo = \"repos/x.bundle\"\ncommit = \"{COMMIT}\"\n")
}

#[test]
fn loads_a_minimal_harbor_style_task() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = write_task(tmp.path(), "t1", &good_toml());
    let t = Task::load(&dir, tmp.path()).unwrap();
    assert_eq!(t.release.id, "t1");
    assert_eq!(t.release.version, "1.0");
    assert!(t.release.digest.starts_with("sha256:"));
    assert_eq!(t.family, Family::Artefact);
    assert_eq!(
        t.repo,
        Some(RepoLocation::Path(tmp.path().join("repos/x.bundle")))
    );
    assert_eq!(t.agent_timeout_sec, DEFAULT_AGENT_TIMEOUT_SEC);
    assert!(t.reference.is_none());
}

#[test]
fn harbor_sections_are_accepted() {
    let tmp = tempfile::tempdir().unwrap();
    let toml = format!(
        "version = \"1.0\"\n[metadata]\nauthor_name = \"x\"\ndifficulty = \"easy\"\ntags = [\"a\"]\n\
         [verifier]\ntimeout_sec = 120.0\n[agent]\ntimeout_sec = 600.0\n\
         [environment]\nbuild_timeout_sec = 600.0\ndocker_image = \"img\"\n\
         [source]\nrepo = \"https://example.invalid/r.git\"\ncommit = \"{COMMIT}\"\n"
    );
    let dir = write_task(tmp.path(), "harbor", &toml);
    let t = Task::load(&dir, tmp.path()).unwrap();
    assert_eq!(t.verifier_timeout_sec, 120.0);
    assert!(matches!(t.repo, Some(RepoLocation::Url(_))));
}

fn field_of(e: TaskError) -> String {
    match e.kind {
        TaskErrorKind::Field { field, .. } => field,
        other => panic!("expected a field error, got {other:?}"),
    }
}

#[test]
fn branch_names_and_short_hashes_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    for bad in ["main", "0123456", "HEAD", "v1.0"] {
        let toml = format!("version = \"1\"\n[source]\nrepo = \"r\"\ncommit = \"{bad}\"\n");
        let dir = write_task(tmp.path(), "t", &toml);
        let e = Task::load(&dir, tmp.path()).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("source.commit") && msg.contains("fix:"),
            "{msg}"
        );
        assert_eq!(field_of(e), "source.commit");
    }
}

#[test]
fn disallowed_transports_are_refused() {
    let root = Path::new("/tasks");
    for bad in [
        "http://x/r.git",
        "git://x/r.git",
        "ext::sh -c evil",
        "-uhack",
        "",
    ] {
        assert!(parse_repo(bad, root).is_err(), "{bad}");
    }
    for good in [
        "https://x/r.git",
        "ssh://git@x/r.git",
        "git@github.com:o/r.git",
        "file:///srv/r.git",
    ] {
        assert!(
            matches!(parse_repo(good, root), Ok(RepoLocation::Url(_))),
            "{good}"
        );
    }
    assert_eq!(
        parse_repo("repos/a.bundle", root).unwrap(),
        RepoLocation::Path(PathBuf::from("/tasks/repos/a.bundle"))
    );
}

#[test]
fn malformed_tasks_name_the_file_and_the_problem() {
    let tmp = tempfile::tempdir().unwrap();
    // unknown top-level key
    let dir = write_task(tmp.path(), "a", &format!("{}bogus = 1\n", good_toml()));
    let msg = Task::load(&dir, tmp.path()).unwrap_err().to_string();
    assert!(msg.contains("task.toml") && msg.contains("bogus"), "{msg}");
    // missing source
    let dir = write_task(tmp.path(), "b", "version = \"1\"\n");
    assert_eq!(
        field_of(Task::load(&dir, tmp.path()).unwrap_err()),
        "source"
    );
    // bad timeout
    let dir = write_task(
        tmp.path(),
        "c",
        &format!("{}[agent]\ntimeout_sec = -1\n", good_toml()),
    );
    assert_eq!(
        field_of(Task::load(&dir, tmp.path()).unwrap_err()),
        "agent.timeout_sec"
    );
    // mutation escaping the task dir
    let dir = write_task(
        tmp.path(),
        "d",
        &format!("{}[mutation]\npatch = \"../x.patch\"\n", good_toml()),
    );
    assert_eq!(
        field_of(Task::load(&dir, tmp.path()).unwrap_err()),
        "mutation.patch"
    );
    // no instruction
    let dir = write_task(tmp.path(), "e", &good_toml());
    fs::remove_file(dir.join("instruction.md")).unwrap();
    let msg = Task::load(&dir, tmp.path()).unwrap_err().to_string();
    assert!(msg.contains("instruction.md"), "{msg}");
    // no task.toml at all
    let msg = Task::load(&tmp.path().join("nope"), tmp.path())
        .unwrap_err()
        .to_string();
    assert!(msg.contains("task.toml"), "{msg}");
}

#[test]
fn load_by_id_checks_names_and_ids() {
    let tmp = tempfile::tempdir().unwrap();
    write_task(
        tmp.path(),
        "t1",
        &format!("id = \"other\"\n{}", good_toml()),
    );
    assert_eq!(field_of(load_by_id(tmp.path(), "t1").unwrap_err()), "id");
    assert!(load_by_id(tmp.path(), "../t1").is_err());
    assert!(load_by_id(tmp.path(), "missing").is_err());
}

#[test]
fn digest_changes_with_content_and_mode_but_not_with_git_dirs() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = write_task(tmp.path(), "t", &good_toml());
    let d0 = dir_digest(&dir).unwrap();
    fs::create_dir_all(dir.join(".git")).unwrap();
    fs::write(dir.join(".git/x"), "y").unwrap();
    assert_eq!(dir_digest(&dir).unwrap(), d0);
    fs::write(dir.join("tests/test.sh"), "exit 1\n").unwrap();
    let d1 = dir_digest(&dir).unwrap();
    assert_ne!(d0, d1);
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(dir.join("tests/test.sh"), fs::Permissions::from_mode(0o755)).unwrap();
    assert_ne!(dir_digest(&dir).unwrap(), d1);
}

#[test]
fn a_symlink_leaving_the_task_directory_is_refused_naming_it() {
    let tmp = tempfile::tempdir().unwrap();
    let outside = tmp.path().join("secret-tests.sh");
    fs::write(&outside, "exit 0\n").unwrap();
    for (link, target) in [
        ("tests/helper.sh", outside.display().to_string()),
        ("tests/up.sh", "../../secret-tests.sh".to_string()),
        ("task.toml.orig", "/etc/hostname".to_string()),
    ] {
        let dir = write_task(tmp.path(), "t", &good_toml());
        std::os::unix::fs::symlink(&target, dir.join(link)).unwrap();
        let e = Task::load(&dir, tmp.path()).unwrap_err();
        assert_eq!(e.file, dir.join(link), "{e}");
        let msg = e.to_string();
        assert!(
            msg.contains("outside the task directory") && msg.contains(&target),
            "{msg}"
        );
        fs::remove_dir_all(&dir).unwrap();
    }
    // A link that stays inside is a normal part of the release.
    let dir = write_task(tmp.path(), "t", &good_toml());
    std::os::unix::fs::symlink("../instruction.md", dir.join("tests/copy.md")).unwrap();
    Task::load(&dir, tmp.path()).unwrap();
}

#[test]
fn the_digest_covers_what_every_file_contains() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = write_task(tmp.path(), "t", &good_toml());
    fs::create_dir_all(dir.join("solution")).unwrap();
    fs::write(dir.join("solution/solve.sh"), "echo 42 > v\n").unwrap();
    let load = || Task::load(&dir, tmp.path()).unwrap();
    let first = load();
    assert_eq!(load().release.digest, first.release.digest, "stable");
    // Same sizes, same names, one byte different: every kind of file changes the digest.
    for (file, changed) in [
        ("tests/test.sh", "exit 1\n"),
        ("solution/solve.sh", "echo 43 > v\n"),
        ("instruction.md", "Fix the bog.\n"),
    ] {
        let before = fs::read(dir.join(file)).unwrap();
        assert_eq!(before.len(), changed.len());
        fs::write(dir.join(file), changed).unwrap();
        let t = load();
        assert_ne!(t.release.digest, first.release.digest, "{file}");
        if file.starts_with("tests/") {
            assert_ne!(t.tests_digest, first.tests_digest);
        }
        fs::write(dir.join(file), before).unwrap();
        assert_eq!(load().release.digest, first.release.digest);
    }
}

fn mknod(p: &Path, mode: libc::mode_t, dev: libc::dev_t) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(p.as_os_str().as_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    unsafe { libc::mknod(c.as_ptr(), mode, dev) == 0 }
}

#[test]
fn files_in_a_task_are_regular_and_bounded_or_refused_by_name() {
    let tmp = tempfile::tempdir().unwrap();
    // (where, how to make it, words the message must have)
    type Make = fn(&Path);
    let cases: [(&str, Make, &str); 7] = [
        (
            "tests/fifo",
            |p| assert!(mknod(p, libc::S_IFIFO | 0o600, 0)),
            "FIFO",
        ),
        (
            "instruction.md",
            |p| {
                fs::remove_file(p).unwrap();
                assert!(mknod(p, libc::S_IFIFO | 0o600, 0));
            },
            "FIFO",
        ),
        (
            "task.toml",
            |p| {
                fs::remove_file(p).unwrap();
                assert!(mknod(p, libc::S_IFIFO | 0o600, 0));
            },
            "FIFO",
        ),
        // /dev/zero's numbers (1, 5); needs root (the test machines run as root), else a
        // FIFO stands in.
        (
            "solution/zero",
            |p| {
                fs::create_dir_all(p.parent().unwrap()).unwrap();
                if !mknod(p, libc::S_IFCHR | 0o600, libc::makedev(1, 5)) {
                    assert!(mknod(p, libc::S_IFIFO | 0o600, 0));
                }
            },
            "not a regular file",
        ),
        (
            "tests/huge.bin",
            |p| {
                fs::File::create(p).unwrap().set_len(20 << 30).unwrap();
            },
            "21474836480 bytes, more than the maximum 67108864",
        ),
        (
            "instruction.md",
            |p| {
                fs::File::options()
                    .write(true)
                    .open(p)
                    .unwrap()
                    .set_len(MAX_TASK_FILE_BYTES + 1)
                    .unwrap();
            },
            "more than the maximum",
        ),
        (
            "task.toml",
            |p| {
                fs::File::options()
                    .append(true)
                    .open(p)
                    .unwrap()
                    .set_len(MAX_TASK_TOML_BYTES + 1)
                    .unwrap();
            },
            "more than the maximum",
        ),
    ];
    for (i, (rel, make, words)) in cases.into_iter().enumerate() {
        let dir = write_task(tmp.path(), &format!("t{i}"), &good_toml());
        make(&dir.join(rel));
        let e = Task::load(&dir, tmp.path()).unwrap_err().to_string();
        let name = Path::new(rel)
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        assert!(e.contains(words) && e.contains(&name), "{rel}: {e}");
    }
}

#[test]
fn verifier_fields_and_commit_lengths_are_checked_at_load() {
    let tmp = tempfile::tempdir().unwrap();
    let bundle = tmp.path().join("repos/x.bundle");
    fs::create_dir_all(bundle.parent().unwrap()).unwrap();
    fs::write(&bundle, format!("# v2 git bundle\n{COMMIT} HEAD\n\n")).unwrap();
    let sha256 = "a".repeat(64);
    let cases = [
        (
            format!(
                "{}[verifier]\ncommand = [\"bash\", \"{{test_dir}}/t.sh\"]\n",
                good_toml()
            ),
            "verifier.command",
            "{test_dir}",
        ),
        (
            format!("{}[verifier]\nenv = {{ \"\" = \"x\" }}\n", good_toml()),
            "verifier.env",
            "``",
        ),
        (
            format!("{}[verifier]\nenv = {{ \"A=B\" = \"x\" }}\n", good_toml()),
            "verifier.env",
            "`A=B`",
        ),
        (
            good_toml().replace(COMMIT, &sha256),
            "source.commit",
            "sha1",
        ),
        (
            format!("{}[agent]\ntimeout_sec = 1e-300\n", good_toml()),
            "agent.timeout_sec",
            "1e-300 seconds",
        ),
    ];
    for (i, (toml, field, words)) in cases.iter().enumerate() {
        let dir = write_task(tmp.path(), &format!("v{i}"), toml);
        let e = Task::load(&dir, tmp.path()).unwrap_err();
        let s = e.to_string();
        assert_eq!(field_of(e), *field, "{s}");
        assert!(s.contains(words) && s.len() < 600, "{s}");
    }
    // The same commit against a remote URL (hash unknown at load) and the good forms load.
    let ok = [
        good_toml().replace("repos/x.bundle", "https://example.com/x.git").replace(COMMIT, &sha256),
        format!("{}[verifier]\ncommand = [\"sh\", \"{{tests_dir}}/t.sh\", \"{{workspace}}\", \"{{verifier_dir}}\"]\nenv = {{ PYTHONHASHSEED = \"0\" }}\n", good_toml()),
    ];
    for (i, toml) in ok.iter().enumerate() {
        let dir = write_task(tmp.path(), &format!("ok{i}"), toml);
        Task::load(&dir, tmp.path()).unwrap();
    }
}

#[test]
fn environment_image_is_parsed_and_bad_values_are_refused_naming_the_field() {
    let tmp = tempfile::tempdir().unwrap();
    let d = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    let with = |env: &str| format!("{}[environment]\n{env}\n", good_toml());
    let dir = write_task(
        tmp.path(),
        "img",
        &with("image = \"127.0.0.1:5000/akbench/base:v1\"\nworkdir = \"/app/\""),
    );
    let mut t = Task::load(&dir, tmp.path()).unwrap();
    let image = t.image.clone().unwrap();
    assert_eq!(
        (
            image.registry.as_str(),
            image.repository.as_str(),
            image.tag.as_deref(),
            image.digest.as_deref()
        ),
        ("127.0.0.1:5000", "akbench/base", Some("v1"), None)
    );
    assert_eq!(t.image_workdir.as_deref(), Some("/app"));
    t.pin_image(d).unwrap();
    assert_eq!(t.image.as_ref().unwrap().digest.as_deref(), Some(d));
    assert!(t
        .pin_image(&d.replace('0', "1"))
        .unwrap_err()
        .contains("pins"));
    assert!(t
        .pin_image("sha256:x")
        .unwrap_err()
        .contains("not a sha256 digest"));
    let plain = Task::load(&write_task(tmp.path(), "plain", &good_toml()), tmp.path()).unwrap();
    assert!(plain.image.is_none() && plain.image_workdir.is_none());
    let pinned = Task::load(
        &write_task(
            tmp.path(),
            "pinned",
            &with(&format!("image = \"reg.example/a@{d}\"")),
        ),
        tmp.path(),
    )
    .unwrap();
    assert_eq!(pinned.image.unwrap().digest.as_deref(), Some(d));
    let cases = [
        ("image = \"Not/Valid\"", "environment.image", "lowercase"),
        (
            "image = \"a/b@sha256:12\"",
            "environment.image",
            "64 lowercase hex",
        ),
        ("image = 3", "environment.image", "not a string"),
        (
            "image = \"a/b\"\nworkdir = \"app\"",
            "environment.workdir",
            "absolute",
        ),
        (
            "image = \"a/b\"\nworkdir = \"/a/../b\"",
            "environment.workdir",
            "absolute",
        ),
        (
            "image = \"a/b\"\nworkdir = \"/\"",
            "environment.workdir",
            "absolute",
        ),
        (
            "workdir = \"/app\"",
            "environment.workdir",
            "environment.image` is not",
        ),
    ];
    for (i, (env, field, want)) in cases.iter().enumerate() {
        let dir = write_task(tmp.path(), &format!("bad{i}"), &with(env));
        let e = Task::load(&dir, tmp.path()).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("task.toml") && msg.contains(want) && msg.contains("fix:"),
            "{env}: {msg}"
        );
        assert_eq!(&field_of(e), field, "{env}");
    }
}

/// A task whose `task.toml` is the minimal one plus `field` (`section.key`, or a top-level
/// key) set to `value`.
fn with_field(root: &Path, section: &str, key: &str, value: &str) -> Result<Task, TaskError> {
    let extra = match section {
        // `workdir` needs an image beside it; `[task]` needs its name.
        "environment" if key == "workdir" => "image = \"reg.example:5000/t/i:v1\"\n",
        "task" if key != "name" => "name = \"org/x\"\n",
        _ => "",
    };
    let toml = if section.is_empty() {
        format!("{key} = {value}\n{}", good_toml())
    } else if let Some((outer, inner)) = section.split_once('.') {
        format!("{}[{outer}.{inner}]\n{key} = {value}\n", good_toml())
    } else {
        format!("{}[{section}]\n{key} = {value}\n{extra}", good_toml())
    };
    let dir = write_task(root, "harbor-field", &toml);
    // A step needs its folder (core::task::steps).
    fs::create_dir_all(dir.join("steps/one")).unwrap();
    fs::write(dir.join("steps/one/instruction.md"), "Do one.\n").unwrap();
    Task::load(&dir, root)
}

#[test]
fn every_harbor_field_takes_effect_is_refused_naming_it_and_the_fix_or_is_kept_as_ignored() {
    use crate::egress::NetworkMode;
    let tmp = tempfile::tempdir().unwrap();
    let value = |field: &str| match field {
        "schema_version" => "\"1.1\"",
        "source" => "\"https://example.com/where-it-came-from\"",
        "multi_step_reward_strategy" => "\"mean\"",
        "steps" => "[{ name = \"one\" }]",
        "artifacts" => {
            "[\"/app/out.txt\", { source = \"/logs/artifacts/x\", destination = \"x\" }]"
        }
        "metadata" => "{ difficulty = \"easy\" }",
        "task.name" => "\"terminal-bench/x\"",
        "task.version" => "\"2.5\"",
        "task.description" => "\"what it is\"",
        "task.authors" => "[{ name = \"A\", email = \"a@example.com\" }]",
        "task.keywords" => "[\"k\"]",
        "agent.timeout_sec" | "verifier.timeout_sec" => "60.0",
        "agent.user" | "verifier.user" => "\"agent\"",
        // The fixture has a [source]: its phases default to no-network
        // (core::egress::unset_default), so the fields open them.
        "agent.network_mode" | "verifier.network_mode" => "\"public\"",
        "agent.allowed_hosts" | "verifier.allowed_hosts" => "[\"pypi.org\"]",
        "verifier.env" => "{ A = \"1\" }",
        "verifier.collect" => "[]",
        "verifier.environment" => "{ network_mode = \"public\" }",
        "environment.image" => "\"reg.example:5000/t/i:v1\"",
        "environment.docker_image" => "\"reg.example:5000/t/i:v1\"",
        "environment.workdir" => "\"/app\"",
        "environment.os" => "\"Linux\"",
        "environment.build_timeout_sec" => "600.0",
        "environment.cpus" => "1",
        "environment.memory_mb" => "2048",
        "environment.memory" => "\"2G\"",
        "environment.storage_mb" => "10240",
        "environment.storage" => "\"10G\"",
        "environment.gpus" => "0",
        "environment.gpu_types" => "[\"h100\"]",
        "environment.tpu" => "{ type = \"v6e\", topology = \"2x4\" }",
        "environment.mcp_servers" => "[]",
        // A pin needs a compose file's `build:` service (world::tests, load_checks_tests).
        "environment.service_images" => "{}",
        "environment.env" => "{ A = \"1\", B = \"${HOST_B:-x}\" }",
        "environment.skills_dir" => "\"/skills\"",
        "environment.healthcheck" => "{ command = \"true\" }",
        "environment.network_mode" => "\"public\"",
        "environment.allowed_hosts" => "[\"example.com\"]",
        "environment.allow_internet" => "true",
        "solution.env" => "{ A = \"1\" }",
        "verifier.environment_mode" => "\"separate\"",
        other => panic!("no test value for {other}"),
    };
    for (field, handling) in HARBOR_FIELDS {
        let (section, key) = field.split_once('.').unwrap_or(("", field));
        if *field == "version" {
            continue; // every fixture sets it (loads_a_minimal_harbor_style_task)
        }
        let mut v = value(field).to_string();
        let (section, key) = if *field == "environment.allowed_hosts" {
            // Only valid with `allowlist`, as in Harbor.
            v = format!("{v}\nnetwork_mode = \"allowlist\"");
            (section, key)
        } else if *field == "verifier.environment" {
            ("verifier", "environment")
        } else {
            (section, key)
        };
        if field.ends_with("allowed_hosts") && section != "environment" {
            v = format!("{v}\nnetwork_mode = \"allowlist\"");
        }
        let got = if *field == "source" {
            // Harbor's string `source` cannot sit beside akbench's `[source]` table.
            let toml = format!(
                "source = {v}\nversion = \"1.0\"\n[environment]\nimage = \"reg.example/x:1\"\n"
            );
            Task::load(&write_task(tmp.path(), "harbor-source", &toml), tmp.path())
        } else {
            with_field(tmp.path(), section, key, &v)
        };
        match handling {
            Handling::Applied(_) | Handling::Ignored(_) => {
                let t = got.unwrap_or_else(|e| panic!("{field}: {e}"));
                let used = t
                    .fields
                    .iter()
                    .find(|u| u.field == *field || u.field.starts_with(&format!("{field}.")))
                    .unwrap_or_else(|| {
                        panic!("{field} is not in the task's fields: {:?}", t.fields)
                    });
                let want = match handling {
                    // Without `[[steps]]` (this fixture), as in Harbor.
                    _ if *field == "multi_step_reward_strategy" => "ignored",
                    Handling::Ignored(_) => "ignored",
                    _ => "applied",
                };
                assert_eq!(used.handling, want, "{field}");
                if key.ends_with("image") {
                    assert_eq!(
                        t.image.unwrap().to_string(),
                        "reg.example:5000/t/i:v1",
                        "{field}"
                    );
                    continue;
                }
                match *field {
                    "environment.workdir" => assert_eq!(t.image_workdir.as_deref(), Some("/app")),
                    "environment.build_timeout_sec" => {
                        assert_eq!(build_timeout_sec(&t.file.environment), Some(600.0))
                    }
                    "environment.cpus" => assert_eq!(t.requirements.cpus, Some(1)),
                    "environment.memory_mb" | "environment.memory" => {
                        assert_eq!(t.requirements.memory_mb, Some(2048))
                    }
                    "environment.storage_mb" | "environment.storage" => {
                        assert_eq!(t.requirements.storage_mb, Some(10240))
                    }
                    "solution.env" => assert_eq!(
                        t.solution_env,
                        BTreeMap::from([("A".to_string(), "1".to_string())])
                    ),
                    "task.name" => assert_eq!(t.harbor_name.as_deref(), Some("terminal-bench/x")),
                    "task.version" => assert_eq!(t.release.version, "2.5"),
                    "environment.skills_dir" => {
                        assert_eq!(t.skills_dir.as_deref(), Some("/skills"))
                    }
                    "environment.env" => assert_eq!(
                        t.environment_env.get("B"),
                        Some(&EnvValue::Reference {
                            name: "HOST_B".into(),
                            default: Some("x".into())
                        })
                    ),
                    "environment.network_mode" | "environment.allow_internet" => {
                        assert_eq!(t.network.agent, NetworkMode::Public, "{field}");
                        assert_eq!(t.network.verifier, NetworkMode::Public, "{field}");
                    }
                    "agent.network_mode" => {
                        assert_eq!(t.network.agent, NetworkMode::Public);
                        assert_eq!(t.network.verifier, NetworkMode::NoNetwork);
                    }
                    "verifier.network_mode" | "verifier.environment" => {
                        assert_eq!(t.network.agent, NetworkMode::NoNetwork, "{field}");
                        assert_eq!(t.network.verifier, NetworkMode::Public, "{field}");
                    }
                    _ => {}
                }
            }
            Handling::Refused(fix) => {
                let e = got.map(|_| ()).unwrap_err();
                let msg = e.to_string();
                assert!(
                    msg.contains("task.toml")
                        && msg.contains(&format!("field `{field}`"))
                        && msg.contains(&format!("fix: {fix}")),
                    "{field}: {msg}"
                );
            }
        }
    }
    // Unknown keys, and applied fields with a value that cannot take effect.
    for (section, key, value, field, needle) in [
        (
            "environment",
            "os",
            "\"windows\"",
            "environment.os",
            "not `linux`",
        ),
        (
            "environment",
            "build_timeout_sec",
            "-1.0",
            "environment.build_timeout_sec",
            "seconds",
        ),
        (
            "environment",
            "build_timeout_sec",
            "\"long\"",
            "environment.build_timeout_sec",
            "not a number",
        ),
        (
            "solution",
            "env",
            "{ A = \"${HOST_SECRET}\" }",
            "solution.env",
            "does not expand",
        ),
        (
            "solution",
            "env",
            "{ A = 1 }",
            "solution.env",
            "not a string",
        ),
        (
            "environment",
            "cpus",
            "0",
            "environment.cpus",
            "not a number above 0",
        ),
        (
            "environment",
            "memory_mb",
            "1.5",
            "environment.memory_mb",
            "whole number",
        ),
        (
            "environment",
            "storage_mb",
            "\"10G\"",
            "environment.storage_mb",
            "whole number",
        ),
        (
            "solution",
            "env",
            "{ \"A=B\" = \"1\" }",
            "solution.env",
            "not an environment-variable name",
        ),
        ("solution", "env", "\"A=1\"", "solution.env", "not a table"),
        (
            "environment",
            "healthcheck",
            "{ retries = 2 }",
            "environment.healthcheck",
            "no `command`",
        ),
        (
            "verifier",
            "environment_mode",
            "\"both\"",
            "verifier.environment_mode",
            "not an environment mode",
        ),
    ] {
        let e = with_field(tmp.path(), section, key, value)
            .map(|_| ())
            .unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains(needle) && msg.contains("fix:"),
            "{field}: {msg}"
        );
        assert_eq!(field_of(e), field);
    }
    // Harbor's and akbench's name of the image together: one of the two.
    let toml = format!(
        "{}[environment]\nimage = \"a\"\ndocker_image = \"b\"\n",
        good_toml()
    );
    let dir = write_task(tmp.path(), "both", &toml);
    let e = Task::load(&dir, tmp.path()).unwrap_err();
    assert_eq!(field_of(e), "environment.docker_image");
}

#[test]
fn the_harbor_field_table_is_documented() {
    let doc =
        fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/tasks.md")).unwrap();
    for (field, handling) in HARBOR_FIELDS {
        let row = doc
            .lines()
            .find(|l| l.starts_with(&format!("| `{field}` |")))
            .unwrap_or_else(|| panic!("docs/tasks.md has no row for `{field}`"));
        let kind = match handling {
            Handling::Applied(_) => "takes effect",
            Handling::Refused(_) => "refused",
            Handling::Ignored(_) => "ignored",
        };
        assert!(row.contains(kind), "{field}: {row}");
    }
}

#[test]
fn an_image_only_task_loads_and_runs_under_container_only() {
    let tmp = tempfile::tempdir().unwrap();
    let toml = "version = \"1.0\"\n[environment]\ndocker_image = \"127.0.0.1:5000/tb/wordfreq:1\"\nworkdir = \"/app\"\n";
    let dir = write_task(tmp.path(), "img", toml);
    let t = Task::load(&dir, tmp.path()).unwrap();
    assert!(t.image_only());
    assert_eq!(t.repo, None);
    assert_eq!(t.commit, "");
    assert_eq!(t.image_workdir.as_deref(), Some("/app"));
    assert_eq!(t.check_runtime(true), Ok(()));
    let refused = t.check_runtime(false).unwrap_err();
    assert!(
        refused.contains("task `img`")
            && refused.contains("runtime: container")
            && refused.contains("no [source]"),
        "{refused}"
    );
    // A task with a [source] runs under any runtime.
    let dir = write_task(tmp.path(), "git", &good_toml());
    let t = Task::load(&dir, tmp.path()).unwrap();
    assert!(!t.image_only());
    assert_eq!(t.check_runtime(false), Ok(()));
}

#[test]
fn an_image_only_task_takes_no_mutation_and_no_task_takes_neither_source_nor_image() {
    let tmp = tempfile::tempdir().unwrap();
    let toml = "version = \"1.0\"\n[environment]\nimage = \"reg.example/x:1\"\n[mutation]\npatch = \"m.patch\"\n";
    let dir = write_task(tmp.path(), "m", toml);
    std::fs::write(dir.join("m.patch"), "").unwrap();
    let err = Task::load(&dir, tmp.path()).unwrap_err();
    assert_eq!(field_of(err.clone()), "mutation.patch", "{err}");
    let dir = write_task(tmp.path(), "n", "version = \"1.0\"\n");
    let err = Task::load(&dir, tmp.path()).unwrap_err().to_string();
    assert!(
        err.contains("`source`") && err.contains("docker_image"),
        "{err}"
    );
}

#[test]
fn the_runtime_is_container_when_every_task_is_image_only_and_none_was_asked() {
    use crate::manifest::Runtime;
    let tmp = tempfile::tempdir().unwrap();
    let image = Task::load(
        &write_task(
            tmp.path(),
            "img",
            "version = \"1.0\"\n[environment]\nimage = \"reg.example/x:1\"\n",
        ),
        tmp.path(),
    )
    .unwrap();
    let git = Task::load(&write_task(tmp.path(), "git", &good_toml()), tmp.path()).unwrap();
    // (asked, tasks, runtime, picked)
    let cases: &[(Option<Runtime>, Vec<&Task>, Runtime, bool)] = &[
        (None, vec![&image], Runtime::Container, true),
        (None, vec![&image, &image], Runtime::Container, true),
        (None, vec![&image, &git], Runtime::Sandbox, false),
        (None, vec![&git], Runtime::Sandbox, false),
        (None, vec![], Runtime::Sandbox, false),
        (
            Some(Runtime::Sandbox),
            vec![&image],
            Runtime::Sandbox,
            false,
        ),
        (Some(Runtime::Direct), vec![&git], Runtime::Direct, false),
        (
            Some(Runtime::Container),
            vec![&git],
            Runtime::Container,
            false,
        ),
    ];
    for (asked, tasks, want, picked) in cases {
        let (got, why) = pick_runtime(*asked, tasks.iter().copied());
        assert_eq!(got, *want, "{asked:?} {}", tasks.len());
        assert_eq!(why.is_some(), *picked, "{asked:?} {}", tasks.len());
        if let Some(why) = why {
            assert!(why.contains("image-only"), "{why}");
        }
    }
}
