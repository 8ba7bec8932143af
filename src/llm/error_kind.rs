//! What a failed LLM call means for the loop's recovery ladder (spec §5.4): a prompt over the
//! model's context window, a request body too large for the server, an image the model will
//! not take, or anything else.
//!
//! Every error is classified into [`ErrorKind`] through [`classify`] (status, error code,
//! message), which [`super::LlmError::status`] and [`super::LlmError::api`] call; a wire whose
//! overflow is worded otherwise says so through `Wire::overflow`, which the ladder asks when
//! this classification found nothing. The messages recognised are listed in
//! `docs/context-compaction.md`.

use std::sync::LazyLock;

use regex::Regex;

/// How the recovery ladder treats a failed call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ErrorKind {
    /// Not a matter for the ladder: the turn ends with `llm_error`.
    #[default]
    Other,
    /// The prompt is over the model's context window. `window`: the window the provider stated,
    /// when the message names exactly one.
    ContextOverflow { window: Option<u64> },
    /// HTTP 413 that is not a recognised overflow: the body is too large for the server.
    PayloadTooLarge,
    /// The model (or the provider) does not take image input.
    ImageRejected,
}

impl ErrorKind {
    pub fn is_overflow(self) -> bool {
        matches!(self, ErrorKind::ContextOverflow { .. })
    }
}

/// Error codes that mean "over the context window" whatever the message says.
const OVERFLOW_CODES: &[&str] = &[
    "context_length_exceeded",
    "context_window_exceeded",
    "exceed_context_size_error",
    "model_context_window_exceeded",
];

/// Lower-case phrases of real servers' overflow messages.
const OVERFLOW_PHRASES: &[&str] = &[
    "maximum context length",
    "context length exceeded",
    "context_length_exceeded",
    "exceeds the context window",
    "exceeds the model's context window",
    "exceed context limit",
    "exceeds the available context size",
    "available context size",
    "prompt is too long",
    "prompt too long",
    "input is too long",
    "input too long",
    "maximum number of tokens allowed",
    "too large for model with",
    "reduce the length of the messages",
    "context window exceeded",
];

/// Rate-limit wording: "Request too large ... tokens per min" is a 429-family limit, not the
/// context window, and compaction would not help it.
const RATE_LIMIT_PHRASES: &[&str] = &[
    "rate limit",
    "tokens per min",
    "per minute",
    "(tpm)",
    "requests per",
    "quota",
];

/// Phrases that, next to the word "image", say the model refuses image input.
const IMAGE_REFUSAL_PHRASES: &[&str] = &[
    "not support",
    "only supported by",
    "unsupported",
    "invalid content type",
    "does not accept",
    "cannot process",
    "not a multimodal",
    "no vision",
    "not allowed",
    "is not enabled",
];

/// Windows stated in overflow messages: each pattern captures one number.
static WINDOW_PATTERNS: LazyLock<Vec<Regex>> = LazyLock::new(|| {
    [
        r"maximum context length is (\d+)",
        r"context window of (\d+)",
        r"> ?(\d+) maximum",
        r"(\d+) maximum context length",
        r"context limit: ?\d+ ?\+ ?\d+ ?> ?(\d+)",
        r"maximum number of tokens allowed \((\d+)\)",
        r"available context size \((\d+) tokens\)",
        r"context length of (\d+)",
    ]
    .iter()
    .map(|p| Regex::new(p).expect("valid pattern"))
    .collect()
});

/// Classifies an OpenAI-wire failure: `status` (None for an error without one), the error's
/// `code`, and its message.
pub fn classify(status: Option<u16>, code: Option<&str>, message: &str) -> ErrorKind {
    let lower = message.to_ascii_lowercase();
    if status == Some(429) || RATE_LIMIT_PHRASES.iter().any(|p| lower.contains(p)) {
        return ErrorKind::Other;
    }
    let by_code = code.is_some_and(|c| OVERFLOW_CODES.contains(&c));
    if by_code || OVERFLOW_PHRASES.iter().any(|p| lower.contains(p)) {
        return ErrorKind::ContextOverflow {
            window: stated_window(&lower),
        };
    }
    if matches!(status, Some(400 | 413 | 415 | 422) | None) && refuses_images(&lower) {
        return ErrorKind::ImageRejected;
    }
    if status == Some(413) {
        return ErrorKind::PayloadTooLarge;
    }
    ErrorKind::Other
}

/// The window an overflow message states, when all its statements agree on one number.
pub fn stated_window(lower: &str) -> Option<u64> {
    let mut found: Option<u64> = None;
    for re in WINDOW_PATTERNS.iter() {
        for c in re.captures_iter(lower) {
            let n: u64 = c[1].parse().ok()?;
            match found {
                Some(f) if f != n => return None,
                _ => found = Some(n),
            }
        }
    }
    found.filter(|n| *n >= 256)
}

fn refuses_images(lower: &str) -> bool {
    // A tool-schema error that names an image parameter is not a refusal of image input.
    if lower.contains("tools[") || lower.contains("function parameters") {
        return false;
    }
    (lower.contains("image") || lower.contains("vision"))
        && IMAGE_REFUSAL_PHRASES.iter().any(|p| lower.contains(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn overflow(window: Option<u64>) -> ErrorKind {
        ErrorKind::ContextOverflow { window }
    }

    #[test]
    fn real_servers_overflow_messages_are_recognised_with_their_windows() {
        let cases: &[(Option<u16>, Option<&str>, &str, ErrorKind)] = &[
            // OpenAI / vLLM / DeepSeek / OpenRouter
            (Some(400), Some("context_length_exceeded"),
             "This model's maximum context length is 128000 tokens. However, your messages resulted in 130512 tokens. Please reduce the length of the messages.",
             overflow(Some(128000))),
            (Some(400), None,
             "This endpoint's maximum context length is 200000 tokens. However, you requested about 250000 tokens.",
             overflow(Some(200000))),
            // OpenAI Responses
            (Some(400), Some("context_length_exceeded"),
             "Your input exceeds the context window of this model. Please adjust your input and try again.",
             overflow(None)),
            // Anthropic
            (Some(400), None, "prompt is too long: 208310 tokens > 200000 maximum", overflow(Some(200000))),
            (Some(400), None,
             "input length and `max_tokens` exceed context limit: 197000 + 21333 > 200000, decrease input length or `max_tokens` and try again",
             overflow(Some(200000))),
            // Bedrock
            (Some(400), None, "Input is too long for requested model.", overflow(None)),
            // Gemini
            (Some(400), None,
             "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).",
             overflow(Some(1048576))),
            // Mistral
            (Some(400), None,
             "Prompt contains 40000 tokens and 0 draft tokens, too large for model with 32768 maximum context length",
             overflow(Some(32768))),
            // llama.cpp
            (Some(400), Some("exceed_context_size_error"),
             "the request exceeds the available context size (8192 tokens), try increasing it",
             overflow(Some(8192))),
            // Groq
            (Some(400), None, "Please reduce the length of the messages or completion.", overflow(None)),
            // An in-stream error without a status
            (None, None, "This model's maximum context length is 4096 tokens.", overflow(Some(4096))),
        ];
        for (status, code, msg, want) in cases {
            assert_eq!(classify(*status, *code, msg), *want, "{msg}");
        }
    }

    #[test]
    fn rate_limits_are_not_overflows() {
        let msg = "Request too large for gpt-4o in organization org-x on tokens per min (TPM): Limit 30000, Requested 50000.";
        assert_eq!(classify(Some(429), None, msg), ErrorKind::Other);
        assert_eq!(classify(Some(400), None, msg), ErrorKind::Other);
        assert_eq!(
            classify(Some(429), Some("context_length_exceeded"), "x"),
            ErrorKind::Other
        );
    }

    #[test]
    fn a_bare_413_is_payload_too_large() {
        assert_eq!(
            classify(Some(413), None, "Request Entity Too Large"),
            ErrorKind::PayloadTooLarge
        );
        assert_eq!(
            classify(Some(413), None, "prompt is too long"),
            overflow(None)
        );
    }

    #[test]
    fn image_refusals_are_recognised_but_not_schema_errors() {
        assert_eq!(
            classify(
                Some(400),
                None,
                "Invalid content type. image_url is only supported by certain models."
            ),
            ErrorKind::ImageRejected
        );
        assert_eq!(
            classify(Some(400), None, "This model does not support image input."),
            ErrorKind::ImageRejected
        );
        assert_eq!(
            classify(
                Some(400),
                None,
                "Invalid schema for function 'f': tools[0] image parameter not supported"
            ),
            ErrorKind::Other
        );
        assert_eq!(
            classify(Some(500), None, "image not supported"),
            ErrorKind::Other
        );
    }

    #[test]
    fn conflicting_windows_are_not_learned() {
        assert_eq!(
            stated_window("maximum context length is 4096 tokens; context window of 8192"),
            None
        );
        assert_eq!(stated_window("maximum context length is 12 tokens"), None);
    }

    #[test]
    fn other_errors_are_other() {
        assert_eq!(classify(Some(400), None, "bad request"), ErrorKind::Other);
        assert_eq!(
            classify(Some(401), None, "invalid api key"),
            ErrorKind::Other
        );
    }
}
