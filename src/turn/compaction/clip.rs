//! Microcompaction: no LLM; the older tool results shortened in place.

use std::sync::Arc;

use super::estimate::text_tokens;
use crate::llm::Message;

/// The most recent tool results kept whole.
pub(crate) const KEEP_RECENT_TOOL_RESULTS: usize = 5;
/// The longest an older tool result stays, omission note included.
pub(crate) const CLIP_CHARS: usize = 3_000;

/// Clips every tool result older than the [`KEEP_RECENT_TOOL_RESULTS`] most recent to
/// [`CLIP_CHARS`] characters: the first fifth and the last four fifths of what fits around an
/// omission note (a result's end usually holds its verdict: an exit status, a test summary).
/// `newest_first` walks the messages from the newest. A result clipped before is at most
/// `CLIP_CHARS` long and is left alone.
pub(crate) fn clip_old_tool_results<'m>(
    newest_first: impl Iterator<Item = &'m mut Message>,
) -> Clipped {
    let mut seen = 0usize;
    let mut clipped = Clipped::default();
    for m in newest_first {
        let Message::Tool(t) = m else { continue };
        seen += 1;
        if seen <= KEEP_RECENT_TOOL_RESULTS {
            continue;
        }
        if let Some(short) = clip(&t.content) {
            clipped.tokens_saved += text_tokens(&t.content) - text_tokens(&short);
            t.content = Arc::from(short);
            clipped.results += 1;
        }
    }
    clipped
}

/// What a clipping pass did: the report's token figures follow from the count before it, so
/// the history is not counted again.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Clipped {
    pub(crate) results: usize,
    /// The estimate's tokens the clipped results lost.
    pub(crate) tokens_saved: u64,
}

/// `text` clipped to [`CLIP_CHARS`], or `None` when it fits.
pub(crate) fn clip(text: &str) -> Option<String> {
    // Cheap test first: a text of at most CLIP_CHARS bytes has at most that many characters.
    if text.len() <= CLIP_CHARS {
        return None;
    }
    let total = text.chars().count();
    if total <= CLIP_CHARS {
        return None;
    }
    let omitted_guess = total - CLIP_CHARS;
    let note = |n: usize| {
        format!("\n\n[… {n} characters of this tool result omitted to save context …]\n\n")
    };
    // The note's length depends on the count; the count's digits are bounded by the guess's.
    let room = CLIP_CHARS - note(omitted_guess + 200).chars().count();
    let head = room / 5;
    let tail = room - head;
    let omitted = total - head - tail;
    let head_end = text.char_indices().nth(head).map_or(text.len(), |(i, _)| i);
    let tail_start = text
        .char_indices()
        .nth(total - tail)
        .map_or(text.len(), |(i, _)| i);
    let mut out = String::with_capacity(CLIP_CHARS + 64);
    out.push_str(&text[..head_end]);
    out.push_str(&note(omitted));
    out.push_str(&text[tail_start..]);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::message::ToolAnswer;

    #[test]
    fn a_long_result_keeps_a_fifth_of_its_head_and_the_rest_of_its_tail() {
        let text: String = (0..10_000)
            .map(|i| char::from(b'a' + (i % 26) as u8))
            .collect();
        let out = clip(&text).unwrap();
        assert!(out.chars().count() <= CLIP_CHARS, "{}", out.chars().count());
        assert!(out.contains("characters of this tool result omitted"));
        let (head, rest) = out.split_once("\n\n[…").unwrap();
        let tail = rest.split_once("…]\n\n").unwrap().1;
        assert!(text.starts_with(head) && text.ends_with(tail));
        assert!(
            tail.len() >= 4 * head.len() - 4,
            "{} {}",
            head.len(),
            tail.len()
        );
        // Clipping again changes nothing.
        assert_eq!(clip(&out), None);
    }

    #[test]
    fn multibyte_text_is_cut_on_character_boundaries() {
        let text = "日本語".repeat(2000);
        let out = clip(&text).unwrap();
        assert!(out.chars().count() <= CLIP_CHARS);
    }

    #[test]
    fn the_five_most_recent_results_stay_whole() {
        let big = "x".repeat(5_000);
        let mut ms: Vec<Message> = (0..8)
            .map(|i| Message::Tool(ToolAnswer::new(format!("c{i}"), "t", big.as_str())))
            .collect();
        ms.push(Message::User(big.clone()));
        let before = super::super::estimate::messages_tokens(&ms);
        let clipped = clip_old_tool_results(ms.iter_mut().rev());
        assert_eq!(clipped.results, 3);
        assert_eq!(
            before - clipped.tokens_saved,
            super::super::estimate::messages_tokens(&ms)
        );
        for (i, m) in ms.iter().enumerate() {
            let len = m.text().unwrap().chars().count();
            if i < 3 {
                assert!(len <= CLIP_CHARS, "{i}");
            } else {
                assert_eq!(len, 5_000, "{i}");
            }
        }
        assert_eq!(
            clip_old_tool_results(ms.iter_mut().rev()),
            Clipped::default()
        );
    }
}
