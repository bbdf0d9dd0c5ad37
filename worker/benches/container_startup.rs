//! The `container` runtime's costs: the first pull and unpack of an image, and a sandbox
//! start over an image against the same start over the host's root (`sandbox`).
//!
//! Starts a loopback `docker-registry`, pushes the Debian test image
//! (`scripts/build-test-image`, single layer), pulls and unpacks it into a fresh store
//! (timed: the first pull + unpack, then a cached `ensure`), then runs `true`, alternately,
//! under `sandbox` and under `container` (overlay mounted in the child's namespace, user
//! namespace, same cgroups, seccomp, tmpfs) through `runtime::prepare` -> `spawn` -> `wait`
//! -> `Guard::finish`, as an attempt does. Goal: container start median <= 50 ms.
//!
//! `cargo bench -p akbench-worker --bench container_startup` (env `CONTAINER_ROUNDS`,
//! default 100). Needs root, bubblewrap, `docker-registry` and `mmdebstrap`.

#[path = "../tests/common/registry.rs"]
#[allow(dead_code)]
mod registry;

use akbench_core::image::ImageRef;
use akbench_worker::image::Store;
use akbench_worker::process::{base_env, spawn, CancelToken, ProcessSpec};
use akbench_worker::runtime::container::{Image, View};
use akbench_worker::runtime::{prepare, Exposure, Limits, RuntimeKind};
use std::path::Path;
use std::time::{Duration, Instant};

fn once(dir: &Path, kind: RuntimeKind, image: Option<&Image>, i: usize) -> Duration {
    let started = Instant::now();
    let ws = dir.join(format!("ws{i}"));
    let home = dir.join(format!("home{i}"));
    std::fs::create_dir_all(home.join("tmp")).unwrap();
    std::fs::create_dir_all(&ws).unwrap();
    let spec = ProcessSpec {
        argv: vec!["true".into()],
        cwd: ws.clone(),
        env: base_env(&home),
        stdout_path: dir.join("out"),
        stderr_path: dir.join("err"),
        output_cap: 1024,
        timeout: Duration::from_secs(30),
        grace: Duration::from_secs(1),
        tag: uuid::Uuid::now_v7().to_string(),
        hooks: Default::default(),
    };
    let exposure = Exposure {
        hosts: Vec::new(),
        budget: None,
        egress: None,
        writable: vec![ws.clone(), home.clone()],
        readable: Vec::new(),
        endpoints: Vec::new(),
        disk_roots: vec![ws.clone(), home.clone()],
        scratch: dir.join(format!("rt{i}")),
        container: image.map(|i| View {
            workspace: true,
            image: i.clone(),
            mounts: Vec::new(),
            ro_mounts: Vec::new(),
            tools: Vec::new(),
        }),
    };
    let limits = Limits {
        memory_mb: Some(2048),
        cpus: Some(1),
        ..Limits::default()
    };
    let p = prepare(kind, spec, &exposure, limits).unwrap();
    let running = spawn(p.spec).unwrap();
    let end = running.wait(&CancelToken::new());
    let fin = p.guard.finish();
    assert_eq!(end.exit_code, Some(0), "{kind:?}: {end:?}");
    assert!(fin.limit_cause.is_none());
    let _ = std::fs::remove_dir_all(dir.join(format!("rt{i}")));
    started.elapsed()
}

fn median(mut v: Vec<Duration>) -> (f64, f64) {
    v.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    (ms(v[v.len() / 2]), ms(v[v.len() * 9 / 10]))
}

fn main() {
    if let Some(why) = registry::missing() {
        eprintln!("SKIPPED container_startup: {why}");
        return;
    }
    let rounds: usize = std::env::var("CONTAINER_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(100);
    let tar = registry::base_tar();
    let size = std::fs::metadata(&tar).unwrap().len();
    let reg = registry::Registry::start();
    let t = Instant::now();
    let digest = reg.push("akbench/base:bench", &[(&tar, "tar")], &[], None, None);
    let push = t.elapsed();
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::from_env(dir.path().join("images")).unwrap();
    store.insecure = vec![reg.addr.clone()];
    let r = ImageRef::parse(&format!("{}/akbench/base@{digest}", reg.addr)).unwrap();
    let t = Instant::now();
    let first = store.ensure(&r).unwrap();
    let pull = t.elapsed();
    assert!(first.fetched);
    drop(first);
    let t = Instant::now();
    let u = store.ensure(&r).unwrap();
    let cached = t.elapsed();
    let image = Image {
        pinned: r.pinned(&digest),
        rootfs: u.rootfs.clone(),
        run: u.run.clone(),
        workdir: "/app".into(),
        user: (0, 0),
    };
    let (mut sandbox, mut container) = (Vec::new(), Vec::new());
    for i in 0..rounds {
        sandbox.push(once(dir.path(), RuntimeKind::Sandbox, None, 2 * i));
        container.push(once(
            dir.path(),
            RuntimeKind::Container,
            Some(&image),
            2 * i + 1,
        ));
    }
    let (s50, s90) = median(sandbox);
    let (c50, c90) = median(container);
    println!(
        "image: {} MB single uncompressed layer (push by oci-push.py: {:.1} s)",
        size / 1_000_000,
        push.as_secs_f64()
    );
    println!(
        "first pull + verify + unpack: {:.2} s; cached ensure: {:.1} ms",
        pull.as_secs_f64(),
        cached.as_secs_f64() * 1000.0
    );
    println!("rounds {rounds}");
    println!("sandbox (host root)  median {s50:.1} ms  p90 {s90:.1} ms");
    println!(
        "container (image)    median {c50:.1} ms  p90 {c90:.1} ms  (cost over sandbox {:.1} ms)",
        c50 - s50
    );
    println!("goal: container start median <= 50 ms");
}
