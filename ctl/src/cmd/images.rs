//! `akbench image build`: a task's image built, pushed, and pinned in its task.toml. Images
//! pinned at plan time are `shared::inputs`'s (docs/container.md).

use crate::cmd::shared::inputs::{load_task, resolver};
use crate::exit::InputError;

/// `akbench image build DIR --push REGISTRY`: builds `environment/Dockerfile` with the
/// builder found (docker, podman, buildah), pushes it, resolves the pushed tag to its
/// manifest digest as plans do, and writes `environment.image` (`REGISTRY/NAME:TAG@digest`)
/// into the task's task.toml.
pub fn build(args: crate::cli::ImageBuildArgs) -> anyhow::Result<i32> {
    use akbench_core::image::ImageRef;
    let dir = akbench_core::task::absolute(&args.dir);
    let task = load_task(&dir.display().to_string(), &dir)?;
    let context = dir.join("environment");
    if !context.join("Dockerfile").is_file() {
        return Err(InputError(format!(
            "failed to build the image of task `{}`: {} is missing; fix: write the task's environment as environment/Dockerfile (or name a prebuilt image in `environment.image`)",
            task.release.id,
            context.join("Dockerfile").display()
        ))
        .into());
    }
    let registry = args.push.trim();
    if registry.is_empty() || registry.contains("://") || registry.contains('/') {
        return Err(InputError(format!(
            "failed to build: --push `{}` is not a registry `host[:port]`; fix: give e.g. 127.0.0.1:5000 or registry.example",
            akbench_core::limits::elide(registry)
        ))
        .into());
    }
    let name = args
        .name
        .clone()
        .unwrap_or_else(|| format!("akbench/{}", task.release.id.to_ascii_lowercase()));
    let tag = args
        .tag
        .clone()
        .unwrap_or_else(|| task.release.version.clone());
    let written = format!("{registry}/{name}:{tag}");
    let target = ImageRef::parse(&written).map_err(|e| {
        InputError(format!(
            "failed to build: `{}` is not an image reference ({e}); fix: pass --name (lowercase path) and --tag ([A-Za-z0-9_.-], the task's version is the default)",
            akbench_core::limits::elide(&written)
        ))
    })?;
    if let (Some(existing), false) = (&task.image, args.json) {
        eprintln!(
            "akbench: the image the task names now, {existing}, is replaced by the one built"
        );
    }
    let toml_path = dir.join(akbench_core::task::TASK_FILE);
    let text = akbench_core::bounded_read::ReadKind::Config
        .load_text(&toml_path, akbench_core::bounded_read::Links::Follow)?;
    let key = akbench_core::task::image_key_of(&text);
    if !args.json {
        eprintln!(
            "akbench: the image will be written to `environment.{key}` in {}",
            toml_path.display()
        );
    }
    // Refused before anything is built when task.toml cannot take the image.
    akbench_core::task::set_image(&text, &format!("{written}@sha256:{}", "0".repeat(64)))
        .map_err(|e| InputError(format!("failed to build: {}: {e}", toml_path.display())))?;
    let builder = match &args.builder {
        Some(b) => b.clone(),
        None => ["docker", "podman", "buildah"]
            .into_iter()
            .find(|b| on_path(b))
            .map(str::to_string)
            .ok_or_else(|| {
                InputError(
                    "failed to build: none of docker, podman or buildah is on PATH; fix: install one (the worker never builds images)".into(),
                )
            })?,
    };
    // The push is a registry operation: the registry's total deadline bounds it (read
    // before anything is built, so a bad value changes nothing).
    let push_deadline = akbench_worker::image::Deadlines::from_env()
        .map_err(InputError)?
        .pull
        .as_secs_f64();
    let timeout = akbench_core::task::build_timeout_sec(&task.file.environment).unwrap_or(600.0);
    let ctx = context.display().to_string();
    let (build_argv, push_argv): (Vec<&str>, Vec<&str>) = match builder.as_str() {
        "buildah" => (
            vec!["buildah", "bud", "-t", &written, &ctx],
            vec!["buildah", "push", &written],
        ),
        b => (
            vec![b, "build", "-t", &written, &ctx],
            vec![b, "push", &written],
        ),
    };
    if !args.json {
        eprintln!("akbench: building {written} from {ctx} with {builder}");
    }
    step(
        &build_argv,
        Limit(timeout, "build time limit (environment.build_timeout_sec)"),
    )?;
    if !args.json {
        eprintln!("akbench: pushing {written}");
    }
    step(
        &push_argv,
        Limit(
            push_deadline,
            "registry deadline (AKBENCH_PULL_TIMEOUT_SEC, 30 minutes unless set)",
        ),
    )?;
    // The digest a plan would pin: the tag resolved through akbench's own registry client.
    let store = resolver()?;
    let digest = store.resolve(&target).map_err(|e| {
        anyhow::anyhow!("failed to read back the pushed image {written}: {e} (a plain-HTTP registry must be listed in AKBENCH_INSECURE_REGISTRIES)")
    })?;
    let pinned = format!("{written}@{digest}");
    let edited = akbench_core::task::set_image(&text, &pinned)
        .map_err(|e| anyhow::anyhow!("failed to write {}: {e}", toml_path.display()))?;
    akbench_core::output::write(&toml_path, edited.as_bytes())?;
    let field = format!("environment.{key}");
    if args.json {
        outln!(
            "{}",
            serde_json::json!({"task": task.release.id, "image": pinned, "digest": digest, "builder": builder, "task_toml": toml_path, "field": field})
        );
    } else {
        outln!("{pinned}");
        eprintln!("akbench: wrote `{field}` into {}", toml_path.display());
    }
    Ok(crate::exit::OK)
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|p| {
        std::env::split_paths(&p).any(|d| {
            use std::os::unix::fs::PermissionsExt;
            std::fs::metadata(d.join(program))
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
    })
}

/// How long a builder past its time limit has between SIGTERM and SIGKILL.
const STOP_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

/// Ends the process group `pgid` (the builder and everything it started): SIGTERM, then
/// SIGKILL once `child` has exited or [`STOP_GRACE`] passed, so no grandchild outlives the
/// limit holding our output open.
fn stop_group(child: &mut std::process::Child, pgid: libc::pid_t) {
    // SAFETY: signals the process group our own child leads (made with process_group(0));
    // the child is not reaped yet, so its id is not reused.
    unsafe { libc::kill(-pgid, libc::SIGTERM) };
    let until = std::time::Instant::now() + STOP_GRACE;
    while std::time::Instant::now() < until {
        if matches!(child.try_wait(), Ok(Some(_))) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // SAFETY: as above; the group may be gone already (ESRCH is fine).
    unsafe { libc::kill(-pgid, libc::SIGKILL) };
    let _ = child.wait();
}

/// Runs `argv` (its output passed through to stderr), within `timeout` seconds when given:
/// past it, the builder's whole process group is stopped ([`stop_group`]).
/// A step's time limit: seconds, and the words naming it (and how to change it).
struct Limit(f64, &'static str);

fn step(argv: &[&str], limit: Limit) -> anyhow::Result<()> {
    use std::os::unix::process::CommandExt as _;
    let mut child = std::process::Command::new(argv[0])
        .args(&argv[1..])
        .stdout(std::process::Stdio::from(std::io::stderr()))
        .process_group(0)
        .spawn()
        .map_err(|e| anyhow::anyhow!("failed to start `{}`: {e}", argv.join(" ")))?;
    let pgid = child.id() as libc::pid_t;
    let Limit(seconds, what) = limit;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs_f64(seconds);
    let status = loop {
        if let Some(s) = child.try_wait()? {
            break s;
        }
        if std::time::Instant::now() >= deadline {
            stop_group(&mut child, pgid);
            anyhow::bail!(
                "failed: `{}` ran past the {what} of {seconds}s",
                argv.join(" "),
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    if !status.success() {
        anyhow::bail!(
            "failed: `{}` ended {status} (its output is above)",
            argv.join(" ")
        );
    }
    Ok(())
}
