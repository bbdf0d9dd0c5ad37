//! The start of an interactive world against one container: how long until a task's
//! environment with three sidecar services is ready for its agent, against the same
//! environment alone.
//!
//! Starts a loopback `docker-registry`, pushes the Debian test image, unpacks it once, then
//! alternately (`WORLD_ROUNDS` rounds, default 20) starts and ends, through
//! `world_env::start` as an attempt does:
//! - the task's environment alone (`Env::start`: a container sandbox kept alive);
//! - the same environment in a world of three services over the same image: `a` (an HTTP
//!   server with a healthcheck), `b` (depends on `a` healthy), `c` (depends on `b`
//!   started), `main` depending on `c`: the hub namespace and bridge, three sandboxes with
//!   their veth links, `a`'s healthcheck polled until it passes, then the environment
//!   linked. Timed until `world_env::start` returns (the agent could start).
//!
//! `cargo bench -p akbench-worker --bench world_start`. Needs root, bubblewrap,
//! `docker-registry`, `mmdebstrap` and iproute2.

#[path = "../tests/common/registry.rs"]
#[allow(dead_code)]
mod registry;

use akbench_core::healthcheck::Healthcheck;
use akbench_core::image::ImageRef;
use akbench_core::task::world::{Condition, Dependency, Service, World};
use akbench_worker::process::{base_env, CancelToken, ProcessSpec};
use akbench_worker::runtime::container::{Image, View};
use akbench_worker::runtime::{Exposure, Limits};
use akbench_worker::world_env::{start, WorldCtx};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

fn service(image: &ImageRef, name: &str, port: u16, deps: &[(&str, Condition)]) -> Service {
    Service {
        name: name.into(),
        image: Some(image.clone()),
        build: None,
        entrypoint: None,
        command: Some(vec![
            "python3".into(),
            "-m".into(),
            "http.server".into(),
            port.to_string(),
        ]),
        environment: BTreeMap::new(),
        working_dir: None,
        user: None,
        depends_on: deps
            .iter()
            .map(|(s, c)| Dependency {
                service: (*s).into(),
                condition: *c,
            })
            .collect(),
        healthcheck: None,
    }
}

fn world(image: &ImageRef) -> World {
    let mut a = service(image, "a", 8001, &[]);
    a.healthcheck = Some(Healthcheck {
        command:
            "python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", 8001), timeout=1)'"
                .into(),
        interval_sec: 0.1,
        timeout_sec: 5.0,
        start_period_sec: 0.0,
        start_interval_sec: 0.1,
        retries: 100,
    });
    World {
        services: vec![
            a,
            service(image, "b", 8002, &[("a", Condition::ServiceHealthy)]),
            service(image, "c", 8003, &[("b", Condition::ServiceStarted)]),
        ],
        main_depends_on: vec![Dependency {
            service: "c".into(),
            condition: Condition::ServiceStarted,
        }],
        main_environment: BTreeMap::new(),
    }
}

fn once(dir: &Path, images: &Path, image: &Image, world: Option<&World>, i: usize) -> Duration {
    let root = dir.join(format!("r{i}"));
    let (ws, home) = (root.join("ws"), root.join("home"));
    std::fs::create_dir_all(home.join("tmp")).unwrap();
    std::fs::create_dir_all(&ws).unwrap();
    let spec = ProcessSpec {
        argv: Vec::new(),
        cwd: ws.clone(),
        env: base_env(&home),
        stdout_path: root.join("out"),
        stderr_path: root.join("err"),
        output_cap: 1024,
        timeout: Duration::from_secs(30),
        grace: Duration::from_secs(1),
        tag: uuid::Uuid::now_v7().to_string(),
        hooks: Default::default(),
    };
    let exposure = Exposure {
        writable: vec![ws.clone(), home.clone()],
        disk_roots: vec![ws.clone(), home.clone()],
        scratch: root.join("rt"),
        container: Some(View {
            workspace: true,
            image: image.clone(),
            mounts: Vec::new(),
            ro_mounts: Vec::new(),
            tools: Vec::new(),
        }),
        ..Exposure::default()
    };
    let clock = akbench_core::clock::SystemClock;
    let ctx = WorldCtx {
        images,
        scratch: &root.join("world"),
        facts: Default::default(),
        clock: &clock,
        logs: None,
    };
    let started = Instant::now();
    let env = start(
        spec,
        &exposure,
        Limits::default(),
        None,
        world,
        &ctx,
        &CancelToken::new(),
    )
    .unwrap_or_else(|e| panic!("{e:?}"));
    let took = started.elapsed();
    env.finish();
    let _ = std::fs::remove_dir_all(&root);
    took
}

fn median(mut v: Vec<Duration>) -> (f64, f64) {
    v.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    (ms(v[v.len() / 2]), ms(v[v.len() * 9 / 10]))
}

fn main() {
    if let Some(why) = registry::missing() {
        eprintln!("SKIPPED world_start: {why}");
        return;
    }
    let rounds: usize = std::env::var("WORLD_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    let reg = registry::Registry::start();
    // SAFETY: set before any other thread reads the environment.
    unsafe { std::env::set_var("AKBENCH_INSECURE_REGISTRIES", &reg.addr) };
    let path = ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"];
    let digest = reg.push(
        "akbench/base:bench",
        &[(&registry::base_tar(), "tar")],
        &path,
        Some("/app"),
        None,
    );
    let dir = tempfile::tempdir().unwrap();
    let images = dir.path().join("images");
    let store = akbench_worker::image::Store::from_env(images.clone()).unwrap();
    let r = ImageRef::parse(&format!("{}/akbench/base@{digest}", reg.addr)).unwrap();
    let u = store.ensure(&r).unwrap();
    let image = Image {
        pinned: r.pinned(&digest),
        rootfs: u.rootfs.clone(),
        run: u.run.clone(),
        workdir: "/app".into(),
        user: (0, 0),
    };
    let w = world(&r);
    let (mut alone, mut with) = (Vec::new(), Vec::new());
    for i in 0..rounds {
        alone.push(once(dir.path(), &images, &image, None, 2 * i));
        with.push(once(dir.path(), &images, &image, Some(&w), 2 * i + 1));
    }
    let (a50, a90) = median(alone);
    let (w50, w90) = median(with);
    println!("rounds {rounds}");
    println!("one container (the environment alone)   median {a50:.1} ms  p90 {a90:.1} ms");
    println!("world of three services + environment   median {w50:.1} ms  p90 {w90:.1} ms");
    println!("ratio (world / one container): {:.2}", w50 / a50);
}
