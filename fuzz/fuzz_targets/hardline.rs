//! The hardline floor (`permissions::hardline::check`) on arbitrary commands.
//!
//! Asserts: no panic; the verdict is a function of the text (same answer twice); a refused
//! command stays refused behind a benign command (`true; X`, `true && X`) and with a trailing
//! newline, since a model can always add those. Linear time is enforced by libFuzzer's
//! `-timeout` (scripts/fuzz.sh) on inputs up to `-max_len`.
#![no_main]

use agentao::permissions::hardline;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(cmd) = std::str::from_utf8(data) else {
        return;
    };
    let verdict = hardline::check(cmd);
    assert_eq!(
        verdict,
        hardline::check(cmd),
        "verdict changed between two calls"
    );
    if verdict.is_none() {
        return;
    }
    for wrapped in [
        format!("true; {cmd}"),
        format!("true && {cmd}"),
        format!("{cmd}\n"),
    ] {
        assert!(
            hardline::check(&wrapped).is_some(),
            "refused {cmd:?} ({verdict:?}) but allowed {wrapped:?}"
        );
    }
});
