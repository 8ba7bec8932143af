//! Secret scanning and redaction (spec §3.10): an ordered list of patterns, most specific first;
//! every match becomes `[REDACTED:<kind>]`. Applied to spilled tool outputs (never to the text
//! the model sees).

use std::collections::BTreeMap;
use std::sync::LazyLock;

use fancy_regex::Regex;

/// Texts shorter than this are never scanned.
const MIN_SCAN_LEN: usize = 13;

static PATTERNS: LazyLock<Vec<(&'static str, Regex)>> = LazyLock::new(|| {
    let table: &[(&str, &str)] = &[
        (
            "private_key_block",
            concat!(
                r"-----BEGIN [A-Z ]+KEY(?: BLOCK)?-----(?:(?!-----BEGIN )[\s\S])+?",
                r"-----END [A-Z ]+KEY(?: BLOCK)?-----",
                r"|-----BEGIN [A-Z ]*PRIVATE KEY(?: BLOCK)?-----",
                r"[ \t]*(?:\r?\n|\\n)",
                r"(?:[A-Za-z][A-Za-z0-9-]*:[^\r\n\\]*(?:\r?\n|\\n))*",
                r"(?:\s|\\n)*[A-Za-z0-9+/=]+(?:(?:\r?\n|\\n)[A-Za-z0-9+/=]+)*"
            ),
        ),
        ("anthropic_api_key", r"\bsk-ant-[A-Za-z0-9_\-]{20,}"),
        (
            "openai_api_key",
            r"\bsk-(?!ant-)(?:proj-)?[A-Za-z0-9_\-]{20,}",
        ),
        ("google_api_key", r"\bAIza[0-9A-Za-z_\-]{35}\b"),
        ("google_oauth_secret", r"\bGOCSPX-[A-Za-z0-9_\-]{20,}"),
        ("aws_access_key", r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
        ("github_token", r"\bgh[pousr]_[A-Za-z0-9]{36,}\b"),
        ("github_token", r"\bgithub_pat_[A-Za-z0-9_]{20,}"),
        ("slack_token", r"\bxox[baprs]-[0-9A-Za-z\-]{10,}\b"),
        ("slack_token", r"\bxapp-\d-[A-Za-z0-9\-]{10,}"),
        ("stripe_key", r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{20,}"),
        ("stripe_key", r"\bwhsec_[A-Za-z0-9]{20,}"),
        (
            "jwt",
            r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\b",
        ),
        ("bearer", r"(?i)\bbearer\s+[A-Za-z0-9_\-\.=+/]{20,}"),
        (
            "bearer",
            r"(?i)\bauthorization\s*[:=]\s*(?:bearer\s+)?[A-Za-z0-9_\-\.=+/]{20,}",
        ),
        (
            "oauth_token",
            concat!(
                r#"(?i)(?:\b(?:access_token|refresh_token|id_token|code_verifier)["']?\s*[:=]\s*["']?"#,
                r#"|(?<=[?&])code=|"code"\s*:\s*")"#,
                r#"[^\s"'&,}]{8,}"#
            ),
        ),
        (
            "kv_secret",
            concat!(
                r#"(?i)(?<![A-Za-z0-9_])(api[_-]?key|token|secret|password|passwd)"#,
                r#"\s*[:=]\s*["']?([^\s"']{8,})["']?"#
            ),
        ),
    ];
    table
        .iter()
        .filter_map(|(kind, re)| Regex::new(re).ok().map(|r| (*kind, r)))
        .collect()
});

/// `(redacted text, hits by kind)`; an empty map means the text was clean. Never fails: a
/// pattern that errors at match time (backtrack limit) leaves the text as it is.
pub(crate) fn scan_and_redact(text: &str) -> (String, BTreeMap<&'static str, usize>) {
    let mut hits = BTreeMap::new();
    if text.chars().count() < MIN_SCAN_LEN {
        return (text.to_owned(), hits);
    }
    let mut current = text.to_owned();
    for (kind, re) in PATTERNS.iter() {
        if !matches!(re.is_match(&current), Ok(true)) {
            continue;
        }
        let mut out = String::with_capacity(current.len());
        let mut last = 0;
        let mut count = 0usize;
        for m in re.find_iter(&current) {
            let Ok(m) = m else { break };
            out.push_str(&current[last..m.start()]);
            out.push_str("[REDACTED:");
            out.push_str(kind);
            out.push(']');
            last = m.end();
            count += 1;
        }
        if count > 0 {
            out.push_str(&current[last..]);
            current = out;
            *hits.entry(*kind).or_insert(0) += count;
        }
    }
    (current, hits)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn redact(text: &str) -> String {
        scan_and_redact(text).0
    }

    #[test]
    fn patterns_fire_in_order() {
        assert_eq!(PATTERNS.len(), 17, "every pattern compiles");
        let (out, hits) = scan_and_redact(
            "key sk-ant-abcdefghijklmnopqrstuvwxyz0123 and sk-proj-ABCDEFGHIJKLMNOPQRSTUV",
        );
        assert_eq!(
            out,
            "key [REDACTED:anthropic_api_key] and [REDACTED:openai_api_key]"
        );
        assert_eq!(hits.get("anthropic_api_key"), Some(&1));
        let (out, _) =
            scan_and_redact("export AWS=AKIAABCDEFGHIJKLMNOP\npassword = hunter2hunter2");
        assert_eq!(
            out,
            "export AWS=[REDACTED:aws_access_key]\n[REDACTED:kv_secret]"
        );
        let (out, _) = scan_and_redact("GET /cb?state=1&code=abcdefghij HTTP/1.1");
        assert_eq!(out, "GET /cb?state=1&[REDACTED:oauth_token] HTTP/1.1");
        let pem = "-----BEGIN RSA PRIVATE KEY-----\nMIIBOgIBAAJBAK\n-----END RSA PRIVATE KEY-----";
        assert_eq!(redact(pem), "[REDACTED:private_key_block]");
        assert_eq!(redact("short"), "short");
        assert_eq!(
            redact("nothing secret in here at all"),
            "nothing secret in here at all"
        );
    }
}
