//! The provider retry policy: which failures are retried and how long to wait.

use std::time::Duration;

use rand::Rng;

use super::config::RetryConfig;

const RETRYABLE_STATUS: &[u16] = &[408, 409, 425, 429, 500, 502, 503, 504, 529];

/// 429 codes that mean "out of money", not "slow down": never retried.
const QUOTA_CODES: &[&str] = &[
    "insufficient_quota",
    "credit_balance_exhausted",
    "organization_spend_limit_exceeded",
    "project_spend_limit_exceeded",
    "organization_usage_limit_exceeded",
];

pub(crate) fn is_retryable_status(
    status: u16,
    code: Option<&str>,
    error_type: Option<&str>,
) -> bool {
    if status == 429
        && (code.is_some_and(|c| QUOTA_CODES.contains(&c))
            || error_type == Some("insufficient_quota"))
    {
        return false;
    }
    RETRYABLE_STATUS.contains(&status)
}

/// The reference's exception class for a status (the OpenAI SDK's names).
pub(crate) fn status_class(status: u16) -> &'static str {
    match status {
        400 => "BadRequestError",
        401 => "AuthenticationError",
        403 => "PermissionDeniedError",
        404 => "NotFoundError",
        409 => "ConflictError",
        422 => "UnprocessableEntityError",
        429 => "RateLimitError",
        s if s >= 500 => "InternalServerError",
        _ => "APIStatusError",
    }
}

/// Delay before retry `n` (0-based): `Retry-After` if given, else `min(base·2^n, cap)` plus
/// uniform jitter in `[0, 0.3·that)`, all capped.
pub(crate) fn backoff(cfg: &RetryConfig, n: u32, retry_after: Option<Duration>) -> Duration {
    if let Some(ra) = retry_after {
        return ra.min(cfg.backoff_cap.max(Duration::from_secs(60)));
    }
    let base = cfg
        .backoff_base
        .saturating_mul(1u32.checked_shl(n).unwrap_or(u32::MAX))
        .min(cfg.backoff_cap);
    if base.is_zero() {
        return base;
    }
    let jitter = rand::thread_rng().gen_range(0.0..0.3) * base.as_secs_f64();
    (base + Duration::from_secs_f64(jitter)).min(cfg.backoff_cap)
}

/// `Retry-After`: delta seconds (fractions allowed) or an HTTP date; a past date is 0.
pub(crate) fn parse_retry_after(v: &str) -> Option<Duration> {
    let v = v.trim();
    if let Ok(secs) = v.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0)
            .then(|| Duration::from_secs_f64(secs.min(3600.0)));
    }
    let when = chrono::DateTime::parse_from_rfc2822(v).ok()?;
    let delta = when.timestamp_millis() - chrono::Utc::now().timestamp_millis();
    Some(Duration::from_millis(delta.max(0) as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classification() {
        assert!(is_retryable_status(500, None, None));
        assert!(is_retryable_status(429, Some("rate_limit_exceeded"), None));
        assert!(!is_retryable_status(429, Some("insufficient_quota"), None));
        assert!(!is_retryable_status(400, None, None));
    }

    #[test]
    fn backoff_schedule_matches_reference() {
        let cfg = RetryConfig::default();
        for (n, lo) in [(0, 7.5), (1, 15.0), (2, 30.0), (3, 60.0)] {
            let d = backoff(&cfg, n, None).as_secs_f64();
            assert!(d >= lo && d <= (lo * 1.3).min(60.0), "n={n} d={d}");
        }
        assert_eq!(
            backoff(&cfg, 0, Some(Duration::from_millis(200))),
            Duration::from_millis(200)
        );
        assert_eq!(
            backoff(&cfg, 0, Some(Duration::from_secs(999))),
            Duration::from_secs(60)
        );
    }

    #[test]
    fn retry_after_forms() {
        assert_eq!(parse_retry_after("0.2"), Some(Duration::from_millis(200)));
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"),
            Some(Duration::ZERO)
        );
        assert_eq!(parse_retry_after("soon"), None);
    }
}
