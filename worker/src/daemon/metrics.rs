//! The worker's Prometheus metrics ([`WorkerMetrics`], `prometheus-client`) and the small
//! `/metrics` listener `akbench-worker --metrics-listen ADDR` starts ([`serve`]).
//!
//! Updated from each finished attempt's record ([`WorkerMetrics::observe`]): attempts by
//! final state and cause class, phase durations (the record's `timings_ms`), workspace
//! creation time (the `creating_workspace` phase), tokens and cost by agent, provider errors
//! (a model provider failure as the adapters classify it) by provider route; plus attempts running now
//! and the worker's slots. Names start with `akbench_worker_` ([`NAMES`]).

use std::net::SocketAddr;

use akbench_core::lifecycle::State;
use akbench_core::record::AttemptRecord;
use akbench_core::telemetry::{cause_class, openmetrics_to_text};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// Upper bounds (seconds) of the phase and workspace histograms.
pub const PHASE_BUCKETS: [f64; 14] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 120.0, 600.0,
];

/// Every exported sample name (counters with `_total`, histograms by their base name).
pub const NAMES: [&str; 8] = [
    "akbench_worker_attempts_finished_total",
    "akbench_worker_phase_seconds",
    "akbench_worker_workspace_seconds",
    "akbench_worker_tokens_total",
    "akbench_worker_cost_usd_total",
    "akbench_worker_provider_errors_total",
    "akbench_worker_attempts_running",
    "akbench_worker_slots",
];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AttemptLabels {
    state: String,
    cause: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PhaseLabels {
    phase: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TokenLabels {
    agent: String,
    kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AgentLabels {
    agent: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RouteLabels {
    provider_route: String,
}

fn phase_histogram() -> Histogram {
    Histogram::new(PHASE_BUCKETS)
}

/// What an attempt ran as, for its labels.
#[derive(Debug, Clone, Default)]
pub struct AttemptLabelsIn {
    /// The agent condition's label.
    pub agent: String,
    /// The provider route (empty when none).
    pub provider_route: String,
}

/// The worker's metrics.
#[derive(Debug)]
pub struct WorkerMetrics {
    registry: Registry,
    attempts: Family<AttemptLabels, Counter>,
    phases: Family<PhaseLabels, Histogram, fn() -> Histogram>,
    workspace: Histogram,
    tokens: Family<TokenLabels, Counter>,
    cost: Family<AgentLabels, Counter<f64, AtomicU64>>,
    provider_errors: Family<RouteLabels, Counter>,
    running: Gauge,
    slots: Gauge,
}

impl Default for WorkerMetrics {
    fn default() -> Self {
        let m = WorkerMetrics {
            registry: Registry::default(),
            attempts: Family::default(),
            phases: Family::new_with_constructor(phase_histogram),
            workspace: phase_histogram(),
            tokens: Family::default(),
            cost: Family::default(),
            provider_errors: Family::default(),
            running: Gauge::default(),
            slots: Gauge::default(),
        };
        let mut r = Registry::default();
        r.register(
            "akbench_worker_attempts_finished",
            "Attempts this worker finished, by terminal state and cause class",
            m.attempts.clone(),
        );
        r.register(
            "akbench_worker_phase_seconds",
            "Time attempts spent in each lifecycle phase",
            m.phases.clone(),
        );
        r.register(
            "akbench_worker_workspace_seconds",
            "Time to create an attempt's workspace (the creating_workspace phase)",
            m.workspace.clone(),
        );
        r.register(
            "akbench_worker_tokens",
            "Tokens agents reported, by agent and kind (input, cached_input, output)",
            m.tokens.clone(),
        );
        r.register(
            "akbench_worker_cost_usd",
            "Cost in US dollars agents reported, by agent",
            m.cost.clone(),
        );
        r.register(
            "akbench_worker_provider_errors",
            "Attempts that ended on a model provider failure (outage, 5xx, 429, refused credential), by provider route",
            m.provider_errors.clone(),
        );
        r.register(
            "akbench_worker_attempts_running",
            "Attempts running on this worker now",
            m.running.clone(),
        );
        r.register(
            "akbench_worker_slots",
            "Attempts this worker runs at once",
            m.slots.clone(),
        );
        WorkerMetrics { registry: r, ..m }
    }
}

impl WorkerMetrics {
    /// Sets the slots gauge.
    pub fn set_slots(&self, slots: u32) {
        self.slots.set(i64::from(slots));
    }

    /// An attempt started running (until [`WorkerMetrics::observe`]).
    pub fn started(&self) {
        self.running.inc();
    }

    /// An attempt that [`WorkerMetrics::started`] ended with `record`.
    pub fn ended(&self, record: &AttemptRecord, labels: &AttemptLabelsIn) {
        self.running.dec();
        self.observe(record, labels);
    }

    /// Counts a finished attempt's record.
    pub fn observe(&self, record: &AttemptRecord, labels: &AttemptLabelsIn) {
        self.attempts
            .get_or_create(&AttemptLabels {
                state: record.state.as_str().to_string(),
                cause: cause_class(record.state.as_str(), record.cause.as_deref().unwrap_or(""))
                    .to_string(),
            })
            .inc();
        for (phase, ms) in &record.timings_ms {
            let secs = *ms as f64 / 1000.0;
            self.phases
                .get_or_create(&PhaseLabels {
                    phase: phase.as_str().to_string(),
                })
                .observe(secs);
            if *phase == State::CreatingWorkspace {
                self.workspace.observe(secs);
            }
        }
        let o = &record.observations;
        for (kind, n) in [
            ("input", o.input_tokens),
            ("cached_input", o.cached_input_tokens),
            ("output", o.output_tokens),
        ] {
            if let Some(n) = n {
                self.tokens
                    .get_or_create(&TokenLabels {
                        agent: labels.agent.clone(),
                        kind: kind.to_string(),
                    })
                    .inc_by(n);
            }
        }
        if let Some(c) = o.cost_usd.filter(|c| c.is_finite() && *c >= 0.0) {
            self.cost
                .get_or_create(&AgentLabels {
                    agent: labels.agent.clone(),
                })
                .inc_by(c);
        }
        // The adapters' classification of a model provider failure (outage, 5xx, 429,
        // refused credential), not any error the agent reported of its own.
        if o.provider_error.is_some() {
            self.provider_errors
                .get_or_create(&RouteLabels {
                    provider_route: labels.provider_route.clone(),
                })
                .inc();
        }
    }

    /// The Prometheus text exposition (version 0.0.4).
    pub fn render(&self) -> String {
        let mut out = String::new();
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        openmetrics_to_text(&out)
    }
}

/// Binds `addr` for `/metrics`; [`serve`] then answers on it.
pub async fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(addr).await
}

/// Answers every HTTP request on `listener`: `GET /metrics` with [`WorkerMetrics::render`],
/// anything else 404. One request per connection (HTTP/1.0 style, `Connection: close`).
pub async fn serve(listener: TcpListener, metrics: std::sync::Arc<WorkerMetrics>) {
    loop {
        let Ok((mut conn, _)) = listener.accept().await else {
            continue;
        };
        let metrics = metrics.clone();
        tokio::spawn(async move {
            let mut buf = vec![0u8; 4096];
            let mut n = 0;
            // Read up to the end of the request head (or 4 KiB).
            while n < buf.len() {
                match conn.read(&mut buf[n..]).await {
                    Ok(0) | Err(_) => break,
                    Ok(k) => n += k,
                }
                if buf[..n].windows(4).any(|w| w == b"\r\n\r\n") {
                    break;
                }
            }
            let head = String::from_utf8_lossy(&buf[..n]);
            let path = head.split_whitespace().nth(1).unwrap_or("");
            let (status, ctype, body) = if head.starts_with("GET ")
                && (path == "/metrics" || path.starts_with("/metrics?"))
            {
                (
                    "200 OK",
                    "text/plain; version=0.0.4; charset=utf-8",
                    metrics.render(),
                )
            } else {
                ("404 Not Found", "text/plain", "not found\n".to_string())
            };
            let response = format!(
                "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = conn.write_all(response.as_bytes()).await;
            let _ = conn.shutdown().await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use akbench_core::record::Observations;
    use uuid::Uuid;

    fn record(state: State, cause: &str) -> AttemptRecord {
        let mut r = crate::daemon::runner::synthetic_record(
            "w",
            &Uuid::now_v7().to_string(),
            "t/a1",
            1,
            state,
            cause.into(),
        );
        r.timings_ms.insert(State::CreatingWorkspace, 120);
        r.timings_ms.insert(State::Executing, 3_000);
        r.observations = Observations {
            input_tokens: Some(100),
            output_tokens: Some(7),
            cost_usd: Some(0.25),
            cost_computed: false,
            reported_error: Some(true),
            provider_error: Some(akbench_core::observe::ProviderError {
                kind: akbench_core::observe::ProviderErrorKind::RateLimited,
                status: Some(429),
                message: "rate limited".into(),
                failures: 3,
            }),
            ..Observations::default()
        };
        r
    }

    #[test]
    fn a_finished_record_moves_every_family() {
        let m = WorkerMetrics::default();
        m.set_slots(2);
        let labels = AttemptLabelsIn {
            agent: "oracle".into(),
            provider_route: "anthropic".into(),
        };
        m.started();
        m.ended(
            &record(State::Failed, "the agent exited with code 1"),
            &labels,
        );
        m.started();
        let text = m.render();
        for want in [
            "akbench_worker_attempts_finished_total{state=\"failed\",cause=\"agent_exit\"} 1",
            "akbench_worker_phase_seconds_count{phase=\"executing\"} 1",
            "akbench_worker_phase_seconds_bucket{le=\"5.0\",phase=\"executing\"} 1",
            "akbench_worker_phase_seconds_bucket{le=\"2.5\",phase=\"executing\"} 0",
            "akbench_worker_workspace_seconds_count 1",
            "akbench_worker_tokens_total{agent=\"oracle\",kind=\"input\"} 100",
            "akbench_worker_tokens_total{agent=\"oracle\",kind=\"output\"} 7",
            "akbench_worker_cost_usd_total{agent=\"oracle\"} 0.25",
            "akbench_worker_provider_errors_total{provider_route=\"anthropic\"} 1",
            "akbench_worker_attempts_running 1",
            "akbench_worker_slots 2",
        ] {
            assert!(text.contains(want), "{want} in {text}");
        }
        for name in NAMES {
            assert!(
                text.contains(&format!("# TYPE {name} ")),
                "{name} in {text}"
            );
        }
    }

    #[test]
    fn an_error_the_agent_reported_of_its_own_is_not_a_provider_error() {
        let m = WorkerMetrics::default();
        let labels = AttemptLabelsIn {
            agent: "a".into(),
            provider_route: "openai".into(),
        };
        let mut r = record(State::Failed, "the agent reported an error");
        r.observations.provider_error = None;
        m.ended(&r, &labels);
        assert!(
            !m.render()
                .contains("akbench_worker_provider_errors_total{provider_route=\"openai\"}"),
            "{}",
            m.render()
        );
    }
}
