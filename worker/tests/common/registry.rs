//! A real OCI registry on loopback (Debian's `docker-registry`), and images pushed to it:
//! the Debian base built by `scripts/build-test-image` (mmdebstrap, cached under target/)
//! and small layers made here with `tar`, `gzip` and `zstd`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// The registry program.
pub const REGISTRY: &str = "/usr/bin/docker-registry";

/// Why the container tests cannot run here, if they cannot.
pub fn missing() -> Option<String> {
    if !Path::new(REGISTRY).is_file() {
        return Some("`docker-registry` is not installed (apt-get install docker-registry)".into());
    }
    if Command::new("mmdebstrap")
        .arg("--version")
        .output()
        .is_err()
    {
        return Some("`mmdebstrap` is not installed (apt-get install mmdebstrap)".into());
    }
    if let Err(e) = akbench_worker::runtime::check(akbench_worker::runtime::RuntimeKind::Container)
    {
        return Some(format!("the container runtime does not work here: {e}"));
    }
    None
}

/// A running registry, stopped when dropped.
pub struct Registry {
    child: Child,
    /// `127.0.0.1:PORT`.
    pub addr: String,
    /// Where it keeps its blobs.
    pub storage: PathBuf,
    /// Its log (errors only), shown when a push fails.
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Registry {
    /// Starts a registry with its own storage on a free loopback port and waits until it
    /// answers `/v2/`.
    pub fn start() -> Registry {
        let dir = tempfile::tempdir().unwrap();
        let storage = dir.path().join("storage");
        std::fs::create_dir_all(&storage).unwrap();
        let port = free_port();
        let addr = format!("127.0.0.1:{port}");
        let config = dir.path().join("config.yml");
        std::fs::write(
            &config,
            format!(
                "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: {addr}\n",
                storage.display()
            ),
        )
        .unwrap();
        let log = dir.path().join("registry.log");
        let child = Command::new(REGISTRY)
            .args(["serve", &config.display().to_string()])
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let r = Registry {
            child,
            addr,
            storage,
            log,
            _dir: dir,
        };
        // Ready once it accepts connections and answers the API's base.
        let mut ready = false;
        for _ in 0..500 {
            if let Ok(mut s) = std::net::TcpStream::connect(&r.addr) {
                use std::io::{Read, Write};
                let _ = write!(s, "GET /v2/ HTTP/1.0\r\nHost: {}\r\n\r\n", r.addr);
                let mut b = String::new();
                let _ = s.read_to_string(&mut b);
                if b.starts_with("HTTP/1.0 200") || b.starts_with("HTTP/1.1 200") {
                    ready = true;
                    break;
                }
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert!(ready, "the registry at {} never answered", r.addr);
        r
    }

    /// Pushes `layers` (tar files with their kind: `tar`, `gzip`, `zstd`) as
    /// `repo_tag`, with the configuration's `env`, `workdir` and `user`; the manifest digest.
    pub fn push(
        &self,
        repo_tag: &str,
        layers: &[(&Path, &str)],
        env: &[&str],
        workdir: Option<&str>,
        user: Option<&str>,
    ) -> String {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/oci-push.py");
        let mut cmd = Command::new("python3");
        cmd.arg(script).arg(&self.addr).arg(repo_tag);
        for e in env {
            cmd.args(["--env", e]);
        }
        if let Some(w) = workdir {
            cmd.args(["--workdir", w]);
        }
        if let Some(u) = user {
            cmd.args(["--user", u]);
        }
        for (p, kind) in layers {
            cmd.arg(format!("{}:{kind}", p.display()));
        }
        let out = cmd.output().unwrap();
        if !out.status.success() {
            // The registry's side of it (a full disk shows there as a reset connection here).
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(20).collect();
            let free = Command::new("df")
                .args(["-h", &self.storage.display().to_string()])
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                .unwrap_or_default();
            panic!(
                "oci-push: {}\nthe registry's log, last lines:\n{}\n{free}",
                String::from_utf8_lossy(&out.stderr),
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            );
        }
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    }

    /// The registry's stored copy of blob `digest`.
    pub fn blob_file(&self, digest: &str) -> PathBuf {
        let hex = digest.strip_prefix("sha256:").unwrap();
        self.storage
            .join("docker/registry/v2/blobs/sha256")
            .join(&hex[..2])
            .join(hex)
            .join("data")
    }
}

/// The Debian base image's root file system as a tar (built once, cached under target/).
pub fn base_tar() -> PathBuf {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/build-test-image");
    let out = Command::new("bash").arg(script).output().unwrap();
    assert!(
        out.status.success(),
        "build-test-image: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

/// A layer holding `files` (path, content) and `whiteouts` (names of `.wh.` files), as a
/// tar compressed with `kind` (`tar`, `gzip`, `zstd`), written in `dir`.
pub fn layer(dir: &Path, name: &str, files: &[(&str, &str)], kind: &str) -> PathBuf {
    let stage = dir.join(format!("{name}-stage"));
    for (p, content) in files {
        let f = stage.join(p);
        std::fs::create_dir_all(f.parent().unwrap()).unwrap();
        std::fs::write(&f, content).unwrap();
    }
    std::fs::create_dir_all(&stage).unwrap();
    let tar = dir.join(format!("{name}.tar"));
    let st = Command::new("tar")
        .args(["--owner=0", "--group=0", "--numeric-owner", "-C"])
        .arg(&stage)
        .arg("-cf")
        .arg(&tar)
        .arg(".")
        .status()
        .unwrap();
    assert!(st.success());
    let (prog, ext) = match kind {
        "tar" => return tar,
        "gzip" => ("gzip", "gz"),
        "zstd" => ("zstd", "zst"),
        other => panic!("unknown layer kind {other}"),
    };
    let st = Command::new(prog)
        .args(["-q", "-f"])
        .arg(&tar)
        .status()
        .unwrap();
    assert!(st.success(), "{prog} failed");
    let _ = std::fs::remove_file(&tar);
    dir.join(format!("{name}.tar.{ext}"))
}

/// The Debian base image pushed to a registry of its own as `akbench/base:TAG` and unpacked
/// into a store in a temporary folder, as the `container` runtime sees it (workdir `/app`,
/// root). Keep it alive while the image is used.
pub struct UnpackedBase {
    pub image: akbench_worker::runtime::container::Image,
    pub registry: Registry,
    _store: tempfile::TempDir,
}

/// [`UnpackedBase`] with the tag `tag`.
pub fn unpacked_base(tag: &str) -> UnpackedBase {
    let tar = base_tar();
    let registry = Registry::start();
    let digest = registry.push(
        &format!("akbench/base:{tag}"),
        &[(&tar, "tar")],
        &[],
        None,
        None,
    );
    let dir = tempfile::tempdir().unwrap();
    let mut store = akbench_worker::image::Store::from_env(dir.path().join("images")).unwrap();
    store.insecure = vec![registry.addr.clone()];
    let r =
        akbench_core::image::ImageRef::parse(&format!("{}/akbench/base@{digest}", registry.addr))
            .unwrap();
    let unpacked = store.ensure(&r).unwrap();
    let image = akbench_worker::runtime::container::Image {
        pinned: r.pinned(&digest),
        rootfs: unpacked.rootfs.clone(),
        run: unpacked.run.clone(),
        workdir: "/app".into(),
        user: (0, 0),
    };
    UnpackedBase {
        image,
        registry,
        _store: dir,
    }
}

/// The example task `examples/tasks/<id>` with sidecar services copied to `dest`, as its
/// tests need it: its environment's image (the Debian base as `akbench/base:bookworm`) and
/// each service's of `services` (built from `environment/<service>/`, [`service_image`],
/// as `akbench/<service>:1`) pushed to `reg`, and their names written into its task.toml
/// (`docker_image`, and each service's pin in `[environment.service_images]`, where
/// `akbench image build` writes it). `scratch` holds the services' layers.
pub fn sidecar_example(reg: &Registry, scratch: &Path, dest: &Path, id: &str, services: &[&str]) {
    let example = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/tasks")
        .join(id);
    let mut pins = String::from("\n[environment.service_images]\n");
    for svc in services {
        let name = format!("akbench/{svc}:1");
        let digest = service_image(reg, scratch, &example, svc, &name);
        pins.push_str(&format!("{svc} = \"{}/{name}@{digest}\"\n", reg.addr));
    }
    std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
    assert!(Command::new("cp")
        .arg("-a")
        .arg(&example)
        .arg(dest)
        .status()
        .unwrap()
        .success());
    let p = dest.join("task.toml");
    let text = std::fs::read_to_string(&p).unwrap();
    let from = "workdir = \"/app\"";
    assert!(text.contains(from), "task.toml has no `{from}`");
    let text = text.replacen(
        from,
        &format!(
            "{from}\ndocker_image = \"{}/akbench/base:bookworm\"",
            reg.addr
        ),
        1,
    );
    std::fs::write(&p, text + &pins).unwrap();
}

/// The image of sidecar `svc` of the example task folder `example`, pushed to `reg` as
/// `name` (`repository:tag`) as its `environment/<svc>/Dockerfile` describes it: the
/// Debian base (pushed as `akbench/base:bookworm` too), then its `COPY FILE DEST` lines as
/// one layer, working folder /srv. `scratch` holds the layer. Returns the pushed digest.
pub fn service_image(
    reg: &Registry,
    scratch: &Path,
    example: &Path,
    svc: &str,
    name: &str,
) -> String {
    let path = ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"];
    let base = base_tar();
    reg.push(
        "akbench/base:bookworm",
        &[(&base, "tar")],
        &path,
        Some("/app"),
        None,
    );
    let folder = example.join("environment").join(svc);
    let dockerfile = std::fs::read_to_string(folder.join("Dockerfile")).unwrap();
    let files: Vec<(String, String)> = dockerfile
        .lines()
        .filter_map(|l| l.strip_prefix("COPY "))
        .map(|rest| {
            let parts: Vec<&str> = rest.split_whitespace().collect();
            assert_eq!(parts.len(), 2, "{svc}'s Dockerfile: `COPY {rest}`");
            let content = std::fs::read_to_string(folder.join(parts[0])).unwrap();
            (parts[1].trim_start_matches('/').to_string(), content)
        })
        .collect();
    assert!(!files.is_empty(), "{svc}'s Dockerfile copies nothing");
    let files: Vec<(&str, &str)> = files
        .iter()
        .map(|(p, c)| (p.as_str(), c.as_str()))
        .collect();
    let app = layer(scratch, svc, &files, "tar");
    reg.push(
        name,
        &[(&base, "tar"), (&app, "tar")],
        &path,
        Some("/srv"),
        None,
    )
}
