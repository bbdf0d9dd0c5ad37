//! What an agent's adapter read from its output ([`Observations`]): turns, tokens, cost, the
//! final message, the agent's own error and a provider failure. Recorded in every attempt of
//! a run record (`record` re-exports it under its old path). Layer: below `agent`, `record`,
//! `budget` and `spend`; it imports only `observe::provider`.

use serde::{Deserialize, Serialize};

/// What the agent's adapter read from its output.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Observations {
    /// Model turns.
    pub turns: Option<u64>,
    /// Input tokens (uncached).
    pub input_tokens: Option<u64>,
    /// Input tokens served from cache.
    pub cached_input_tokens: Option<u64>,
    /// Output tokens.
    pub output_tokens: Option<u64>,
    /// Cost in US dollars, as the agent reported it, or as akbench computed it from the
    /// tokens and the agent's `[price]` when it reported none (`cost_computed`).
    pub cost_usd: Option<f64>,
    /// `cost_usd` was computed by akbench from the token counts and the descriptor's
    /// `[price]` ([`crate::agent::price`]), not reported by the agent.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cost_computed: bool,
    /// The agent's final message.
    pub final_message: Option<String>,
    /// The model the agent reported using.
    pub model: Option<String>,
    /// Whether the agent reported an error of its own.
    pub reported_error: Option<bool>,
    /// The agent's own error text, when it reported an error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_text: Option<String>,
    /// The model provider failure the agent's stream ended in (an outage, 5xx, 429 or a
    /// refused credential that the agent did not recover from).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_error: Option<super::ProviderError>,
}
