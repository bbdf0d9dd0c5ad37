//! The price of an agent's tokens, for a CLI that reports no cost of its own (Codex, Gemini
//! CLI, Qwen Code, or a priced model the CLI does not know): US dollars per million tokens of
//! each kind, from the agent's descriptor (`[price]`), and the cost akbench computes with it
//! from an attempt's token counts. A computed cost is marked so in the record
//! (`observations.cost_computed`), and a cost the agent reported is never replaced.

use crate::observe::Observations;
use serde::{Deserialize, Serialize};

/// `[price]` of an agent descriptor: US dollars per million tokens.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    /// Uncached input tokens.
    pub input_per_mtok: f64,
    /// Input tokens served from the provider's cache; unset: the input price.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_input_per_mtok: Option<f64>,
    /// Output tokens.
    pub output_per_mtok: f64,
}

impl Price {
    /// Every price finite and not negative, naming the field and the fix otherwise.
    pub fn check(&self) -> Result<(), String> {
        let fields = [
            ("input_per_mtok", Some(self.input_per_mtok)),
            ("cached_input_per_mtok", self.cached_input_per_mtok),
            ("output_per_mtok", Some(self.output_per_mtok)),
        ];
        for (name, value) in fields {
            if let Some(v) = value {
                if !v.is_finite() || v < 0.0 {
                    return Err(format!(
                        "field `price.{name}`: {v} is not a price; fix: US dollars per million tokens, 0 or more (e.g. {name} = 3.0)"
                    ));
                }
            }
        }
        Ok(())
    }

    /// The cost of `obs`'s tokens at this price: `None` when the input or output count is
    /// unknown (an unknown count is never priced as 0). Cached input tokens (0 when not
    /// reported) at their own price, else at the input price.
    pub fn cost(&self, obs: &Observations) -> Option<f64> {
        let input = obs.input_tokens? as f64;
        let output = obs.output_tokens? as f64;
        let cached = obs.cached_input_tokens.unwrap_or(0) as f64;
        let cached_price = self.cached_input_per_mtok.unwrap_or(self.input_per_mtok);
        let usd =
            (input * self.input_per_mtok + cached * cached_price + output * self.output_per_mtok)
                / 1_000_000.0;
        usd.is_finite().then_some(usd)
    }
}

/// Gives `obs` the cost computed at `price` when the agent reported none (marked
/// `cost_computed`); a reported cost, or no price, leaves `obs` as it is.
pub fn apply(obs: &mut Observations, price: Option<&Price>) {
    if obs.cost_usd.is_some() {
        return;
    }
    if let Some(cost) = price.and_then(|p| p.cost(obs)) {
        obs.cost_usd = Some(cost);
        obs.cost_computed = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obs(
        input: Option<u64>,
        cached: Option<u64>,
        output: Option<u64>,
        cost: Option<f64>,
    ) -> Observations {
        Observations {
            input_tokens: input,
            cached_input_tokens: cached,
            output_tokens: output,
            cost_usd: cost,
            cost_computed: false,
            ..Observations::default()
        }
    }

    const PRICE: Price = Price {
        input_per_mtok: 3.0,
        cached_input_per_mtok: Some(0.3),
        output_per_mtok: 15.0,
    };

    #[test]
    fn the_cost_is_computed_only_where_the_agent_reported_none() {
        let no_cached_price = Price {
            cached_input_per_mtok: None,
            ..PRICE
        };
        // (observations, price, expected cost, computed)
        let table: &[(Observations, Option<&Price>, Option<f64>, bool)] = &[
            // 1M input, 1M cached, 1M output.
            (
                obs(Some(1_000_000), Some(1_000_000), Some(1_000_000), None),
                Some(&PRICE),
                Some(18.3),
                true,
            ),
            (
                obs(Some(1_000_000), Some(1_000_000), Some(1_000_000), None),
                Some(&no_cached_price),
                Some(21.0),
                true,
            ),
            // Cached tokens not reported: counted as none.
            (
                obs(Some(2_000), None, Some(1_000), None),
                Some(&PRICE),
                Some(0.021),
                true,
            ),
            // An unknown count is never priced.
            (
                obs(None, Some(5), Some(1_000), None),
                Some(&PRICE),
                None,
                false,
            ),
            (
                obs(Some(1_000), Some(5), None, None),
                Some(&PRICE),
                None,
                false,
            ),
            // A reported cost stays, with or without a price.
            (
                obs(Some(1_000_000), None, Some(1_000_000), Some(0.5)),
                Some(&PRICE),
                Some(0.5),
                false,
            ),
            (
                obs(Some(1_000_000), None, Some(1_000_000), Some(0.5)),
                None,
                Some(0.5),
                false,
            ),
            // No price: nothing computed.
            (
                obs(Some(1_000_000), None, Some(1_000_000), None),
                None,
                None,
                false,
            ),
            // Zero tokens at a price: a cost of 0, computed.
            (
                obs(Some(0), Some(0), Some(0), None),
                Some(&PRICE),
                Some(0.0),
                true,
            ),
        ];
        for (i, (o, price, want, computed)) in table.iter().enumerate() {
            let mut o = o.clone();
            apply(&mut o, *price);
            match (o.cost_usd, want) {
                (Some(got), Some(want)) => {
                    assert!((got - want).abs() < 1e-9, "row {i}: {got} != {want}")
                }
                (got, want) => assert_eq!(got, *want, "row {i}"),
            }
            assert_eq!(o.cost_computed, *computed, "row {i}");
        }
    }

    #[test]
    fn a_price_that_is_not_one_is_refused_naming_the_field() {
        for (p, field) in [
            (
                Price {
                    input_per_mtok: -1.0,
                    ..PRICE
                },
                "price.input_per_mtok",
            ),
            (
                Price {
                    output_per_mtok: f64::NAN,
                    ..PRICE
                },
                "price.output_per_mtok",
            ),
            (
                Price {
                    cached_input_per_mtok: Some(f64::INFINITY),
                    ..PRICE
                },
                "price.cached_input_per_mtok",
            ),
        ] {
            let e = p.check().unwrap_err();
            assert!(e.contains(field) && e.contains("fix:"), "{e}");
        }
        assert_eq!(PRICE.check(), Ok(()));
    }

    #[test]
    fn a_descriptor_names_its_price_in_toml() {
        let p: Price = toml::from_str("input_per_mtok = 1.25\noutput_per_mtok = 10\n").unwrap();
        assert_eq!(
            (p.input_per_mtok, p.cached_input_per_mtok, p.output_per_mtok),
            (1.25, None, 10.0)
        );
        let e = toml::from_str::<Price>("input_per_mtok = 1\noutput_per_mtok = 2\ninput = 3\n")
            .unwrap_err();
        assert!(e.to_string().contains("unknown field"), "{e}");
    }
}
