//! The agent's side of context compaction: on demand between turns, the host's controller, and
//! the figures the host reads (the estimate and the window).

use std::sync::Arc;

use super::{lock, runtime, Agent, AgentError, TurnOptions};
use crate::cancel::CancelToken;
use crate::events::EventWriter;
use crate::turn::compaction::controller::CompactionController;
use crate::turn::compaction::estimate::VersionedMessages;
use crate::turn::compaction::{CompactionReport, Compactor, ContextUsage, Kind, Request, Trigger};

impl Agent {
    /// Installs the host's compaction controller (`None` removes it), between turns: asked
    /// before every full compaction from the next turn on (and by `compact`).
    pub fn set_compaction_controller(
        &self,
        controller: Option<Arc<dyn CompactionController>>,
    ) -> Result<(), AgentError> {
        let (slot, _token) = self.begin(&TurnOptions::default())?;
        let old = std::mem::replace(&mut *lock(&self.core.compaction_controller), controller);
        drop(slot);
        // The old controller may run its host finalizer: never under the lock.
        drop(old);
        Ok(())
    }

    /// Compacts the history now (a full compaction, whatever the estimate; the breaker does not
    /// apply), with `reason` in its events. Blocks until it ends; refused while a turn runs
    /// and on a runtime thread. `cancel` (linked one way) cancels the summarizer's call.
    pub fn compact(
        &self,
        reason: &str,
        cancel: Option<CancelToken>,
    ) -> Result<CompactionReport, AgentError> {
        if super::on_runtime_thread() {
            return Err(AgentError::Reentrant);
        }
        let rt = runtime()?;
        let (slot, token) = self.begin(&TurnOptions {
            cancel,
            ..TurnOptions::default()
        })?;
        let core = &self.core;
        let hooks = core.hooks();
        let report = rt.block_on(async {
            let messages = core
                .history
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .clone();
            let compactor = Compactor {
                llm: &core.llm,
                emitter: &core.emitter,
                state: &core.context,
                memory: core.tool_services.memory(),
                session_id: &core.session_id,
                cancel: token.clone(),
                fixed_tokens: core.prompt_tokens_now(),
                controller: core.compaction_controller(),
                reply_timeout: core.config.reply_timeout,
                hooks: hooks.as_deref(),
                permission_mode: crate::turn::hook_permission_mode(&core.engine),
            };
            let req = Request {
                trigger: Trigger::Manual,
                kind: Kind::Full,
                reason,
            };
            let mut writer = EventWriter::default();
            let (report, new) = compactor.full(&mut writer, &messages, req).await;
            if let Some(new) = new {
                {
                    // Renewed under the write lock, as everywhere: a reader holding the read
                    // lock sees the version of what it reads.
                    let mut h = core.history.write().unwrap_or_else(|e| e.into_inner());
                    *h = new;
                    core.history_version.renew();
                }
                // A compaction rewrites the history: committed like a turn.
                core.commit_session().await;
            }
            report
        });
        drop(slot);
        Ok(report)
    }

    /// [`Agent::context_usage`] as the JSON `agentao_agent_context_usage` hands out.
    pub fn context_usage_json(&self) -> String {
        serde_json::to_string(&self.context_usage()).expect("usage serializes")
    }

    /// The context estimate of the next request (system prompt and history; the tools and
    /// the volatile tail are known only in a turn) and the window it is measured against.
    pub(crate) fn context_usage(&self) -> ContextUsage {
        let core = &self.core;
        let history = core.history.read().unwrap_or_else(|e| e.into_inner());
        let history = VersionedMessages {
            messages: &history,
            version: core.history_version.get(),
        };
        core.context.usage(history, core.prompt_tokens_now())
    }
}
