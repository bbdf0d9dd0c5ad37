//! Run budgets: the manifest's `execution.budget` cap (USD and/or tokens) and the pure rule
//! that decides, from what the run's finished attempts spent, whether new trials may start.
//! The coordinator and `sweep --local` both call [`verdict`]; trials that never start once it
//! says no are accounted `cancelled` with the reason [`BUDGET_REASON`].
//!
//! Tokens are input + output as `core::spend` counts them: uncached input tokens plus output
//! tokens (cached input tokens are not counted). A cost or a token count an attempt did not
//! report is never taken as zero: while a capped quantity is unknown for any finished
//! attempt, the spend against that cap is unknown and no new trial starts (the budget cannot
//! be shown to hold).
//!
//! Layer: above `record` and `manifest`; the cap type [`Budget`] is the manifest's (re-exported
//! here).

pub use crate::manifest::Budget;
use crate::observe::Observations;
use crate::record::RunRecord;
use serde::{Deserialize, Serialize};

/// The reason recorded on trials that never started because the budget was spent.
pub const BUDGET_REASON: &str = "budget";

/// What a run's finished attempts spent, for the budget.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Spent {
    /// Sum of the reported costs, USD.
    pub cost_usd: f64,
    /// Sum of the reported input + output tokens.
    pub tokens: u64,
    /// Finished attempts counted.
    pub attempts: u64,
    /// Of those, attempts that reported no cost.
    pub attempts_without_cost: u64,
    /// Of those, attempts that reported neither input nor output tokens.
    pub attempts_without_tokens: u64,
}

impl Spent {
    /// Adds one finished attempt's observations.
    pub fn add_attempt(&mut self, o: &Observations) {
        self.attempts += 1;
        match o.cost_usd {
            Some(c) => self.cost_usd += c,
            None => self.attempts_without_cost += 1,
        }
        match (o.input_tokens, o.output_tokens) {
            (None, None) => self.attempts_without_tokens += 1,
            (i, out) => {
                self.tokens = self
                    .tokens
                    .saturating_add(i.unwrap_or(0))
                    .saturating_add(out.unwrap_or(0))
            }
        }
    }

    /// Adds every attempt of one trial's record.
    pub fn add_record(&mut self, r: &RunRecord) {
        for a in &r.attempts {
            self.add_attempt(&a.observations);
        }
    }
}

/// Why no new trial may start.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Exhausted {
    /// The reported cost reached the USD cap.
    Usd {
        /// Spent.
        spent: f64,
        /// Cap.
        cap: f64,
    },
    /// The reported tokens reached the token cap.
    Tokens {
        /// Spent.
        spent: u64,
        /// Cap.
        cap: u64,
    },
    /// A USD cap, and finished attempts that reported no cost.
    CostUnknown {
        /// Attempts without a cost.
        attempts: u64,
    },
    /// A token cap, and finished attempts that reported no tokens.
    TokensUnknown {
        /// Attempts without tokens.
        attempts: u64,
    },
}

impl std::fmt::Display for Exhausted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Exhausted::Usd { spent, cap } => write!(f, "spent ${spent:.4} of ${cap:.4}"),
            Exhausted::Tokens { spent, cap } => write!(f, "spent {spent} of {cap} tokens"),
            Exhausted::CostUnknown { attempts } => write!(
                f,
                "cost unknown: {attempts} attempt(s) reported no cost, so the USD cap cannot be shown to hold"
            ),
            Exhausted::TokensUnknown { attempts } => write!(
                f,
                "tokens unknown: {attempts} attempt(s) reported no tokens, so the token cap cannot be shown to hold"
            ),
        }
    }
}

/// Whether new trials may start: `None` when they may, else why not. No cap: always `None`.
pub fn verdict(cap: Option<&Budget>, spent: &Spent) -> Option<Exhausted> {
    let cap = cap?;
    if let Some(usd) = cap.usd {
        if spent.attempts_without_cost > 0 {
            return Some(Exhausted::CostUnknown {
                attempts: spent.attempts_without_cost,
            });
        }
        if spent.cost_usd >= usd {
            return Some(Exhausted::Usd {
                spent: spent.cost_usd,
                cap: usd,
            });
        }
    }
    if let Some(tokens) = cap.tokens {
        if spent.attempts_without_tokens > 0 {
            return Some(Exhausted::TokensUnknown {
                attempts: spent.attempts_without_tokens,
            });
        }
        if spent.tokens >= tokens {
            return Some(Exhausted::Tokens {
                spent: spent.tokens,
                cap: tokens,
            });
        }
    }
    None
}

/// Spend against the cap, as the status projection shows it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BudgetStatus {
    /// The cap.
    pub cap: Budget,
    /// What finished attempts spent.
    pub spent: Spent,
    /// Why no new trial starts, when the budget is spent (or unknown).
    pub exhausted: Option<Exhausted>,
}

impl BudgetStatus {
    /// The status of `cap` given `spent`.
    pub fn of(cap: Budget, spent: Spent) -> BudgetStatus {
        BudgetStatus {
            cap,
            spent,
            exhausted: verdict(Some(&cap), &spent),
        }
    }

    /// One line: `budget: $0.0100 of $0.0200, 300 of 1000 tokens (open)`.
    pub fn line(&self) -> String {
        let mut parts = Vec::new();
        if let Some(u) = self.cap.usd {
            if self.spent.attempts_without_cost > 0 {
                parts.push(format!(
                    "cost unknown ({} attempt(s) reported none) of ${u:.4}",
                    self.spent.attempts_without_cost
                ));
            } else {
                parts.push(format!("${:.4} of ${u:.4}", self.spent.cost_usd));
            }
        }
        if let Some(t) = self.cap.tokens {
            if self.spent.attempts_without_tokens > 0 {
                parts.push(format!(
                    "tokens unknown ({} attempt(s) reported none) of {t} tokens",
                    self.spent.attempts_without_tokens
                ));
            } else {
                parts.push(format!("{} of {t} tokens", self.spent.tokens));
            }
        }
        let state = match &self.exhausted {
            None => "open".to_string(),
            Some(e) => format!("reached: {e}; no new trial starts"),
        };
        format!("budget: {} ({state})", parts.join(", "))
    }
}

#[cfg(test)]
mod tests;
