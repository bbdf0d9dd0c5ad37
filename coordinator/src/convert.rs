//! Conversions from the control plane's values to the proto messages.

use akbench_core::dispatch::RunState;
use akbench_core::rates::Rates;
use akbench_proto::v1 as pb;

use crate::evidence::RunSummary;
use crate::status::{AgentStatus, RunStatus};

fn ms(t: chrono::DateTime<chrono::Utc>) -> i64 {
    t.timestamp_millis()
}

/// The proto `RunState` of a run state.
pub fn run_state(state: RunState) -> pb::RunState {
    match state {
        RunState::Planned => pb::RunState::Planned,
        RunState::Running => pb::RunState::Running,
        RunState::Cancelling => pb::RunState::Cancelling,
        RunState::Cancelled => pb::RunState::Cancelled,
        RunState::Finished => pb::RunState::Finished,
    }
}

/// The proto `RunSummary`.
pub fn summary(s: &RunSummary) -> pb::RunSummary {
    pb::RunSummary {
        run_id: s.run_id.to_string(),
        run_key: s.run_key.clone(),
        experiment: s.experiment.clone(),
        state: run_state(s.state) as i32,
        spec_digest: s.spec_digest.clone(),
        plan_digest: s.plan_digest.clone(),
        trial_count: s.trial_count,
        created_at_unix_ms: ms(s.created_at),
        started_at_unix_ms: s.started_at.map(ms).unwrap_or(0),
    }
}

/// The proto `Rates` (absent stays absent).
pub fn rates(r: &Rates) -> pb::Rates {
    pb::Rates {
        graded: r.graded,
        pass_rate: r.pass_rate,
        coverage: r.coverage,
        infrastructure_error_rate: r.infrastructure_error_rate,
        solve_rate: r.solve_rate,
    }
}

fn counts<'a>(m: impl IntoIterator<Item = (&'a String, &'a u64)>) -> Vec<pb::StateCount> {
    m.into_iter()
        .map(|(state, count)| pb::StateCount {
            state: state.clone(),
            count: *count,
        })
        .collect()
}

/// The proto `Spend` (absent stays absent).
pub fn spend(s: &akbench_core::spend::SpendTotals) -> pb::Spend {
    pb::Spend {
        input_tokens: s.spend.input_tokens,
        cached_input_tokens: s.spend.cached_input_tokens,
        output_tokens: s.spend.output_tokens,
        cost_usd: s.spend.cost_usd,
        trials_without_cost: s.trials_without_cost,
        cost_per_solved_usd: s.cost_per_solved_usd,
    }
}

/// The proto `Flagged`.
pub fn flagged(f: &akbench_core::grading::integrity::FlagCounts) -> pb::Flagged {
    pb::Flagged {
        tampered: f.tampered,
        withheld: f.withheld,
        unguarded: f.unguarded,
    }
}

/// The proto `Network`.
pub fn network(n: &akbench_core::report::network::NetworkCounts) -> pb::Network {
    pb::Network {
        graded_shared: n.graded_shared,
        graded_clean_room: n.graded_clean_room,
        undeclared_trials: n.undeclared_trials,
        undeclared_hosts: n.undeclared_hosts,
        fetch_failed_attempts: n.fetch_failed_attempts,
    }
}

fn agent(a: &AgentStatus) -> pb::AgentStatus {
    pb::AgentStatus {
        agent: a.agent.clone(),
        planned: a.planned,
        outcomes: counts(&a.outcomes),
        rates: Some(rates(&a.rates)),
        spend: Some(spend(&a.spend)),
        flagged: Some(flagged(&a.flagged)),
        network: Some(network(&a.network)),
    }
}

/// The proto `RunStatus`.
pub fn status(s: &RunStatus) -> pb::RunStatus {
    pb::RunStatus {
        run: Some(summary(&s.run)),
        planned: s.planned,
        queued: s.queued,
        running: s.running,
        prefetched: s.prefetched,
        finished: s.finished,
        phases: counts(&s.phases),
        outcomes: counts(&s.outcomes),
        retries: s.retries,
        workers: s.workers,
        as_of_unix_ms: ms(s.as_of),
        work_items: counts(&s.work_items),
        rates: Some(rates(&s.rates)),
        agents: s.agents.iter().map(agent).collect(),
        throughput_per_minute: s.throughput_per_minute,
        eta_unix_ms: s.eta.map(ms),
        spend: Some(spend(&s.spend)),
        flagged: Some(flagged(&s.flagged)),
        network: Some(network(&s.network)),
        steps: akbench_proto::steps::to_wire(&s.steps),
        budget: s.budget.as_ref().map(|b| b.line()),
        worker_labels: s.worker_labels.clone(),
        placement: s.placement.clone(),
        share: s.share.map(|h| pb::RunShare {
            priority: h.priority,
            weight: h.weight,
            live: h.live,
            of_live: h.of_live,
            entitled: h.entitled,
        }),
        paused_routes: s
            .paused_routes
            .iter()
            .map(|p| pb::PausedRoute {
                route: p.route.clone(),
                consecutive_failures: p.consecutive_failures,
                paused_until_unix_ms: ms(p.paused_until),
                last_error: p.last_error.clone(),
            })
            .collect(),
        recent_failures: s
            .recent_failures
            .iter()
            .map(|f| pb::RecentFailure {
                trial: f.trial.clone(),
                bucket: f.bucket.clone(),
                cause: f.cause.clone(),
                at_unix_ms: ms(f.at),
            })
            .collect(),
    }
}

/// The proto `TrialRow` of a viewer's compact trial row (what `ListTrialRows` streams).
pub fn trial_row(r: akbench_viewer::model::TrialRow) -> pb::TrialRow {
    pb::TrialRow {
        bucket: r.bucket.to_string(),
        terminal: r.state.as_str().to_string(),
        cause: r.cause,
        attempts: r.attempts,
        score: r.score,
        input_tokens: r.spend.input_tokens,
        cached_input_tokens: r.spend.cached_input_tokens,
        output_tokens: r.spend.output_tokens,
        cost_usd: r.spend.cost_usd,
        duration_ms: r.duration_ms,
        tampered: r.grading.tampered,
        withheld: r.grading.withheld,
        unguarded: r.grading.unguarded,
        ordinal: r.ordinal.unwrap_or_default(),
        // Set by `ListTrialRows` from the row's own column (not a viewer field).
        ended_unix_ms: None,
        key: r.key,
        agent: r.agent,
    }
}
