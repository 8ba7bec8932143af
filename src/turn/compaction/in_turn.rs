//! Where the turn loop meets compaction: the check before each LLM call (spec §5.2 step 3)
//! and the recovery ladder after a failed one (spec §5.4).
//!
//! A compaction during a turn rewrites the agent's history and this turn's transcript
//! together: the new messages go to the history (the turn holds the turn lock, so nobody else
//! writes it) and the transcript starts over, so the turn's commit still appends exactly what
//! came after.

use std::sync::Arc;
use std::time::Instant;

use serde_json::Value;

use super::clip::{clip_old_tool_results, CLIP_CHARS, KEEP_RECENT_TOOL_RESULTS};
use super::estimate::{text_tokens, RequestMessages, VersionedMessages};
use super::{
    CompactionReport, CompactionStatus, Compactor, Kind, Request, Trigger, FULL_PERCENT,
    MICRO_PERCENT,
};
use crate::events::turn_event::ImagesRemoved;
use crate::events::TurnEvent;
use crate::llm::message::RunningCounts;
use crate::llm::{image, ErrorKind, LlmError, LlmResponse, Message, MessagesVersion};

/// What replaces an image of an earlier turn when the model refuses images.
const EARLIER_IMAGE_NOTE: &str =
    "[An image was removed from this message: the model does not accept image input.]";
use crate::turn::history::read;
use crate::turn::{prompt, Turn};

impl<'e, 'a> Turn<'e, 'a> {
    fn compactor(&self) -> Compactor<'e> {
        let env: &'e super::super::TurnEnv<'a> = self.env;
        Compactor {
            llm: env.llm,
            emitter: env.emitter,
            state: env.context,
            memory: env.tool_services.memory(),
            session_id: env.session_id,
            cancel: self.cancel.clone(),
            fixed_tokens: self.fixed_tokens.unwrap_or(0),
            controller: env.compaction_controller.clone(),
            reply_timeout: env.reply_timeout,
            hooks: env.hooks.as_deref().filter(|_| !env.tool_hooks_only),
            permission_mode: self.permission_mode(),
        }
    }

    /// The history (read under its lock) and the transcript, each with its version.
    fn request_messages<'h>(&'h self, history: &'h [Message]) -> RequestMessages<'h> {
        RequestMessages {
            history: VersionedMessages {
                messages: history,
                version: self.env.history_version.get(),
            },
            transcript: VersionedMessages {
                messages: &self.transcript,
                version: self.transcript_version,
            },
        }
    }

    /// The tokens of what a request sends besides the history: the system prompt and the
    /// tools (measured once for the session, again when they change) and the volatile tail
    /// (each time).
    fn fixed_tokens(&mut self, schemas: &Arc<Vec<Value>>) -> u64 {
        let env = self.env;
        let stable = *self
            .fixed_tokens
            .get_or_insert_with(|| env.system_prompt.tokens() + env.context.tools_tokens(schemas));
        let tail = prompt::volatile_tail(&env.tool_services.todos(), env.recall)
            .map_or(0, |t| text_tokens(&t) + 4);
        stable + tail
    }

    /// Before an LLM call: microcompaction above 55 % of the window, a full compaction above
    /// 80 % (unless a cancel was latched this turn or the breaker is open).
    pub(in crate::turn) async fn manage_context(&mut self, schemas: &Arc<Vec<Value>>) {
        let fixed = self.fixed_tokens(schemas);
        let env = self.env;
        let estimate = {
            let h = read(env.history);
            env.context.estimate(self.request_messages(&h), fixed)
        };
        let window = env.context.window();
        if estimate > window * FULL_PERCENT / 100 {
            if self.compaction_latched || env.context.breaker_open() {
                return;
            }
            let req = Request {
                trigger: Trigger::Auto,
                kind: Kind::Full,
                reason: "threshold",
            };
            self.compact_full(req).await;
        } else if estimate > window * MICRO_PERCENT / 100 {
            self.microcompact();
        }
    }

    /// A full or minimal compaction of the history and the transcript.
    pub(in crate::turn) async fn compact_full(&mut self, req: Request<'_>) -> CompactionStatus {
        let env = self.env;
        let messages: Vec<Message> = {
            let h = read(env.history);
            h.iter().chain(&self.transcript).cloned().collect()
        };
        let compactor = self.compactor();
        let (report, new) = compactor.full(&mut self.writer, &messages, req).await;
        if report.status == CompactionStatus::Cancelled {
            // Latched: no other compaction this turn, automatic or on the ladder.
            self.compaction_latched = true;
        }
        if let Some(new) = new {
            {
                let mut h = env.history.write().unwrap_or_else(|e| e.into_inner());
                *h = new;
                env.history_version.renew();
            }
            self.transcript.clear();
            self.transcript_version = MessagesVersion::fresh();
            self.delta_baseline = 0;
            self.counted = RunningCounts::default();
        }
        report.status
    }

    /// Clips old tool results in place; events only when something was clipped. Out of line
    /// so that a profile counts its passes (`bench/run.sh --only session`).
    #[inline(never)]
    fn microcompact(&mut self) {
        let env = self.env;
        let started = Instant::now();
        let report = {
            let mut h = env.history.write().unwrap_or_else(|e| e.into_inner());
            // Nothing to clip is the usual case: find out without scanning any text.
            let candidates = self
                .transcript
                .iter()
                .rev()
                .chain(h.iter().rev())
                .filter(|m| matches!(m, Message::Tool(_)))
                .skip(KEEP_RECENT_TOOL_RESULTS)
                .any(|m| m.text().is_some_and(|t| t.len() > CLIP_CHARS));
            if !candidates {
                return;
            }
            // Counted before this request's estimate: only what was added since is counted.
            let pre_tokens = env.context.history_tokens(self.request_messages(&h));
            let clipped =
                clip_old_tool_results(self.transcript.iter_mut().rev().chain(h.iter_mut().rev()));
            if clipped.results == 0 {
                return;
            }
            env.history_version.renew();
            let n = h.len() + self.transcript.len();
            CompactionReport {
                status: CompactionStatus::Success,
                pre_msgs: n,
                post_msgs: n,
                pre_tokens,
                post_tokens: pre_tokens - clipped.tokens_saved,
                duration_ms: started.elapsed().as_millis() as u64,
                detail: Some(format!("{} tool results clipped", clipped.results)),
            }
        };
        self.transcript_version = MessagesVersion::fresh();
        let req = Request {
            trigger: Trigger::Auto,
            kind: Kind::Micro,
            reason: "threshold",
        };
        let compactor = self.compactor();
        compactor.micro_done(&mut self.writer, req, &report);
    }

    /// The image rung (spec §5.4 step 1): the turn's images become `<attachment …/>` tags,
    /// earlier ones a removal note; `images_removed` says which messages changed. Returns how
    /// many images went.
    fn remove_images(&mut self) -> usize {
        let env = self.env;
        let mut count = 0usize;
        let mut indices = Vec::new();
        let base = {
            let mut h = env.history.write().unwrap_or_else(|e| e.into_inner());
            for (i, m) in h.iter_mut().enumerate() {
                let plain = image::without_images(m, |_, _| {
                    count += 1;
                    EARLIER_IMAGE_NOTE.to_owned()
                });
                if let Some(plain) = plain {
                    *m = plain;
                    indices.push(i);
                }
            }
            if !indices.is_empty() {
                env.history_version.renew();
            }
            h.len()
        };
        let mut turn_changed = false;
        for (i, m) in self.transcript.iter_mut().enumerate() {
            let plain = image::without_images(m, |k, mime| {
                count += 1;
                format!("<attachment uri=\"inline:image-{k}\" mimetype=\"{mime}\"/>")
            });
            if let Some(plain) = plain {
                *m = plain;
                indices.push(base + i);
                turn_changed = true;
            }
        }
        if turn_changed {
            self.transcript_version = MessagesVersion::fresh();
        }
        if count > 0 {
            // The provider counted the images: its count describes no prefix of this history,
            // and the versions alone cannot tell once this turn's messages are committed.
            env.context.forget_anchor();
            self.emit_event(&TurnEvent::ImagesRemoved(ImagesRemoved {
                reason: "provider_rejected",
                images_removed: count,
                message_indices: &indices,
            }));
        }
        count
    }

    /// The LLM call with the loop-level recovery ladder: a context overflow learns the stated
    /// window, compacts (`api_overflow`) and retries, then compacts to the last exchange
    /// (`api_overflow_after_compression`) and retries; a bare 413 compacts once and retries
    /// once. Every rung is taken at most once, so the ladder ends.
    pub(in crate::turn) async fn call_llm_recovering(
        &mut self,
        schemas: &Arc<Vec<Value>>,
    ) -> Result<LlmResponse, LlmError> {
        let mut overflow_rungs = 0u8;
        let mut too_large_done = false;
        loop {
            let e = match self.call_llm(schemas).await {
                Ok(r) => {
                    if let Some(u) = r.usage {
                        let h = read(self.env.history);
                        self.env
                            .context
                            .anchor(u.prompt_tokens, self.request_messages(&h));
                    }
                    return Ok(r);
                }
                Err(e) => e,
            };
            if e.streamed || self.cancel.is_cancelled() || self.compaction_latched {
                return Err(e);
            }
            // A wire that words its overflow its own way says so (the shared classification
            // reads the OpenAI family of messages).
            let kind = match (e.kind, self.env.llm.overflow(&e)) {
                (ErrorKind::Other, Some(o)) => ErrorKind::ContextOverflow { window: o.limit },
                (kind, _) => kind,
            };
            let req = match kind {
                ErrorKind::ContextOverflow { window } => {
                    if let Some(w) = window {
                        self.env.context.learn(w);
                    }
                    overflow_rungs += 1;
                    match overflow_rungs {
                        1 => Request {
                            trigger: Trigger::Overflow,
                            kind: Kind::Full,
                            reason: "api_overflow",
                        },
                        2 => Request {
                            trigger: Trigger::Overflow,
                            kind: Kind::Minimal,
                            reason: "api_overflow_after_compression",
                        },
                        _ => return Err(e),
                    }
                }
                ErrorKind::ImageRejected if !self.images_removed => {
                    self.images_removed = true;
                    if self.remove_images() == 0 {
                        return Err(e);
                    }
                    continue;
                }
                ErrorKind::PayloadTooLarge if !too_large_done => {
                    too_large_done = true;
                    Request {
                        trigger: Trigger::Overflow,
                        kind: Kind::Full,
                        reason: "payload_too_large",
                    }
                }
                _ => return Err(e),
            };
            if self.compact_full(req).await != CompactionStatus::Success {
                return Err(e);
            }
        }
    }
}
