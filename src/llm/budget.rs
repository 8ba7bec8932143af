//! `llm.budgets`: which limit a session or a turn has reached, worded as the cancellation
//! reason that ends the turn.

use std::time::Instant;

use super::config::Budgets;
use super::Usage;

/// The first budget reached, given the session's usage `now`, its usage when the turn began
/// (`at_start`), when the turn began and when the session did.
pub(super) fn exceeded(
    b: &Budgets,
    now: &Usage,
    at_start: &Usage,
    started: Instant,
    created: Instant,
) -> Option<String> {
    let tokens = |u: &Usage| u.prompt_tokens.saturating_add(u.completion_tokens);
    let turn_tokens = tokens(now).saturating_sub(tokens(at_start));
    let usd = |nano: u64| nano as f64 / 1e9;
    let turn_usd = usd(now.cost_nano_usd.saturating_sub(at_start.cost_nano_usd));
    let over = |name: &str, used: String, limit: String| {
        Some(format!("budget exceeded: {name} ({used} of {limit})"))
    };
    let ms = |since: Instant| since.elapsed().as_millis() as u64;
    if let Some(l) = b.turn_tokens.filter(|l| turn_tokens >= *l) {
        return over(
            "llm.budgets.turn_tokens",
            turn_tokens.to_string(),
            l.to_string(),
        );
    }
    if let Some(l) = b.session_tokens.filter(|l| tokens(now) >= *l) {
        return over(
            "llm.budgets.session_tokens",
            tokens(now).to_string(),
            l.to_string(),
        );
    }
    if let Some(l) = b.turn_usd.filter(|l| turn_usd >= *l) {
        return over(
            "llm.budgets.turn_usd",
            format!("${turn_usd:.6}"),
            format!("${l}"),
        );
    }
    let session_usd = usd(now.cost_nano_usd);
    if let Some(l) = b.session_usd.filter(|l| session_usd >= *l) {
        return over(
            "llm.budgets.session_usd",
            format!("${session_usd:.6}"),
            format!("${l}"),
        );
    }
    if let Some(l) = b.turn_ms.filter(|l| ms(started) >= *l) {
        return over(
            "llm.budgets.turn_ms",
            format!("{} ms", ms(started)),
            format!("{l} ms"),
        );
    }
    if let Some(l) = b.session_ms.filter(|l| ms(created) >= *l) {
        return over(
            "llm.budgets.session_ms",
            format!("{} ms", ms(created)),
            format!("{l} ms"),
        );
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_budget_is_named_when_reached() {
        let now = Instant::now();
        let spent = Usage {
            prompt_tokens: 900,
            completion_tokens: 100,
            cost_nano_usd: 2_000_000_000,
            ..Usage::default()
        };
        let none = Usage::default();
        let check = |b: Budgets| exceeded(&b, &spent, &none, now, now);
        assert_eq!(check(Budgets::default()), None);
        let r = check(Budgets {
            turn_tokens: Some(1000),
            ..Budgets::default()
        });
        assert_eq!(
            r.as_deref(),
            Some("budget exceeded: llm.budgets.turn_tokens (1000 of 1000)")
        );
        let r = check(Budgets {
            turn_usd: Some(2.5),
            session_usd: Some(1.5),
            ..Budgets::default()
        });
        assert!(r
            .unwrap()
            .contains("llm.budgets.session_usd ($2.000000 of $1.5)"));
        // Spent before the turn: not the turn's.
        let r = exceeded(
            &Budgets {
                turn_tokens: Some(10),
                ..Budgets::default()
            },
            &spent,
            &spent,
            now,
            now,
        );
        assert_eq!(r, None);
        let r = check(Budgets {
            turn_ms: Some(0),
            ..Budgets::default()
        });
        assert!(r
            .unwrap()
            .starts_with("budget exceeded: llm.budgets.turn_ms"));
    }
}
