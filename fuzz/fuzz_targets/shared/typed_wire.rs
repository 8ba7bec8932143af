//! The check both typed-wire decoder targets run (`anthropic_decoder`, `responses_decoder`).
//!
//! Input: raw events, one per line (an optional `data:` prefix is dropped), as a hostile
//! server may send them. Asserts no panic; that the fast path leaves each event's outcome, the
//! decoder and the assembler exactly as the general decoder alone does; and bounded output: the
//! assembled text, reasoning, tool names, ids and arguments together stay within a small
//! multiple of the input (a call without input gets `{}`).

use agentao::llm::openai::DecodePath;
use agentao::llm::LlmResponse;

/// A wire's `decode_for_fuzzing`: the events' outcomes as text, and the assembled response.
pub type Decode = for<'a> fn(std::vec::IntoIter<&'a [u8]>, DecodePath) -> (String, LlmResponse);

pub fn check(input: &[u8], decode: Decode) {
    let events: Vec<&[u8]> = input
        .split(|b| *b == b'\n')
        .map(|l| {
            let l = l.strip_suffix(b"\r").unwrap_or(l);
            l.strip_prefix(b"data:").unwrap_or(l)
        })
        .collect();
    let (auto, resp) = decode(events.clone().into_iter(), DecodePath::Auto);
    let (general, _) = decode(events.clone().into_iter(), DecodePath::GeneralOnly);
    assert_eq!(auto, general, "{:?}", String::from_utf8_lossy(input));
    let out = resp.content.len()
        + resp.reasoning.len()
        + resp.model.len()
        + resp.finish_reason.as_ref().map_or(0, String::len)
        + resp
            .tool_calls
            .iter()
            .map(|c| c.id.len() + c.name.len() + c.raw_arguments.len())
            .sum::<usize>();
    // A whole input object is re-serialized, and an id may be built of two (`call|item`).
    assert!(
        out <= 3 * input.len() + 16 * events.len(),
        "{out} bytes assembled from {}",
        input.len()
    );
}
