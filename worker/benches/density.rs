//! Worker density (issue 30): one `akbench-worker` process runs many attempts at once in the
//! hardened sandbox (`runtime: sandbox`) while their agents wait, as real agents wait on a
//! slow model provider; the harness's own CPU and memory per attempt are read from the
//! worker process (`/proc/<pid>/stat` utime + stime: the worker's threads only, never its
//! children's; `VmRSS` sampled every 100 ms). The coordinator (scheduler + `Workers`
//! service) runs in this process on a private PostgreSQL, so its CPU is not counted.
//!
//!   cargo bench -p akbench-worker --bench density
//!
//! Environment: `DENSITY_ATTEMPTS` (default 64, as many slots), `DENSITY_WAIT_S` (default
//! 20: how long each agent waits in the sandbox, in `DENSITY_STEPS` sleeps, default 5, one
//! per simulated provider turn). The task is the tests' one-file repository, graded by its
//! shell test. Takes about `DENSITY_WAIT_S` + the start of 64 sandboxes + grading: ~1 min.

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "../tests/coord/mod.rs"]
mod coord;

use coord::{work_items_in, Coord};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The worker's own CPU time so far (user + system, its threads only), in seconds.
fn cpu_secs(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command name (which is in parentheses and may hold spaces).
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    let ticks: u64 = f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    ticks as f64 / hz
}

/// The worker's resident memory now, in MiB.
fn rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0);
    kb / 1024.0
}

fn worker(coord: &Coord, c: &common::Corpus, slots: u64) -> Child {
    Command::new(env!("CARGO_BIN_EXE_akbench-worker"))
        .arg("--coordinator")
        .arg(coord.url().to_string())
        .args(["--slots", &slots.to_string(), "--worker-id", "density"])
        .args(["--grace", "30"])
        .arg("--cache")
        .arg(c.root().join("cache"))
        .arg("--out")
        .arg(c.root().join("out"))
        .arg("--tasks-root")
        .arg(c.tasks())
        .arg("--agents-root")
        .arg(c.agents())
        .env("AKBENCH_LOG", "error")
        .spawn()
        .unwrap()
}

/// Trials of `trials` whose attempt has finished with its record stored.
async fn done(coord: &Coord, trials: &[uuid::Uuid]) -> i64 {
    coord
        .client()
        .await
        .query_one(
            "SELECT count(*) FROM attempts a JOIN submissions USING (attempt_id) \
             WHERE a.trial_id = ANY($1) AND a.finished_at IS NOT NULL",
            &[&trials],
        )
        .await
        .unwrap()
        .get(0)
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let n = env_u64("DENSITY_ATTEMPTS", 64);
    let wait_s = env_u64("DENSITY_WAIT_S", 20);
    let steps = env_u64("DENSITY_STEPS", 5).max(1);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let coord = Coord::start(Duration::from_secs(30)).await;
        let c = common::corpus();
        let step = wait_s as f64 / steps as f64;
        c.add_agent(
            "waiting",
            "adapter = \"scripted\"\nscript = \"waiting.sh\"\n",
            Some(&format!(
                "for i in $(seq {steps}); do sleep {step}; done\nexit 0\n"
            )),
        );
        c.add_agent(
            "quick",
            "adapter = \"scripted\"\nscript = \"quick.sh\"\n",
            Some("exit 0\n"),
        );
        let mut w = worker(&coord, &c, n);
        let pid = w.id();
        // Warm the mirror cache (one quick attempt), then read the idle worker.
        let warm = work_items_in(&c, "quick", 1, true, "sandbox");
        let (_, t) = coord.enqueue_items(&warm).await;
        let t0 = Instant::now();
        while done(&coord, &t).await < 1 {
            assert!(
                t0.elapsed() < Duration::from_secs(300),
                "warm-up attempt did not finish"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let idle_rss = rss_mib(pid);

        let items = work_items_in(&c, "waiting", u32::try_from(n).unwrap(), true, "sandbox");
        let cpu0 = cpu_secs(pid);
        let started = Instant::now();
        let (_, trials) = coord.enqueue_items(&items).await;
        let mut peak_rss = idle_rss;
        let mut all_running: Option<Duration> = None;
        let client = coord.client().await;
        loop {
            peak_rss = peak_rss.max(rss_mib(pid));
            if all_running.is_none() {
                let executing: i64 = client
                    .query_one(
                        "SELECT count(*) FROM attempts WHERE trial_id = ANY($1) \
                         AND state = 'executing'",
                        &[&trials],
                    )
                    .await
                    .unwrap()
                    .get(0);
                if executing as u64 == n {
                    all_running = Some(started.elapsed());
                }
            }
            if done(&coord, &trials).await as u64 == n {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(wait_s + 600),
                "the attempts did not finish"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let wall = started.elapsed().as_secs_f64();
        let cpu = cpu_secs(pid) - cpu0;
        let rows = client
            .query(
                "SELECT a.terminal_state, \
                 extract(epoch FROM (a.finished_at - a.started_at))::float8 \
                 FROM attempts a WHERE a.trial_id = ANY($1)",
                &[&trials],
            )
            .await
            .unwrap();
        let bad: Vec<String> = rows
            .iter()
            .filter_map(|r| r.get::<_, Option<String>>(0))
            .filter(|s| s != "completed")
            .collect();
        assert!(bad.is_empty(), "every attempt completed: {bad:?}");
        let attempt_secs: f64 = rows.iter().map(|r| r.get::<_, f64>(1)).sum();
        // What ran the agents, as each worker observed it (never copied from the plan).
        let sandboxed: i64 = client
            .query_one(
                "SELECT count(*) FROM attempts a JOIN submissions s USING (attempt_id) \
                 WHERE a.trial_id = ANY($1) \
                 AND s.record -> 'agent_process' -> 'runtime' ->> 'name' = 'sandbox' \
                 AND (s.record -> 'agent_process' -> 'runtime' ->> 'isolated')::bool",
                &[&trials],
            )
            .await
            .unwrap()
            .get(0);
        assert_eq!(
            sandboxed as u64, n,
            "every agent ran isolated in the sandbox"
        );
        let _ = Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status();
        let _ = w.wait();

        println!(
            "density: {n} sandboxed attempts at once on one worker, each agent waiting {wait_s} s \
             in {steps} steps; all {n} executing at once after {}; done in {wall:.1} s",
            all_running.map_or("never".to_string(), |d| format!("{:.1} s", d.as_secs_f64()))
        );
        println!(
            "harness CPU (worker process, user+sys, not its children): {cpu:.2} s in all, \
             {:.0} ms per attempt, {:.2}% of a core per running attempt \
             ({:.1} attempt-seconds); the whole worker {:.1}% of a core over the run",
            cpu / n as f64 * 1000.0,
            cpu / attempt_secs * 100.0,
            attempt_secs,
            cpu / wall * 100.0
        );
        println!(
            "harness memory (worker RSS): idle {idle_rss:.1} MiB, peak {peak_rss:.1} MiB, \
             {:.2} MiB per attempt",
            (peak_rss - idle_rss) / n as f64
        );
    });
}
