//! Process metrics in the Prometheus text format. [`Metrics`] is a set of atomics that the
//! scheduler and the services update; `/metrics` renders whatever they hold.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Terminal outcomes of attempts, in the order of [`Metrics::attempts_by_outcome`].
pub const OUTCOMES: [&str; 8] = [
    "completed",
    "failed",
    "timeout",
    "cancelled",
    "infrastructure_error",
    "invalid_configuration",
    "evaluation_error",
    "not_graded",
];

/// Upper bounds (seconds) of the dispatch latency histogram buckets.
pub const DISPATCH_BUCKETS: [f64; 10] =
    [0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0];

/// Counters and gauges of the coordinator.
#[derive(Debug, Default)]
pub struct Metrics {
    /// Gauge: work items ready to claim.
    pub queue_depth: AtomicU64,
    /// Gauge: live leases.
    pub live_leases: AtomicU64,
    /// Counters: attempts finished, by [`OUTCOMES`] index.
    pub attempts_by_outcome: [AtomicU64; 8],
    /// Counter: leases expired by the reaper.
    pub lease_expiries: AtomicU64,
    /// Counter: attempts retried after infrastructure errors.
    pub retries: AtomicU64,
    /// Gauge: workers with an open session.
    pub workers_connected: AtomicU64,
    /// Histogram of the time from claim to assignment sent: counts per bucket (cumulative
    /// buckets are computed when rendering), plus the overflow bucket.
    pub dispatch_latency: [AtomicU64; 11],
    /// Sum of the observed dispatch latencies, microseconds.
    pub dispatch_latency_sum_us: AtomicU64,
}

impl Metrics {
    /// Counts one finished attempt; unknown outcomes are ignored.
    pub fn attempt_finished(&self, outcome: &str) {
        if let Some(i) = OUTCOMES.iter().position(|o| *o == outcome) {
            self.attempts_by_outcome[i].fetch_add(1, Relaxed);
        }
    }

    /// Records one dispatch latency.
    pub fn observe_dispatch(&self, latency: std::time::Duration) {
        let secs = latency.as_secs_f64();
        let i = DISPATCH_BUCKETS
            .iter()
            .position(|b| secs <= *b)
            .unwrap_or(DISPATCH_BUCKETS.len());
        self.dispatch_latency[i].fetch_add(1, Relaxed);
        self.dispatch_latency_sum_us.fetch_add(
            u64::try_from(latency.as_micros()).unwrap_or(u64::MAX),
            Relaxed,
        );
    }

    /// The Prometheus text exposition (version 0.0.4).
    pub fn render(&self) -> String {
        let mut out = String::new();
        let mut one = |name: &str, kind: &str, help: &str, value: u64| {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}"
            );
        };
        one(
            "akbench_queue_depth",
            "gauge",
            "Work items ready to claim.",
            self.queue_depth.load(Relaxed),
        );
        one(
            "akbench_live_leases",
            "gauge",
            "Live leases.",
            self.live_leases.load(Relaxed),
        );
        one(
            "akbench_lease_expiries_total",
            "counter",
            "Leases expired by the reaper.",
            self.lease_expiries.load(Relaxed),
        );
        one(
            "akbench_retries_total",
            "counter",
            "Attempts retried after infrastructure errors.",
            self.retries.load(Relaxed),
        );
        one(
            "akbench_workers_connected",
            "gauge",
            "Workers with an open session.",
            self.workers_connected.load(Relaxed),
        );
        let _ = writeln!(out, "# HELP akbench_attempts_total Attempts finished, by outcome.\n# TYPE akbench_attempts_total counter");
        for (name, n) in OUTCOMES.iter().zip(&self.attempts_by_outcome) {
            let _ = writeln!(
                out,
                "akbench_attempts_total{{outcome=\"{name}\"}} {}",
                n.load(Relaxed)
            );
        }
        let _ = writeln!(out, "# HELP akbench_dispatch_latency_seconds Time from claim to assignment sent.\n# TYPE akbench_dispatch_latency_seconds histogram");
        let mut cumulative = 0;
        for (bound, n) in DISPATCH_BUCKETS.iter().zip(&self.dispatch_latency) {
            cumulative += n.load(Relaxed);
            let _ = writeln!(
                out,
                "akbench_dispatch_latency_seconds_bucket{{le=\"{bound}\"}} {cumulative}"
            );
        }
        cumulative += self.dispatch_latency[DISPATCH_BUCKETS.len()].load(Relaxed);
        let _ = writeln!(
            out,
            "akbench_dispatch_latency_seconds_bucket{{le=\"+Inf\"}} {cumulative}"
        );
        let sum = self.dispatch_latency_sum_us.load(Relaxed) as f64 / 1e6;
        let _ = writeln!(out, "akbench_dispatch_latency_seconds_sum {sum}\nakbench_dispatch_latency_seconds_count {cumulative}");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counters_and_a_cumulative_histogram() {
        let m = Metrics::default();
        m.queue_depth.store(7, Relaxed);
        m.attempt_finished("not_graded");
        m.attempt_finished("bogus");
        m.observe_dispatch(std::time::Duration::from_millis(3));
        m.observe_dispatch(std::time::Duration::from_secs(5));
        let text = m.render();
        assert!(text.contains("akbench_queue_depth 7"), "{text}");
        assert!(text.contains("akbench_attempts_total{outcome=\"not_graded\"} 1"));
        assert!(text.contains("akbench_dispatch_latency_seconds_bucket{le=\"0.005\"} 1"));
        assert!(text.contains("akbench_dispatch_latency_seconds_bucket{le=\"+Inf\"} 2"));
        assert!(text.contains("akbench_dispatch_latency_seconds_count 2"));
    }
}
