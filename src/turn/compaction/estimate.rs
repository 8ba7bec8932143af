//! The local token estimate: a character heuristic, anchored on the provider's own count of the
//! prefix it saw ([`super::ContextState`]), so its error only covers the newest messages.
//!
//! ASCII text runs about four characters a token in the tokenizers of current models; other
//! scripts (CJK above all) run closer to one character a token, so each non-ASCII character
//! counts one. Each message adds a few tokens of framing (role, separators).

use crate::llm::message::Role;
use crate::llm::{image, Message, MessagesVersion};

/// Framing tokens of one message.
const PER_MESSAGE: u64 = 4;

/// Tokens of a text.
pub(crate) fn text_tokens(s: &str) -> u64 {
    // Most of what a session holds is ASCII, which the standard library checks a word at a
    // time; the byte loop below is for the rest.
    if s.is_ascii() {
        return (s.len() as u64).div_ceil(4);
    }
    let bytes = s.as_bytes();
    let mut ascii = 0u64;
    let mut other = 0u64;
    for &b in bytes {
        if b < 0x80 {
            ascii += 1;
        } else if b & 0xC0 != 0x80 {
            // The first byte of a multi-byte character.
            other += 1;
        }
    }
    ascii.div_ceil(4) + other
}

/// Tokens of one message as the model sees it.
pub(crate) fn message_tokens(m: &Message) -> u64 {
    PER_MESSAGE
        + match m {
            Message::System(t) | Message::User(t) => text_tokens(t),
            Message::Tool(t) => text_tokens(&t.call_id) + text_tokens(&t.content),
            Message::Assistant(a) => {
                text_tokens(&a.content)
                    + a.reasoning.as_deref().map_or(0, text_tokens)
                    + a.tool_calls.iter().flatten().fold(0, |n, c| {
                        n + PER_MESSAGE
                            + text_tokens(&c.id)
                            + text_tokens(&c.name)
                            + text_tokens(&c.arguments)
                    })
            }
            // A host's own shape: its JSON, less the keys' share; an image counts what a
            // provider bills for it, not its encoded size.
            Message::Host(map) => match map.get("content") {
                Some(serde_json::Value::String(t)) if m.role() != Role::Other && map.len() <= 2 => {
                    text_tokens(t)
                }
                Some(serde_json::Value::Array(parts)) if map.len() <= 2 => {
                    parts.iter().fold(0, |n, p| {
                        n + match image::image_part_mime(p) {
                            Some(_) => image::IMAGE_TOKENS,
                            None => p
                                .get("text")
                                .and_then(|t| t.as_str())
                                .map_or(0, text_tokens),
                        }
                    })
                }
                _ => serde_json::to_string(map).map_or(0, |j| text_tokens(&j)),
            },
        }
}

/// Tokens of a run of messages.
pub(crate) fn messages_tokens<'m>(ms: impl IntoIterator<Item = &'m Message>) -> u64 {
    ms.into_iter().map(message_tokens).sum()
}

/// A list of messages and which state of it that is.
#[derive(Debug, Clone, Copy)]
pub(crate) struct VersionedMessages<'m> {
    pub(crate) messages: &'m [Message],
    pub(crate) version: MessagesVersion,
}

impl<'m> VersionedMessages<'m> {
    /// A list with no version: counted whole every time.
    pub(crate) fn unversioned(messages: &'m [Message]) -> Self {
        VersionedMessages {
            messages,
            version: MessagesVersion::unknown(),
        }
    }
}

/// What a request sends of the conversation: the agent's history, then the turn's transcript.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RequestMessages<'m> {
    pub(crate) history: VersionedMessages<'m>,
    pub(crate) transcript: VersionedMessages<'m>,
}

/// The tokens of a list of messages that only grows while it keeps its [`MessagesVersion`] (an
/// agent's history, a turn's transcript): counted once, then only from the first message not
/// counted yet. Recounting the whole list before every request made each request of a long
/// turn or session cost more than the one before.
#[derive(Debug, Default)]
pub(crate) struct GrowingCount {
    version: Option<MessagesVersion>,
    messages: usize,
    tokens: u64,
}

impl GrowingCount {
    /// The tokens of `list`, which is in state `version`. An unknown version says nothing
    /// about what changed: the list is counted whole and nothing is kept.
    pub(crate) fn tokens(&mut self, of: VersionedMessages<'_>) -> u64 {
        let (list, version) = (of.messages, of.version);
        if version == MessagesVersion::unknown() {
            return messages_tokens(list);
        }
        if self.version != Some(version) || list.len() < self.messages {
            *self = GrowingCount {
                version: Some(version),
                messages: 0,
                tokens: 0,
            };
        }
        self.tokens += messages_tokens(&list[self.messages..]);
        self.messages = list.len();
        self.tokens
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ascii_is_a_quarter_and_other_scripts_a_character_each() {
        assert_eq!(text_tokens(""), 0);
        assert_eq!(text_tokens("abcd"), 1);
        assert_eq!(text_tokens("abcde"), 2);
        assert_eq!(text_tokens("日本語"), 3);
        assert_eq!(text_tokens("é"), 1);
    }

    #[test]
    fn a_message_counts_its_framing() {
        assert_eq!(message_tokens(&Message::User("abcd".into())), 5);
    }

    fn at(messages: &[Message], version: MessagesVersion) -> VersionedMessages<'_> {
        VersionedMessages { messages, version }
    }

    #[test]
    fn a_growing_count_counts_appended_messages_and_starts_over_on_a_new_version() {
        let mut count = GrowingCount::default();
        let v = MessagesVersion::fresh();
        let mut list = vec![Message::User("abcd".into())];
        assert_eq!(count.tokens(at(&list, v)), 5);
        list.push(Message::User("abcdabcd".into()));
        assert_eq!(count.tokens(at(&list, v)), 11);
        // An edit comes with a new version: the list is counted again.
        list[0] = Message::User("a".repeat(40));
        let w = MessagesVersion::fresh();
        assert_eq!(count.tokens(at(&list, w)), 14 + 6);
        // A shorter list under the same version is counted again too.
        assert_eq!(count.tokens(at(&list[..1], w)), 14);
        // An unknown version is always counted whole.
        assert_eq!(count.tokens(VersionedMessages::unversioned(&list)), 20);
        assert_eq!(count.tokens(at(&list[..1], w)), 14);
    }
}
