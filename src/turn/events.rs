//! The `data` of the turn's internal events, as borrowed structs: writing one goes straight
//! into the event buffer, with no intermediate JSON map and no copy of history, arguments or
//! tool output, and its keys are copied as written (`events::event_data!`).

use super::tool_outcome::ToolStatus;
use crate::events::{event_data, EventData, Fields};
use crate::llm::message::WireJson;
use serde_json::{Map, Value};

fn is_false(b: &bool) -> bool {
    !*b
}

event_data! {
    pub(crate) struct TurnStart {
        #[skip_if(is_false)]
        pub(crate) display_reset: bool,
    }
}

event_data! {
    /// `turn_end`: the keys in the order of the `json!` map it was written from before.
    pub(crate) struct TurnEnd<'a> {
        pub(crate) final_text: &'a str,
        pub(crate) status: &'static str,
        pub(crate) error: Option<&'a str>,
        pub(crate) tool_count: u64,
        pub(crate) incomplete_reason: Option<&'static str>,
        pub(crate) finish_reason_missing: bool,
    }
}

event_data! {
    pub(crate) struct LlmCallStarted<'a> {
        pub(crate) attempt: u32,
        pub(crate) model: &'a str,
        pub(crate) temperature: Option<f64>,
        pub(crate) max_tokens: u32,
        pub(crate) n_messages: usize,
        pub(crate) n_tool_messages: usize,
        pub(crate) n_system_reminder_blocks: usize,
        pub(crate) system_prompt_hash: &'a str,
        pub(crate) tools_hash: &'a str,
        pub(crate) tool_count: usize,
    }
}

/// Written by hand: its messages are spliced as rendered ([`WireJson`], which the request
/// then reuses), not written through their `Serialize`.
pub(crate) struct LlmCallDelta<'a> {
    pub(crate) attempt: u32,
    pub(crate) delta_start_index: usize,
    pub(crate) total_messages: usize,
    pub(crate) added_messages: &'a [WireJson],
}

impl EventData for LlmCallDelta<'_> {
    fn write_fields(&self, fields: &mut Fields<'_>) {
        fields.field("\"attempt\":", &self.attempt);
        fields.field("\"delta_start_index\":", &self.delta_start_index);
        fields.field("\"total_messages\":", &self.total_messages);
        fields.field_with("\"added_messages\":", |out| {
            out.push(b'[');
            for (i, m) in self.added_messages.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                out.extend_from_slice(m.as_bytes());
            }
            out.push(b']');
        });
    }
}

event_data! {
    pub(crate) struct LlmCallCompleted<'a> {
        pub(crate) attempt: u32,
        pub(crate) status: &'static str,
        pub(crate) duration_ms: f64,
        pub(crate) model_latency_ms: f64,
        pub(crate) first_token_ms: Option<f64>,
        pub(crate) first_reasoning_ms: Option<f64>,
        pub(crate) error_class: Option<&'a str>,
        pub(crate) error_message: Option<&'a str>,
        pub(crate) finish_reason: Option<&'a str>,
        /// Only on `ok`.
        #[skip_if(Option::is_none)]
        pub(crate) finish_reason_reported: Option<bool>,
        pub(crate) prompt_tokens: Option<u64>,
        pub(crate) completion_tokens: Option<u64>,
        pub(crate) cache_read_tokens: Option<u64>,
        pub(crate) cache_creation_tokens: Option<u64>,
        pub(crate) reasoning_tokens: Option<u64>,
        /// Only on `error`: whether text had reached the host.
        #[skip_if(Option::is_none)]
        pub(crate) streamed: Option<bool>,
    }
}

event_data! {
    pub(crate) struct ToolCall<'a> {
        pub(crate) tool: &'a str,
        pub(crate) args: &'a Map<String, Value>,
        pub(crate) call_id: &'a str,
    }
}

event_data! {
    pub(crate) struct ToolOutput<'a> {
        pub(crate) tool: &'a str,
        pub(crate) chunk: &'a str,
        pub(crate) call_id: &'a str,
    }
}

event_data! {
    pub(crate) struct ToolComplete<'a> {
        pub(crate) tool: &'a str,
        pub(crate) call_id: &'a str,
        pub(crate) status: ToolStatus,
        pub(crate) duration_ms: f64,
        pub(crate) error: Option<&'a str>,
    }
}

event_data! {
    pub(crate) struct ToolResult<'a> {
        pub(crate) tool: &'a str,
        pub(crate) call_id: &'a str,
        pub(crate) content: &'a str,
        pub(crate) content_hash: &'a str,
        pub(crate) original_chars: usize,
        pub(crate) saved_to_disk: bool,
        pub(crate) disk_path: Option<String>,
        pub(crate) status: ToolStatus,
        pub(crate) duration_ms: f64,
        pub(crate) error: Option<&'a str>,
    }
}

#[cfg(test)]
mod tests {
    //! Each event's data is the bytes the derived `Serialize` of the old structs gave: the
    //! old definitions are kept here as the reference.
    use super::*;
    use crate::events::{EventData, EventWriter};
    use crate::llm::message::{AssistantMessage, HistoryCall, ToolAnswer};
    use crate::llm::Message;
    use serde::Serialize;
    use serde_json::json;

    mod old {
        use super::super::ToolStatus;
        use crate::llm::Message;
        use serde::Serialize;
        use serde_json::{Map, Value};

        #[derive(Serialize)]
        pub(crate) struct TurnStart {
            #[serde(skip_serializing_if = "std::ops::Not::not")]
            pub(crate) display_reset: bool,
        }

        #[derive(Serialize)]
        pub(crate) struct LlmCallStarted<'a> {
            pub(crate) attempt: u32,
            pub(crate) model: &'a str,
            pub(crate) temperature: Option<f64>,
            pub(crate) max_tokens: u32,
            pub(crate) n_messages: usize,
            pub(crate) n_tool_messages: usize,
            pub(crate) n_system_reminder_blocks: usize,
            pub(crate) system_prompt_hash: &'a str,
            pub(crate) tools_hash: &'a str,
            pub(crate) tool_count: usize,
        }

        #[derive(Serialize)]
        pub(crate) struct LlmCallDelta<'a> {
            pub(crate) attempt: u32,
            pub(crate) delta_start_index: usize,
            pub(crate) total_messages: usize,
            pub(crate) added_messages: &'a [Message],
        }

        #[derive(Serialize)]
        pub(crate) struct LlmCallCompleted<'a> {
            pub(crate) attempt: u32,
            pub(crate) status: &'static str,
            pub(crate) duration_ms: f64,
            pub(crate) model_latency_ms: f64,
            pub(crate) first_token_ms: Option<f64>,
            pub(crate) first_reasoning_ms: Option<f64>,
            pub(crate) error_class: Option<&'a str>,
            pub(crate) error_message: Option<&'a str>,
            pub(crate) finish_reason: Option<&'a str>,
            #[serde(skip_serializing_if = "Option::is_none")]
            pub(crate) finish_reason_reported: Option<bool>,
            pub(crate) prompt_tokens: Option<u64>,
            pub(crate) completion_tokens: Option<u64>,
            pub(crate) cache_read_tokens: Option<u64>,
            pub(crate) cache_creation_tokens: Option<u64>,
            pub(crate) reasoning_tokens: Option<u64>,
            #[serde(skip_serializing_if = "Option::is_none")]
            pub(crate) streamed: Option<bool>,
        }

        #[derive(Serialize)]
        pub(crate) struct ToolCall<'a> {
            pub(crate) tool: &'a str,
            pub(crate) args: &'a Map<String, Value>,
            pub(crate) call_id: &'a str,
        }

        #[derive(Serialize)]
        pub(crate) struct ToolOutput<'a> {
            pub(crate) tool: &'a str,
            pub(crate) chunk: &'a str,
            pub(crate) call_id: &'a str,
        }

        #[derive(Serialize)]
        pub(crate) struct ToolComplete<'a> {
            pub(crate) tool: &'a str,
            pub(crate) call_id: &'a str,
            pub(crate) status: ToolStatus,
            pub(crate) duration_ms: f64,
            pub(crate) error: Option<&'a str>,
        }

        #[derive(Serialize)]
        pub(crate) struct ToolResult<'a> {
            pub(crate) tool: &'a str,
            pub(crate) call_id: &'a str,
            pub(crate) content: &'a str,
            pub(crate) content_hash: &'a str,
            pub(crate) original_chars: usize,
            pub(crate) saved_to_disk: bool,
            pub(crate) disk_path: Option<String>,
            pub(crate) status: ToolStatus,
            pub(crate) duration_ms: f64,
            pub(crate) error: Option<&'a str>,
        }
    }

    /// Texts with escapes, control characters, non-ASCII and astral characters.
    const TEXTS: [&str; 5] = [
        "",
        "plain",
        "a\"b\\c\n\t\u{0}\u{1f}",
        "é \u{2028} 😀",
        "</x>",
    ];

    fn same<D: EventData, S: Serialize>(new: &D, old: &S) {
        let mut w = EventWriter::default();
        let expected = w.event("e", old).as_str().to_owned();
        assert_eq!(w.data_event("e", new).as_str(), expected);
    }

    /// The event as written now and as the old derived `Serialize` wrote it, from one field list.
    macro_rules! same {
        ($event:ident { $($fields:tt)* }) => {
            same(&$event { $($fields)* }, &old::$event { $($fields)* })
        };
    }

    #[test]
    fn events_are_the_old_rendering() {
        for display_reset in [false, true] {
            same!(TurnStart { display_reset });
        }
        let args = json!({"file_path": "a\"b.txt", "limit": 3, "deep": {"x": [1, null]}});
        let args = args.as_object().unwrap();
        let messages = [
            Message::User("hi\n".into()),
            Message::assistant_text("ok"),
            Message::Assistant(AssistantMessage {
                content: String::new(),
                tool_calls: Some(vec![HistoryCall {
                    id: "c1".into(),
                    name: "read_file".into(),
                    arguments: r#"{"file_path": "a.txt"}"#.into(),
                }]),
                reasoning: Some("why".into()),
            }),
            Message::Tool(ToolAnswer::new("c1", "read_file", "line\n\"two\"")),
        ];
        let floats = [0.0, 1.5, 1234.567, 1e-7, f64::NAN, f64::INFINITY];
        for (i, text) in TEXTS.into_iter().enumerate() {
            let opt = (i % 2 == 1).then_some(text);
            let num = (i % 2 == 0).then_some(i as u64 * 1000);
            let ms = floats[i % floats.len()];
            let ms_opt = (i % 3 != 0).then_some(floats[(i + 1) % floats.len()]);
            let flag = [None, Some(true), Some(false)][i % 3];
            same!(LlmCallStarted {
                attempt: i as u32,
                model: text,
                temperature: ms_opt,
                max_tokens: 4096,
                n_messages: i,
                n_tool_messages: i + 1,
                n_system_reminder_blocks: 0,
                system_prompt_hash: "0123456789abcdef",
                tools_hash: text,
                tool_count: 10,
            });
            let added = &messages[..i.min(messages.len())];
            let rendered: Vec<WireJson> = added.iter().map(WireJson::of).collect();
            same(
                &LlmCallDelta {
                    attempt: 1,
                    delta_start_index: i,
                    total_messages: i * 2,
                    added_messages: &rendered,
                },
                &old::LlmCallDelta {
                    attempt: 1,
                    delta_start_index: i,
                    total_messages: i * 2,
                    added_messages: added,
                },
            );
            same!(LlmCallCompleted {
                attempt: 2,
                status: "ok",
                duration_ms: ms,
                model_latency_ms: ms,
                first_token_ms: ms_opt,
                first_reasoning_ms: None,
                error_class: opt,
                error_message: opt,
                finish_reason: Some(text),
                finish_reason_reported: flag,
                prompt_tokens: num,
                completion_tokens: num,
                cache_read_tokens: None,
                cache_creation_tokens: num,
                reasoning_tokens: num,
                streamed: flag.map(|f| !f),
            });
            same!(ToolCall {
                tool: text,
                args,
                call_id: "c1",
            });
            same!(ToolOutput {
                tool: "t",
                chunk: text,
                call_id: text,
            });
            let status = [ToolStatus::Ok, ToolStatus::Error, ToolStatus::Cancelled][i % 3];
            same!(ToolComplete {
                tool: "t",
                call_id: text,
                status,
                duration_ms: ms,
                error: opt,
            });
            let disk_path = opt.map(|t| format!("/tmp/{t}"));
            same!(ToolResult {
                tool: "t",
                call_id: "c",
                content: text,
                content_hash: "abc",
                original_chars: i,
                saved_to_disk: i % 2 == 0,
                disk_path: disk_path.clone(),
                status,
                duration_ms: ms,
                error: opt,
            });
        }
    }
}
