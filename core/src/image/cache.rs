//! The bounded caches' collection rule: least recently used first, never an entry in use,
//! until the cache fits its bound. Used for the worker's images (keyed by manifest digest)
//! and for its mirrors and baselines (keyed by their folder).

use std::collections::BTreeSet;

/// One cache entry (an unpacked image, a mirror, a baseline).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Its key (an image's manifest digest; a mirror's or baseline's folder).
    pub digest: String,
    /// Bytes on disk (its blobs and unpacked root).
    pub bytes: u64,
    /// When it was last used (any monotone stamp, e.g. seconds since the epoch).
    pub last_used: u64,
}

/// The digests to remove so that the cache holds at most `max_bytes`: oldest use first,
/// skipping `in_use`. When the images in use alone exceed the bound, every other image is
/// removed and the bound is exceeded (an image in use is never removed).
pub fn victims(entries: &[Entry], in_use: &BTreeSet<String>, max_bytes: u64) -> Vec<String> {
    let mut total: u64 = entries.iter().map(|e| e.bytes).sum();
    let mut order: Vec<&Entry> = entries
        .iter()
        .filter(|e| !in_use.contains(&e.digest))
        .collect();
    order.sort_by(|a, b| a.last_used.cmp(&b.last_used).then(a.digest.cmp(&b.digest)));
    let mut out = Vec::new();
    for e in order {
        if total <= max_bytes {
            break;
        }
        total = total.saturating_sub(e.bytes);
        out.push(e.digest.clone());
    }
    out
}
