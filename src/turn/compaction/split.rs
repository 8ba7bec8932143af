//! Where a full compaction cuts the history: the older part is summarised, the recent part kept
//! verbatim. A cut never falls between an assistant's tool calls and their results.

use super::estimate::message_tokens;
use crate::llm::message::Role;
use crate::llm::Message;

/// The most messages kept verbatim.
pub(crate) const KEEP_MAX_MESSAGES: usize = 20;
/// The largest share of the history kept verbatim, in percent.
pub(crate) const KEEP_MAX_PERCENT: usize = 60;
/// A history shorter than this is not compacted: there is too little to summarise.
pub(crate) const MIN_MESSAGES: usize = 5;

/// How much a compaction keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Keep {
    /// The recent messages within the count, share and token bounds.
    Recent { max_tokens: u64 },
    /// Only the last exchange: the last message that is not a tool result, and what follows.
    Minimal,
}

/// The index the kept tail starts at, or `None` when the history cannot be compacted (too
/// short, or no cut leaves something to summarise). A tail starts at a message that is not a
/// tool result, so every result stays with its call; a message a summary begins (index 0) is
/// never kept, so each compaction folds the previous summary into the next.
pub(crate) fn cut(messages: &[Message], keep: Keep) -> Option<usize> {
    let n = messages.len();
    if n < MIN_MESSAGES {
        return None;
    }
    let starts_ok = |i: usize| messages[i].role() != Role::Tool;
    let cut = match keep {
        Keep::Minimal => (1..n).rev().find(|&i| starts_ok(i))?,
        Keep::Recent { max_tokens } => {
            let max_keep = KEEP_MAX_MESSAGES.min(n * KEEP_MAX_PERCENT / 100);
            let mut i = (n - max_keep).max(1);
            while i < n && !starts_ok(i) {
                i += 1;
            }
            // Then within the token bound, leaving at least the last exchange.
            let mut tokens: u64 = messages[i.min(n)..].iter().map(message_tokens).sum();
            while i < n && tokens > max_tokens {
                let next = (i + 1..n).find(|&j| starts_ok(j));
                let Some(j) = next else { break };
                tokens -= messages[i..j].iter().map(message_tokens).sum::<u64>();
                i = j;
            }
            if i >= n {
                // Only tool results after the bound: keep the last exchange.
                (1..n).rev().find(|&i| starts_ok(i))?
            } else {
                i
            }
        }
    };
    (cut >= 1).then_some(cut)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::message::{AssistantMessage, HistoryCall, ToolAnswer};

    fn call(id: &str) -> Message {
        Message::Assistant(AssistantMessage {
            content: String::new(),
            tool_calls: Some(vec![HistoryCall {
                id: id.into(),
                name: "t".into(),
                arguments: "{}".into(),
            }]),
            reasoning: None,
        })
    }

    fn result(id: &str, len: usize) -> Message {
        Message::Tool(ToolAnswer::new(id, "t", "r".repeat(len)))
    }

    /// A session of `turns` turns: user, call, result, answer.
    fn session(turns: usize, result_len: usize) -> Vec<Message> {
        let mut v = Vec::new();
        for t in 0..turns {
            v.push(Message::User(format!("u{t}")));
            v.push(call(&format!("c{t}")));
            v.push(result(&format!("c{t}"), result_len));
            v.push(Message::assistant_text(format!("a{t}")));
        }
        v
    }

    #[test]
    fn the_tail_is_at_most_twenty_messages_and_sixty_percent_and_never_splits_a_pair() {
        for n in 5..60 {
            let mut s = session(15, 10);
            s.truncate(n);
            let Some(c) = cut(
                &s,
                Keep::Recent {
                    max_tokens: u64::MAX,
                },
            ) else {
                continue;
            };
            let kept = n - c;
            assert!(kept <= 20 && kept * 100 <= n * 60, "n={n} kept={kept}");
            assert_ne!(s[c].role(), Role::Tool, "n={n}");
            assert!(c >= 1);
        }
    }

    #[test]
    fn short_histories_are_not_compacted() {
        assert_eq!(
            cut(&session(1, 10), Keep::Recent { max_tokens: 1000 }),
            None
        );
    }

    #[test]
    fn the_token_bound_moves_the_cut_to_a_later_exchange() {
        let s = session(10, 4_000);
        let c = cut(&s, Keep::Recent { max_tokens: 1_500 }).unwrap();
        assert_ne!(s[c].role(), Role::Tool);
        let kept: u64 = s[c..].iter().map(message_tokens).sum();
        assert!(kept <= 1_500 || s.len() - c <= 2, "{kept}");
    }

    #[test]
    fn minimal_keeps_the_last_exchange() {
        let mut s = session(4, 10);
        s.pop(); // ends with a tool result
        let c = cut(&s, Keep::Minimal).unwrap();
        assert_eq!(s.len() - c, 2);
        assert!(matches!(s[c], Message::Assistant(_)));
    }
}
