//! W3C Trace Context (`traceparent`, `tracestate`): how a host hands the agent the span its
//! turns belong under, and the ids of the spans the agent makes.
//!
//! `traceparent` is `00-<32 hex trace id>-<16 hex span id>-<2 hex flags>` (version 00; a later
//! version is read by its first four fields, as the recommendation says). All-zero ids are
//! invalid. `tracestate` is passed on as given, after a check that it is printable ASCII of at
//! most 512 bytes with at most 32 members (the recommendation's bounds).

use std::fmt;

/// A trace id: 16 bytes, never all zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TraceId(pub [u8; 16]);

/// A span id: 8 bytes, never all zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SpanId(pub [u8; 8]);

impl TraceId {
    pub(crate) fn random() -> Self {
        loop {
            let v = fastrand::u128(..).to_be_bytes();
            if v != [0; 16] {
                return TraceId(v);
            }
        }
    }
}

impl SpanId {
    pub(crate) fn random() -> Self {
        loop {
            let v = fastrand::u64(..).to_be_bytes();
            if v != [0; 8] {
                return SpanId(v);
            }
        }
    }
}

fn write_hex(f: &mut fmt::Formatter<'_>, bytes: &[u8]) -> fmt::Result {
    for b in bytes {
        write!(f, "{b:02x}")?;
    }
    Ok(())
}

impl fmt::Display for TraceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_hex(f, &self.0)
    }
}

impl fmt::Display for SpanId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_hex(f, &self.0)
    }
}

/// Where a span sits: its trace, its own id, and the vendor state that travels with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpanContext {
    pub trace_id: TraceId,
    pub span_id: SpanId,
    /// The W3C `trace-flags`; bit 0 is "sampled".
    pub flags: u8,
    pub trace_state: String,
}

impl SpanContext {
    /// The `traceparent` header of this span (version 00).
    pub fn traceparent(&self) -> String {
        format!("00-{}-{}-{:02x}", self.trace_id, self.span_id, self.flags)
    }
}

/// Why a `traceparent` or `tracestate` was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct TraceContextError(pub String);

const MAX_TRACESTATE_BYTES: usize = 512;
const MAX_TRACESTATE_MEMBERS: usize = 32;

fn hex_bytes<const N: usize>(text: &str, what: &str) -> Result<[u8; N], TraceContextError> {
    let bad = || {
        TraceContextError(format!(
            "traceparent: the {what} is not {} lowercase hex digits",
            N * 2
        ))
    };
    if text.len() != N * 2
        || !text
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return Err(bad());
    }
    let mut out = [0u8; N];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&text[i * 2..i * 2 + 2], 16).map_err(|_| bad())?;
    }
    Ok(out)
}

/// Parses a `traceparent` and an optional `tracestate` into the context of the host's span.
pub fn parse(
    traceparent: &str,
    tracestate: Option<&str>,
) -> Result<SpanContext, TraceContextError> {
    let fields: Vec<&str> = traceparent.trim().split('-').collect();
    if fields.len() < 4 {
        return Err(TraceContextError(
            "traceparent: expected version-traceid-spanid-flags".into(),
        ));
    }
    let [version] = hex_bytes::<1>(fields[0], "version")?;
    if version == 0xff {
        return Err(TraceContextError(
            "traceparent: version ff is invalid".into(),
        ));
    }
    // Version 00 has exactly four fields; a later version may append more (read as 00).
    if version == 0 && fields.len() != 4 {
        return Err(TraceContextError(
            "traceparent: version 00 has exactly four fields".into(),
        ));
    }
    let trace_id = TraceId(hex_bytes::<16>(fields[1], "trace id")?);
    let span_id = SpanId(hex_bytes::<8>(fields[2], "parent id")?);
    let [flags] = hex_bytes::<1>(fields[3], "trace flags")?;
    if trace_id.0 == [0; 16] {
        return Err(TraceContextError(
            "traceparent: the trace id is all zeros".into(),
        ));
    }
    if span_id.0 == [0; 8] {
        return Err(TraceContextError(
            "traceparent: the parent id is all zeros".into(),
        ));
    }
    let trace_state = match tracestate {
        None => String::new(),
        Some(s) => check_tracestate(s)?,
    };
    Ok(SpanContext {
        trace_id,
        span_id,
        flags,
        trace_state,
    })
}

fn check_tracestate(s: &str) -> Result<String, TraceContextError> {
    let s = s.trim();
    if s.len() > MAX_TRACESTATE_BYTES {
        return Err(TraceContextError(format!(
            "tracestate: longer than {MAX_TRACESTATE_BYTES} bytes"
        )));
    }
    if !s.bytes().all(|b| (0x20..0x7f).contains(&b)) {
        return Err(TraceContextError(
            "tracestate: only printable ASCII is allowed".into(),
        ));
    }
    let members = s.split(',').filter(|m| !m.trim().is_empty()).count();
    if members > MAX_TRACESTATE_MEMBERS {
        return Err(TraceContextError(format!(
            "tracestate: more than {MAX_TRACESTATE_MEMBERS} members"
        )));
    }
    if s.split(',')
        .filter(|m| !m.trim().is_empty())
        .any(|m| !m.contains('='))
    {
        return Err(TraceContextError(
            "tracestate: every member is key=value".into(),
        ));
    }
    Ok(s.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_valid_traceparent_round_trips() {
        let ctx = parse(SAMPLE, Some("congo=t61rcWkgMzE")).unwrap();
        assert_eq!(ctx.trace_id.to_string(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(ctx.span_id.to_string(), "00f067aa0ba902b7");
        assert_eq!(ctx.flags, 1);
        assert_eq!(ctx.trace_state, "congo=t61rcWkgMzE");
        assert_eq!(ctx.traceparent(), SAMPLE);
    }

    #[test]
    fn malformed_traceparents_are_refused_with_a_reason() {
        for (bad, why) in [
            ("", "expected version"),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
                "expected version",
            ),
            (
                "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
                "trace id",
            ),
            (
                "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
                "all zeros",
            ),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
                "all zeros",
            ),
            (
                "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                "version ff",
            ),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",
                "exactly four",
            ),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
                "trace id",
            ),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1",
                "trace flags",
            ),
        ] {
            let e = parse(bad, None).unwrap_err();
            assert!(e.0.contains(why), "{bad:?}: {e}");
        }
        // A later version may carry more fields.
        assert!(parse(&format!("01{}-extra", &SAMPLE[2..]), None).is_ok());
    }

    #[test]
    fn tracestate_is_bounded() {
        assert!(parse(SAMPLE, Some(&"a=b,".repeat(40))).is_err());
        assert!(parse(SAMPLE, Some(&"x".repeat(600))).is_err());
        assert!(parse(SAMPLE, Some("k=v\u{e9}")).is_err());
        assert!(parse(SAMPLE, Some("novalue")).is_err());
        assert!(parse(SAMPLE, Some("a=1,b=2")).is_ok());
    }
}
