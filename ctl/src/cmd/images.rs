//! `akbench image build`: a task's image, and the images of the sidecar services its
//! compose file builds (`build:`), built, pushed, and pinned in its task.toml. Images
//! pinned at plan time are `shared::inputs`'s (docs/container.md).

use crate::cmd::shared::inputs::{load_task, resolver};
use crate::exit::InputError;

/// One image to build: the service it is for (`None`: the task's own), the reference it
/// is pushed to, its context and Dockerfile.
struct Job {
    service: Option<String>,
    written: String,
    context: std::path::PathBuf,
    dockerfile: std::path::PathBuf,
}

/// `akbench image build DIR --push REGISTRY`: builds `environment/Dockerfile` (when the
/// task has one) and every sidecar service with `build:` with the builder found (docker,
/// podman, buildah), pushes each, resolves each pushed tag to its manifest digest as plans
/// do, and writes them into the task's task.toml: `environment.image`
/// (`REGISTRY/NAME:TAG@digest`) and `[environment.service_images]`
/// (`SERVICE = "REGISTRY/NAME-SERVICE:TAG@digest"`).
pub fn build(args: crate::cli::ImageBuildArgs) -> anyhow::Result<i32> {
    use akbench_core::image::ImageRef;
    let dir = akbench_core::task::absolute(&args.dir);
    let task = load_task(&dir.display().to_string(), &dir)?;
    let context = dir.join("environment");
    let main = context.join("Dockerfile").is_file();
    let services: Vec<(String, akbench_core::task::world::Build)> = task
        .world
        .iter()
        .flat_map(|w| &w.services)
        .filter_map(|s| s.build.clone().map(|b| (s.name.clone(), b)))
        .collect();
    if !main && services.is_empty() {
        return Err(InputError(format!(
            "failed to build the image of task `{}`: {} is missing, and no service of environment/docker-compose.yaml has `build:`; fix: write the task's environment as environment/Dockerfile (or name a prebuilt image in `environment.image`)",
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
    let reference = |written: String| -> anyhow::Result<(String, ImageRef)> {
        let r = ImageRef::parse(&written).map_err(|e| {
            InputError(format!(
                "failed to build: `{}` is not an image reference ({e}); fix: pass --name (lowercase path) and --tag ([A-Za-z0-9_.-], the task's version is the default)",
                akbench_core::limits::elide(&written)
            ))
        })?;
        Ok((written, r))
    };
    let mut jobs = Vec::new();
    if main {
        jobs.push(Job {
            service: None,
            written: reference(format!("{registry}/{name}:{tag}"))?.0,
            context: context.clone(),
            dockerfile: context.join("Dockerfile"),
        });
    }
    for (service, b) in &services {
        jobs.push(Job {
            service: Some(service.clone()),
            written: reference(format!("{registry}/{name}-{service}:{tag}"))?.0,
            context: context.join(&b.context),
            dockerfile: context.join(&b.dockerfile),
        });
    }
    if let (Some(existing), true, false) = (&task.image, main, args.json) {
        eprintln!(
            "akbench: the image the task names now, {existing}, is replaced by the one built"
        );
    }
    let toml_path = dir.join(akbench_core::task::TASK_FILE);
    let text = akbench_core::bounded_read::ReadKind::Config
        .load_text(&toml_path, akbench_core::bounded_read::Links::Follow)?;
    let key = akbench_core::task::image_key_of(&text);
    if !args.json {
        if main {
            eprintln!(
                "akbench: the image will be written to `environment.{key}` in {}",
                toml_path.display()
            );
        }
        if !services.is_empty() {
            eprintln!(
                "akbench: the services' images will be written to `[environment.service_images]` in {}",
                toml_path.display()
            );
        }
    }
    // Refused before anything is built when task.toml cannot take the images.
    let zero = format!("sha256:{}", "0".repeat(64));
    let pins = |digests: &[String]| -> (Option<String>, Vec<(String, String)>) {
        let mut main_pin = None;
        let mut svc = Vec::new();
        for (job, digest) in jobs.iter().zip(digests) {
            let pinned = format!("{}@{digest}", job.written);
            match &job.service {
                None => main_pin = Some(pinned),
                Some(s) => svc.push((s.clone(), pinned)),
            }
        }
        (main_pin, svc)
    };
    let edit = |main_pin: &Option<String>, svc: &[(String, String)]| -> Result<String, String> {
        let text = match main_pin {
            Some(p) => akbench_core::task::set_image(&text, p)?,
            None => text.clone(),
        };
        if svc.is_empty() {
            Ok(text)
        } else {
            akbench_core::task::set_service_images(&text, svc)
        }
    };
    let (m, svc) = pins(&vec![zero; jobs.len()]);
    edit(&m, &svc)
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
    for job in &jobs {
        let ctx = job.context.display().to_string();
        let file = job.dockerfile.display().to_string();
        let w = job.written.as_str();
        let (build_argv, push_argv): (Vec<&str>, Vec<&str>) = match builder.as_str() {
            "buildah" => (
                vec!["buildah", "bud", "-t", w, "-f", &file, &ctx],
                vec!["buildah", "push", w],
            ),
            b => (
                vec![b, "build", "-t", w, "-f", &file, &ctx],
                vec![b, "push", w],
            ),
        };
        if !args.json {
            eprintln!("akbench: building {w} from {ctx} with {builder}");
        }
        step(
            &build_argv,
            Limit(timeout, "build time limit (environment.build_timeout_sec)"),
        )?;
        if !args.json {
            eprintln!("akbench: pushing {w}");
        }
        step(
            &push_argv,
            Limit(
                push_deadline,
                "registry deadline (AKBENCH_PULL_TIMEOUT_SEC, 30 minutes unless set)",
            ),
        )?;
    }
    // The digests a plan would pin: each tag resolved through akbench's own registry client.
    let store = resolver()?;
    let mut digests = Vec::new();
    for job in &jobs {
        let digest = store.resolve(&reference(job.written.clone())?.1).map_err(|e| {
            anyhow::anyhow!("failed to read back the pushed image {}: {e} (a plain-HTTP registry must be listed in AKBENCH_INSECURE_REGISTRIES)", job.written)
        })?;
        digests.push(digest);
    }
    let (main_pin, svc) = pins(&digests);
    let edited = edit(&main_pin, &svc)
        .map_err(|e| anyhow::anyhow!("failed to write {}: {e}", toml_path.display()))?;
    akbench_core::output::write(&toml_path, edited.as_bytes())?;
    let field = format!("environment.{key}");
    if args.json {
        let digest = main.then(|| digests[0].clone());
        let services: Vec<_> = svc
            .iter()
            .zip(&digests[usize::from(main)..])
            .map(|((s, image), digest)| serde_json::json!({"service": s, "image": image, "digest": digest}))
            .collect();
        outln!(
            "{}",
            serde_json::json!({"task": task.release.id, "image": main_pin, "digest": digest, "builder": builder, "task_toml": toml_path, "field": main.then_some(field), "services": services, "services_field": "environment.service_images"})
        );
    } else {
        if let Some(p) = &main_pin {
            outln!("{p}");
            eprintln!("akbench: wrote `{field}` into {}", toml_path.display());
        }
        for (s, p) in &svc {
            outln!("{s} {p}");
        }
        if !svc.is_empty() {
            eprintln!(
                "akbench: wrote `[environment.service_images]` into {}",
                toml_path.display()
            );
        }
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
