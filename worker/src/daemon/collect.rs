//! The daemon's collection of its caches (issue 26): after an attempt ends, at most once a
//! minute and one at a time, the image store ([`crate::image::Store::gc`]) and then the
//! mirrors and baselines ([`crate::mirror::MirrorCache::gc`]) are brought within the bound
//! (`--cache-max-gb`), least recently used first, never an entry in use. Failures are
//! logged: a cache left over its bound never fails an attempt.

use crate::orchestrator::Orchestrator;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How often the caches are collected at most.
const EVERY: Duration = Duration::from_secs(60);

/// When the caches were last collected, and their bound.
#[derive(Debug)]
pub(super) struct Collector {
    max_bytes: Option<u64>,
    last: Mutex<Option<Instant>>,
}

impl Collector {
    /// A collector keeping the caches within `max_bytes` (`None`: never collects).
    pub fn new(max_bytes: Option<u64>) -> Self {
        Self {
            max_bytes,
            last: Mutex::new(None),
        }
    }

    /// Collects the caches unless they were collected less than a minute ago or a
    /// collection is running (blocking: call it off the async threads).
    pub fn after_attempt(&self, orch: &Orchestrator) {
        let Some(max) = self.max_bytes else {
            return;
        };
        let Ok(mut last) = self.last.try_lock() else {
            return;
        };
        if last.is_some_and(|t| t.elapsed() < EVERY) {
            return;
        }
        *last = Some(Instant::now());
        // The images first (the largest entries), then the mirrors and baselines within
        // what the images left of the bound.
        if orch.images.is_dir() {
            match crate::image::Store::from_env(orch.images.clone()) {
                Ok(store) => match store.gc(max) {
                    Ok(gone) if !gone.is_empty() => {
                        tracing::info!(images = ?gone, "collected images over the cache bound")
                    }
                    Ok(_) => {}
                    Err(e) => tracing::warn!("failed to collect the image cache: {e}"),
                },
                Err(e) => tracing::warn!("failed to collect the image cache: {e}"),
            }
        }
        let images = crate::runtime::disk_usage(std::slice::from_ref(&orch.images));
        match orch.cache.gc(max.saturating_sub(images)) {
            Ok(gone) if !gone.is_empty() => {
                tracing::info!(entries = ?gone, "collected mirrors and baselines over the cache bound")
            }
            Ok(_) => {}
            Err(e) => tracing::warn!("failed to collect the mirror cache: {e}"),
        }
    }
}
