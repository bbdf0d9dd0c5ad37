//! The coordinator's Prometheus metrics ([`Metrics`], `prometheus-client`), rendered by
//! `GET /metrics` in the Prometheus text format 0.0.4.
//!
//! Two kinds:
//! - **events** this process saw, updated where they happen: attempts finished by final
//!   state and cause class, retries, lease expiries, assignments, dispatch latency (claim
//!   to assignment sent) and scheduler database time per operation. Per replica: sum them.
//! - **state** read from the database at each scrape ([`Metrics::refresh`],
//!   `sql/metrics/snapshot.sql`): queue depth by run and provider route, live leases,
//!   workers connected and their free slots. Shared by every replica: take `max`, not `sum`.
//!
//! Every metric name starts with `akbench_`; [`NAMES`] lists them (the dashboards in
//! `deploy/observability/` may only query these).

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use akbench_core::telemetry::{cause_class, openmetrics_to_text};

use crate::store::{Store, StoreError};

const SNAPSHOT_SQL: &str = include_str!("../sql/metrics/snapshot.sql");

/// Upper bounds (seconds) of the dispatch latency histogram.
pub const DISPATCH_BUCKETS: [f64; 12] = [
    0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
];

/// Upper bounds (seconds) of the scheduler database time histogram.
pub const DB_BUCKETS: [f64; 12] = [
    0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0,
];

/// Every exported sample name (counters with `_total`, histograms with their base name).
pub const NAMES: [&str; 11] = [
    "akbench_attempts_finished_total",
    "akbench_retries_total",
    "akbench_lease_expiries_total",
    "akbench_assignments_total",
    "akbench_dispatch_latency_seconds",
    "akbench_scheduler_db_seconds",
    "akbench_control_seconds",
    "akbench_queue_depth",
    "akbench_live_leases",
    "akbench_workers_connected",
    "akbench_free_slots",
];

/// Labels of finished attempts.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AttemptLabels {
    /// The terminal lifecycle state (`completed`, `infrastructure_error`, ...).
    pub state: String,
    /// `akbench_core::telemetry::cause_class` of the state and cause.
    pub cause: String,
}

/// Labels of a connection listener's counters.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ListenerLabels {
    /// `grpc` or `http`.
    pub listener: String,
}

/// Labels of the queue depth.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct QueueLabels {
    /// The run key.
    pub run: String,
    /// The provider route (empty when the agent uses none).
    pub provider_route: String,
}

/// Labels of the control plane's answer time.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RpcLabels {
    /// The `Control` method (`GetStatus`).
    pub rpc: String,
}

/// Labels of the scheduler database time.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OpLabels {
    /// `claim`, `report`, `heartbeat`, `reap`, `register`.
    pub op: String,
}

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

fn db_histogram() -> Histogram {
    Histogram::new(DB_BUCKETS)
}

/// The coordinator's metrics (cheap to share behind an `Arc`; every update is atomic).
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    attempts: Family<AttemptLabels, Counter>,
    retries: Counter,
    lease_expiries: Counter,
    assignments: Counter,
    dispatch_latency: Histogram,
    db_seconds: HistogramFamily<OpLabels>,
    control_seconds: HistogramFamily<RpcLabels>,
    queue_depth: Family<QueueLabels, Gauge>,
    live_leases: Gauge,
    workers_connected: Gauge,
    free_slots: Gauge,
    connections_shed: Family<ListenerLabels, Counter>,
}

impl Default for Metrics {
    fn default() -> Self {
        let m = Metrics {
            registry: Registry::default(),
            attempts: Family::default(),
            retries: Counter::default(),
            lease_expiries: Counter::default(),
            assignments: Counter::default(),
            dispatch_latency: Histogram::new(DISPATCH_BUCKETS),
            db_seconds: Family::new_with_constructor(db_histogram),
            control_seconds: Family::new_with_constructor(db_histogram),
            queue_depth: Family::default(),
            live_leases: Gauge::default(),
            workers_connected: Gauge::default(),
            free_slots: Gauge::default(),
            connections_shed: Family::default(),
        };
        let mut r = Registry::default();
        r.register(
            "akbench_attempts_finished",
            "Attempts this coordinator saw finish, by terminal state and cause class",
            m.attempts.clone(),
        );
        r.register(
            "akbench_retries",
            "Trials re-queued for another attempt after an infrastructure error",
            m.retries.clone(),
        );
        r.register(
            "akbench_lease_expiries",
            "Leases taken back by the reaper",
            m.lease_expiries.clone(),
        );
        r.register(
            "akbench_assignments",
            "Attempts assigned to workers",
            m.assignments.clone(),
        );
        r.register(
            "akbench_dispatch_latency_seconds",
            "Time from the start of a claim to the assignment sent to the worker",
            m.dispatch_latency.clone(),
        );
        r.register(
            "akbench_scheduler_db_seconds",
            "Time of scheduler database operations, by operation",
            m.db_seconds.clone(),
        );
        r.register(
            "akbench_control_seconds",
            "Time this coordinator took to answer a control call, by method (the client's \
             process start and the network not included)",
            m.control_seconds.clone(),
        );
        r.register(
            "akbench_queue_depth",
            "Work items ready to claim in running runs, by run and provider route",
            m.queue_depth.clone(),
        );
        r.register("akbench_live_leases", "Live leases", m.live_leases.clone());
        r.register(
            "akbench_workers_connected",
            "Workers with an open session",
            m.workers_connected.clone(),
        );
        r.register(
            "akbench_free_slots",
            "Free slots of connected workers (slots minus live leases)",
            m.free_slots.clone(),
        );
        r.register(
            "akbench_connections_shed",
            "Connections refused at once because a listener held its most connections in \
             all or from one address (docs/limits.md, \"Connections\"), by listener",
            m.connections_shed.clone(),
        );
        Metrics { registry: r, ..m }
    }
}

impl Metrics {
    /// Counts one attempt that reached `state` for `cause` (free text, labelled by its
    /// class: `akbench_core::telemetry::cause_class`).
    pub fn attempt_finished(&self, state: &str, cause: &str) {
        self.attempts
            .get_or_create(&AttemptLabels {
                state: state.to_string(),
                cause: cause_class(state, cause).to_string(),
            })
            .inc();
    }

    /// The counter of connections `listener` shed (given to its connection guard).
    pub fn connections_shed(&self, listener: &str) -> Counter {
        self.connections_shed
            .get_or_create(&ListenerLabels {
                listener: listener.to_string(),
            })
            .clone()
    }

    /// Counts one trial re-queued for a new attempt.
    pub fn retried(&self) {
        self.retries.inc();
    }

    /// Counts one lease taken back by the reaper.
    pub fn lease_expired(&self) {
        self.lease_expiries.inc();
    }

    /// Records one assignment sent `latency` after its claim started.
    pub fn assigned(&self, latency: Duration) {
        self.assignments.inc();
        self.dispatch_latency.observe(latency.as_secs_f64());
    }

    /// Records the time of one scheduler database operation.
    pub fn db_time(&self, op: &'static str, took: Duration) {
        self.db_seconds
            .get_or_create(&OpLabels { op: op.to_string() })
            .observe(took.as_secs_f64());
    }

    /// Records the time this coordinator took to answer one `rpc` control call.
    pub fn control_time(&self, rpc: &'static str, took: Duration) {
        self.control_seconds
            .get_or_create(&RpcLabels {
                rpc: rpc.to_string(),
            })
            .observe(took.as_secs_f64());
    }

    /// Reads the state gauges from the database: one statement, and the queue depth off the
    /// run counters ([`crate::queue_depth`]).
    pub async fn refresh(&self, store: &Store) -> Result<(), StoreError> {
        let client = store.client().await?;
        let rows = client.query(SNAPSHOT_SQL, &[]).await?;
        let depth = crate::queue_depth::ready_by_route(&client).await?;
        self.queue_depth.clear();
        for ((run, provider_route), n) in depth {
            self.queue_depth
                .get_or_create(&QueueLabels {
                    run,
                    provider_route,
                })
                .set(i64::try_from(n).unwrap_or(i64::MAX));
        }
        for row in rows {
            let metric: &str = crate::rows::col(&row, "metric")?;
            let value: i64 = crate::rows::col(&row, "value")?;
            match metric {
                "live_leases" => {
                    self.live_leases.set(value);
                }
                "workers_connected" => {
                    self.workers_connected.set(value);
                }
                "free_slots" => {
                    self.free_slots.set(value);
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// The Prometheus text exposition (version 0.0.4, what `promtool check metrics` reads).
    pub fn render(&self) -> String {
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        openmetrics_to_text(&out)
    }
}

/// The content type of [`Metrics::render`].
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_move_the_rendered_samples() {
        let m = Metrics::default();
        let before = m.render();
        assert!(
            before.contains("akbench_retries_total 0"),
            "a counter starts at 0: {before}"
        );
        m.attempt_finished("completed", "");
        m.attempt_finished("completed", "");
        m.attempt_finished("infrastructure_error", "lease expired");
        m.attempt_finished("infrastructure_error", "session broke");
        m.attempt_finished("cancelled", "cancelled while the agent ran");
        m.retried();
        m.lease_expired();
        m.assigned(Duration::from_micros(1500));
        m.assigned(Duration::from_secs(9));
        m.db_time("claim", Duration::from_millis(3));
        m.control_time("GetStatus", Duration::from_millis(30));
        m.queue_depth
            .get_or_create(&QueueLabels {
                run: "r".into(),
                provider_route: String::new(),
            })
            .set(3);
        let text = m.render();
        for want in [
            "akbench_attempts_finished_total{state=\"completed\",cause=\"none\"} 2",
            "akbench_attempts_finished_total{state=\"infrastructure_error\",cause=\"lease_expired\"} 1",
            "akbench_attempts_finished_total{state=\"infrastructure_error\",cause=\"session_broke\"} 1",
            "akbench_attempts_finished_total{state=\"cancelled\",cause=\"cancelled\"} 1",
            "akbench_retries_total 1",
            "akbench_lease_expiries_total 1",
            "akbench_assignments_total 2",
            "akbench_dispatch_latency_seconds_bucket{le=\"0.002\"} 1",
            "akbench_dispatch_latency_seconds_bucket{le=\"+Inf\"} 2",
            "akbench_dispatch_latency_seconds_count 2",
            "akbench_scheduler_db_seconds_count{op=\"claim\"} 1",
            "akbench_control_seconds_bucket{le=\"0.025\",rpc=\"GetStatus\"} 0",
            "akbench_control_seconds_bucket{le=\"0.05\",rpc=\"GetStatus\"} 1",
            "akbench_queue_depth{run=\"r\",provider_route=\"\"} 3",
        ] {
            assert!(text.contains(want), "{want} in {text}");
        }
        for name in NAMES {
            let family = format!("# TYPE {name} ");
            assert!(text.contains(&family), "{family} in {text}");
        }
    }
}
