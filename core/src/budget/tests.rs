use super::*;

fn obs(cost: Option<f64>, input: Option<u64>, output: Option<u64>) -> Observations {
    Observations {
        cost_usd: cost,
        input_tokens: input,
        cached_input_tokens: Some(1_000_000),
        output_tokens: output,
        ..Observations::default()
    }
}

fn cap(usd: Option<f64>, tokens: Option<u64>) -> Budget {
    Budget { usd, tokens }
}

/// Cap, the finished attempts' observations, the verdict.
type Case = (Option<Budget>, Vec<Observations>, Option<Exhausted>);

#[test]
fn verdict_table() {
    let cases: Vec<Case> = vec![
        // No cap: always open, whatever was spent or left unreported.
        (
            None,
            vec![obs(None, None, None), obs(Some(99.0), Some(1), Some(1))],
            None,
        ),
        // Nothing finished yet: open.
        (Some(cap(Some(1.0), Some(10))), vec![], None),
        // Below the USD cap: open.
        (
            Some(cap(Some(1.0), None)),
            vec![obs(Some(0.4), None, None), obs(Some(0.5), None, None)],
            None,
        ),
        // Exactly at the cap: reached.
        (
            Some(cap(Some(1.0), None)),
            vec![obs(Some(0.5), None, None), obs(Some(0.5), None, None)],
            Some(Exhausted::Usd {
                spent: 1.0,
                cap: 1.0,
            }),
        ),
        // An attempt without cost under a USD cap: unknown, never counted as zero.
        (
            Some(cap(Some(1.0), None)),
            vec![obs(Some(0.1), None, None), obs(None, Some(5), Some(5))],
            Some(Exhausted::CostUnknown { attempts: 1 }),
        ),
        // Unreported cost does not matter to a token-only cap.
        (
            Some(cap(None, Some(100))),
            vec![obs(None, Some(40), Some(10))],
            None,
        ),
        // Tokens = input + output; cached input (1,000,000 here) is not counted.
        (
            Some(cap(None, Some(100))),
            vec![obs(None, Some(60), Some(40))],
            Some(Exhausted::Tokens {
                spent: 100,
                cap: 100,
            }),
        ),
        // Only one of input/output reported: the other is absent, the sum is what was reported.
        (
            Some(cap(None, Some(100))),
            vec![obs(None, Some(99), None)],
            None,
        ),
        // Neither reported under a token cap: unknown.
        (
            Some(cap(None, Some(100))),
            vec![obs(Some(0.1), None, None)],
            Some(Exhausted::TokensUnknown { attempts: 1 }),
        ),
        // Both caps: the USD cap is checked first, then tokens.
        (
            Some(cap(Some(1.0), Some(100))),
            vec![obs(Some(0.2), Some(80), Some(30))],
            Some(Exhausted::Tokens {
                spent: 110,
                cap: 100,
            }),
        ),
        (
            Some(cap(Some(0.1), Some(100))),
            vec![obs(Some(0.2), Some(80), Some(30))],
            Some(Exhausted::Usd {
                spent: 0.2,
                cap: 0.1,
            }),
        ),
    ];
    for (c, attempts, want) in cases {
        let mut spent = Spent::default();
        for a in &attempts {
            spent.add_attempt(a);
        }
        assert_eq!(
            verdict(c.as_ref(), &spent),
            want,
            "cap {c:?}, attempts {attempts:?}"
        );
    }
}

#[test]
fn check_table() {
    let cases: &[(Budget, bool)] = &[
        (cap(Some(12.5), Some(2_000_000)), true),
        (cap(Some(0.01), None), true),
        (cap(None, Some(1)), true),
        (cap(None, None), false),
        (cap(Some(0.0), None), false),
        (cap(Some(-1.0), None), false),
        (cap(Some(f64::NAN), None), false),
        (cap(Some(f64::INFINITY), None), false),
        (cap(None, Some(0)), false),
    ];
    for (b, ok) in cases {
        assert_eq!(b.check().is_ok(), *ok, "{b:?}");
    }
}

#[test]
fn status_line_shows_spend_against_the_cap() {
    let mut spent = Spent::default();
    spent.add_attempt(&obs(Some(0.01), Some(100), Some(20)));
    let s = BudgetStatus::of(cap(Some(0.02), Some(1000)), spent);
    assert_eq!(
        s.line(),
        "budget: $0.0100 of $0.0200, 120 of 1000 tokens (open)"
    );
    spent.add_attempt(&obs(None, Some(1), Some(1)));
    let s = BudgetStatus::of(cap(Some(0.02), None), spent);
    assert_eq!(
        s.line(),
        "budget: cost unknown (1 attempt(s) reported none) of $0.0200 (reached: cost unknown: 1 attempt(s) reported no cost, so the USD cap cannot be shown to hold; no new trial starts)"
    );
}

#[test]
fn the_memory_stores_budget_stop_cancels_with_the_budget_reason() {
    assert_eq!(crate::dispatch::memory::BUDGET_STOP_REASON, BUDGET_REASON);
}
