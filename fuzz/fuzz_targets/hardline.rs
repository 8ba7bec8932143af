//! The hardline floor (`permissions::hardline::check`) on arbitrary commands.
//!
//! Asserts: no panic; the verdict is a function of the text (same answer twice); a refused
//! command stays refused behind a benign command (`true; X`, `true && X`) and with a trailing
//! newline, since a model can always add those — except where the floor's inspection budget
//! decides (a refusal as `hardline::TOO_COMPLEX`, or a command with many nested command texts):
//! a wrapped form that stays within the budget is inspected whole, so its allow is a judgement
//! of everything it runs, not a bypass (this target found the budget bypass that rule closes).
//! Linear time is enforced by libFuzzer's `-timeout` (scripts/fuzz.sh) on inputs up to
//! `-max_len`.
#![no_main]

use agentao::permissions::hardline;
use libfuzzer_sys::fuzz_target;

/// Roughly how many nested command texts the floor may extract (command substitutions, `-c`
/// scripts, pipes into a shell, here-documents, `eval`).
fn nested_markers(cmd: &str) -> usize {
    ["$(", "`", "-c", "|", "<<", "eval", "<("]
        .iter()
        .map(|m| cmd.matches(m).count())
        .sum()
}

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
    // A text that is one command substitution is also read as the command it echoes, a rule
    // broader than the in-line scan, so wrapping it may drop a refusal that was conservative
    // (`$(echo rm -}}}\n -rf /)` runs `rm -}}} -rf /`, which rm rejects): not a bypass.
    let whole_substitution =
        cmd.trim_start().starts_with("$(") || cmd.trim_start().starts_with('`');
    if verdict.is_none()
        || verdict == Some(hardline::TOO_COMPLEX)
        || whole_substitution
        || nested_markers(cmd) >= hardline::MAX_TEXTS / 2
    {
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
