//! The `data` of the turn's events: the typed payloads live with [`crate::events::TurnEvent`]
//! (the one event model every surface projects); here, the proof that they write the bytes
//! the turn wrote before.

pub(crate) use crate::events::turn_event::{
    LlmCallCompleted, LlmCallDelta, LlmCallStarted, LlmRetry, ToolCall, ToolComplete, ToolOutput,
    ToolResult, ToolStart, TurnEnd, TurnStart,
};

#[cfg(test)]
mod tests {
    //! Each event's data is the bytes the derived `Serialize` of the old structs gave: the
    //! old definitions are kept here as the reference.
    use super::*;
    use crate::events::turn_event::ToolStatus;
    use crate::events::{EventData, EventWriter};
    use crate::llm::message::WireJson;
    use crate::llm::message::{AssistantMessage, HistoryCall, ToolAnswer};
    use crate::llm::Message;
    use serde::Serialize;
    use serde_json::json;

    mod old {
        use crate::events::turn_event::ToolStatus;
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

        pub(crate) use ToolCall as ToolStart;

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
        // A payload that gained fields the old one lacked: written with their empty values.
        ($event:ident + { $($extra:tt)* } { $($fields:tt)* }) => {
            same(&$event { $($fields)* $($extra)* }, &old::$event { $($fields)* })
        };
    }

    #[test]
    fn events_are_the_old_rendering() {
        for display_reset in [false, true] {
            same!(TurnStart + { child_task_id: None, } { display_reset, });
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
            same!(ToolCall + { child_task_id: None, } {
                tool: text,
                args,
                call_id: "c1",
            });
            // The host-only facts are not on the transport.
            let started_at = [None, Some(chrono::Utc::now())][i % 2];
            same!(ToolStart + { child_task_id: None, started_at, } {
                tool: text,
                args,
                call_id: "c1",
            });
            same!(ToolOutput + { child_task_id: None, } {
                tool: "t",
                chunk: text,
                call_id: text,
            });
            let status = [ToolStatus::Ok, ToolStatus::Error, ToolStatus::Cancelled][i % 3];
            same!(ToolComplete + {
                child_task_id: None,
                started_at: chrono::Utc::now(),
                error_type: opt,
            } {
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

    /// The events that were `json!` maps before (`llm_retry`, the background notice, and a
    /// sub-agent's events as its parent forwarded them) are the bytes those maps wrote.
    #[test]
    fn former_json_maps_are_the_old_rendering() {
        use crate::events::turn_event::BackgroundNotificationInjected;
        let mut w = EventWriter::default();
        let mut check = |new: &dyn Fn(&mut EventWriter) -> String, old: serde_json::Value| {
            let expected = EventWriter::default().event("e", &old).as_str().to_owned();
            assert_eq!(new(&mut w), expected);
        };
        let args = json!({"command": "ls \"x\"", "n": [1, 2.5]});
        let args = args.as_object().unwrap();
        for (i, text) in TEXTS.into_iter().enumerate() {
            let delay_s = [0.0, 0.5, 1.25, 30.0, 2.0 / 3.0][i];
            check(
                &|w| {
                    let d = LlmRetry {
                        retry: i as u32,
                        max_retries: 3,
                        delay_s,
                        reason: text,
                    };
                    w.data_event("e", &d).as_str().to_owned()
                },
                json!({"retry": i as u32, "max_retries": 3, "delay_s": delay_s, "reason": text}),
            );
            check(
                &|w| {
                    let d = BackgroundNotificationInjected {
                        note_count: i,
                        content: text,
                    };
                    w.data_event("e", &d).as_str().to_owned()
                },
                json!({"note_count": i, "content": text}),
            );
            let child = Some("ab12cd34");
            for display_reset in [false, true] {
                let mut old = if display_reset {
                    json!({"display_reset": true})
                } else {
                    json!({})
                };
                old["child_task_id"] = json!("ab12cd34");
                check(
                    &|w| {
                        let d = TurnStart {
                            display_reset,
                            child_task_id: child,
                        };
                        w.data_event("e", &d).as_str().to_owned()
                    },
                    old,
                );
            }
            check(
                &|w| {
                    let d = ToolCall {
                        tool: text,
                        args,
                        call_id: "c",
                        child_task_id: child,
                    };
                    w.data_event("e", &d).as_str().to_owned()
                },
                json!({"tool": text, "args": args, "call_id": "c", "child_task_id": "ab12cd34"}),
            );
            check(
                &|w| {
                    let d = ToolOutput {
                        tool: "t",
                        chunk: text,
                        call_id: "c",
                        child_task_id: child,
                    };
                    w.data_event("e", &d).as_str().to_owned()
                },
                json!({"tool": "t", "chunk": text, "call_id": "c", "child_task_id": "ab12cd34"}),
            );
            let error = (i % 2 == 1).then_some(text);
            check(
                &|w| {
                    let d = ToolComplete {
                        tool: "t",
                        call_id: "c",
                        status: ToolStatus::Error,
                        duration_ms: delay_s * 1000.0,
                        error,
                        child_task_id: child,
                        started_at: chrono::DateTime::default(),
                        error_type: Some("IoError"),
                    };
                    w.data_event("e", &d).as_str().to_owned()
                },
                json!({"tool": "t", "call_id": "c", "status": "error",
                       "duration_ms": delay_s * 1000.0, "error": error,
                       "child_task_id": "ab12cd34"}),
            );
        }
    }

    /// The agent's notices outside a turn, `json!` maps before, are the bytes those maps wrote.
    #[test]
    fn agent_notices_are_the_old_rendering() {
        use crate::events::turn_event::{
            McpServerStatus, PermissionModeChanged, ReadonlyModeChanged,
        };
        use crate::events::TurnEvent;
        let old = |ty: &str, data: serde_json::Value| {
            EventWriter::default().event(ty, &data).as_str().to_owned()
        };
        for (previous, current) in [(false, true), (true, false)] {
            let ev = TurnEvent::ReadonlyModeChanged(ReadonlyModeChanged { previous, current });
            assert_eq!(
                ev.to_json().unwrap(),
                old(
                    "readonly_mode_changed",
                    json!({"previous": previous, "current": current})
                )
            );
        }
        let ev = TurnEvent::PermissionModeChanged(PermissionModeChanged {
            previous: "workspace-write",
            current: "read-only",
            cause: "host",
        });
        assert_eq!(
            ev.to_json().unwrap(),
            old(
                "permission_mode_changed",
                json!({"previous": "workspace-write", "current": "read-only", "cause": "host"})
            )
        );
        for (i, text) in TEXTS.into_iter().enumerate() {
            let error = (i % 2 == 1).then_some(text);
            let ev = TurnEvent::McpServerStatus(McpServerStatus {
                server: text,
                status: "failed",
                tools: i,
                error,
            });
            assert_eq!(
                ev.to_json().unwrap(),
                old(
                    "mcp_server_status",
                    json!({"server": text, "status": "failed", "tools": i, "error": error})
                )
            );
        }
    }

    /// `plugin_hook_fired` is the bytes of the map its fields name (the call's keys only on a
    /// tool point).
    #[test]
    fn plugin_hook_fired_is_its_fields() {
        use crate::events::turn_event::PluginHookFired;
        use crate::events::TurnEvent;
        let old = |data: serde_json::Value| {
            EventWriter::default()
                .event("plugin_hook_fired", &data)
                .as_str()
                .to_owned()
        };
        for (i, text) in TEXTS.into_iter().enumerate() {
            let call = (i % 2 == 0).then_some(text);
            let reason = (i % 3 == 0).then_some(text);
            let ev = TurnEvent::PluginHookFired(PluginHookFired {
                hook_name: "PreToolUse",
                tool_name: call,
                call_id: call,
                hooks: i,
                failed: 1,
                outcome: "deny",
                reason,
            });
            let mut expected = json!({"hook_name": "PreToolUse"});
            if let Some(c) = call {
                expected["tool_name"] = json!(c);
                expected["call_id"] = json!(c);
            }
            expected["hooks"] = json!(i);
            expected["failed"] = json!(1);
            expected["outcome"] = json!("deny");
            expected["reason"] = json!(reason);
            assert_eq!(ev.to_json().unwrap(), old(expected));
        }
    }
}
