//! The Anthropic Messages stream decoder (`llm/anthropic/decode.rs`, its fast path in `llm/anthropic/fast_event.rs`),
//! through `anthropic_decode_for_fuzzing`, by the check in `shared/typed_wire.rs`.
#![no_main]

#[path = "shared/typed_wire.rs"]
mod typed_wire;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: &[u8]| {
    typed_wire::check(input, |events, path| {
        agentao::llm::anthropic_decode_for_fuzzing(events, path)
    });
});
