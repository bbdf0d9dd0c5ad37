//! The mirror and baseline caches' collection on real git repositories: over its bound the
//! cache loses the least recently used entry first, never one in use (a baseline an attempt
//! holds, a locked mirror), and a later attempt rebuilds what was collected.

mod common;

use akbench_core::lifecycle::State;
use akbench_worker::mirror::MirrorCache;
use akbench_worker::orchestrator::Silent;
use akbench_worker::process::CancelToken;
use akbench_worker::runtime::disk_usage;
use common::{corpus, TEST_SH};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// Sets an entry's last use (its lock file's modification time) to `secs` after the epoch.
fn stamp(entry: &Path, secs: u64) {
    std::fs::OpenOptions::new()
        .write(true)
        .open(entry.with_extension("lock"))
        .unwrap()
        .set_modified(SystemTime::UNIX_EPOCH + Duration::from_secs(secs))
        .unwrap();
}

fn size(entries: &[&PathBuf]) -> u64 {
    entries
        .iter()
        .map(|p| disk_usage(std::slice::from_ref(*p)))
        .sum()
}

/// Names under the cache that are left by a collection (none once it returned).
fn trash(cache: &MirrorCache) -> Vec<String> {
    [cache.root().to_path_buf(), cache.baselines_root()]
        .iter()
        .flat_map(|d| std::fs::read_dir(d).unwrap().flatten())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".trash-"))
        .collect()
}

fn oracle_solves(c: &common::Corpus, name: &str) {
    let (t, a) = (c.task("answer"), c.agent("oracle"));
    let out = c
        .orchestrator()
        .run_trial(
            &c.request(&t, &a, name),
            &akbench_core::dispatch::Backoff::NONE,
            &Silent,
            &CancelToken::new(),
        )
        .unwrap();
    assert_eq!(out.record.outcome.state, State::Completed, "{name}");
    assert_eq!(out.record.outcome.ok, Some(true), "{name}");
}

#[test]
fn over_its_bound_the_cache_loses_the_least_recently_used_never_one_in_use() {
    let c = corpus();
    c.add_task("first", &c.first_commit, TEST_SH, "");
    let cache = c.orchestrator().cache;
    let (answer, first) = (c.task("answer"), c.task("first"));
    let dir = |b: &akbench_worker::baseline::Baseline| b.repo.parent().unwrap().to_path_buf();
    let a = dir(&cache.baseline(&answer, true).unwrap());
    let f = dir(&cache.baseline(&first, true).unwrap());
    let mirror = cache.path_for(answer.repo.as_ref().unwrap());
    assert!(a.is_dir() && f.is_dir() && mirror.is_dir());
    // Used longest ago: the mutated baseline, then the other, then the mirror.
    stamp(&a, 1_000);
    stamp(&f, 2_000);
    stamp(&mirror, 3_000);
    // Left by a collection that crashed half way: removed, never counted.
    std::fs::create_dir_all(cache.baselines_root().join("0a.trash-x/repo")).unwrap();

    // Within its bound: nothing goes.
    let total = size(&[&a, &f, &mirror]);
    assert_eq!(cache.gc(total).unwrap(), Vec::<PathBuf>::new());
    assert!(trash(&cache).is_empty(), "{:?}", trash(&cache));
    // One byte over: the least recently used goes, alone.
    assert_eq!(cache.gc(total - 1).unwrap(), vec![a.clone()]);
    assert!(!a.exists() && f.is_dir() && mirror.is_dir());

    // In use (a baseline an attempt holds, a mirror being fetched or read): never removed,
    // even when the bound is zero.
    let held = cache.baseline(&first, true).unwrap();
    let fetching = cache.lock(&mirror).unwrap();
    assert_eq!(cache.gc(0).unwrap(), Vec::<PathBuf>::new());
    assert!(f.is_dir() && mirror.is_dir());
    drop(fetching);
    assert_eq!(cache.gc(0).unwrap(), vec![mirror.clone()]);
    assert!(f.is_dir() && !mirror.exists());
    drop(held);
    assert_eq!(cache.gc(0).unwrap(), vec![f.clone()]);
    assert!(trash(&cache).is_empty(), "{:?}", trash(&cache));

    // A later attempt rebuilds the mirror and the baseline and works.
    oracle_solves(&c, "after-collection");
    assert!(a.is_dir() && mirror.is_dir());
    // Everything collected once more (nothing in use after the attempt), and again it works.
    let mut gone = cache.gc(0).unwrap();
    gone.sort();
    let mut want = vec![a.clone(), mirror.clone()];
    want.sort();
    assert_eq!(gone, want);
    oracle_solves(&c, "after-second-collection");
}
