//! `agent_<name>`: the tool the parent model calls to run a sub-agent (spec §6.1). Read-only
//! and never confirmed itself: the child's own calls are decided and confirmed one by one.

use std::sync::{Arc, Weak};

use serde_json::{json, Map, Value};

use super::background;
use super::config::BackgroundConfig;
use super::definition::SubagentDefinition;
use super::forward::ChildMode;
use super::outcome::{ChildState, Lineage};
use super::parent::{report, ParentAgent, ParentView};
use super::run::{new_lineage, report_spawned, run_child, run_spawned};
use crate::cancel::CancelToken;
use crate::events::subagent_event::SubagentEnded;
use crate::events::TurnEvent;
use crate::tools::{
    arg_bool, required_str, Tool, ToolContext, ToolError, ToolOrigin, ToolRegistry,
};

pub(crate) struct SpawnTool {
    def: Arc<SubagentDefinition>,
    name: String,
    parent: Weak<dyn ParentAgent>,
    /// The parent's tools of this turn, without the spawn tools (depth one).
    inherit: Arc<ToolRegistry>,
    background: BackgroundConfig,
}

impl SpawnTool {
    pub(crate) fn new(
        def: Arc<SubagentDefinition>,
        parent: Weak<dyn ParentAgent>,
        inherit: Arc<ToolRegistry>,
        background: BackgroundConfig,
    ) -> Self {
        SpawnTool {
            name: def.tool_name(),
            def,
            parent,
            inherit,
            background,
        }
    }
}

impl SpawnTool {
    /// What a run of this tool's sub-agent reads from the parent, at this call (a background
    /// launch takes it on the tool's thread too, before handing it to its own task).
    pub(crate) fn parent_view(&self, ctx: &ToolContext<'_>) -> Result<ParentView, ToolError> {
        let agent = self
            .parent
            .upgrade()
            .ok_or_else(|| ToolError::new("RuntimeError", "the agent was freed"))?;
        Ok(ParentView {
            snapshot: agent.snapshot(),
            agent,
            tools: self.inherit.clone(),
            recent_messages: ctx.host.recent_messages(),
            tool_call_id: Some(ctx.call_id.to_owned()),
        })
    }

    /// `run_in_background: true` (spec §6.5): the child runs on the runtime with the task's
    /// own token, refusing confirmations and forwarding nothing; the model gets the task's id
    /// at once, and the outcome later as a notice.
    ///
    /// `spawned` is published here, before the call ends (spec §3.7: a host joining on
    /// `parent_tool_call_id` meets the child before the call's terminal event); the child's
    /// terminal event follows from its task, or from [`Unsettled`] when the task is cancelled
    /// before it starts or dropped mid-run.
    fn launch_background(&self, task: &str, ctx: &ToolContext<'_>) -> Result<String, ToolError> {
        let handle = tokio::runtime::Handle::try_current()
            .map_err(|_| ToolError::new("RuntimeError", "no runtime to run the sub-agent on"))?;
        let view = self.parent_view(ctx)?;
        let store = view.agent.background();
        let def = self.def.clone();
        let owned = task.to_owned();
        let id = store
            .launch(&self.def.name, task, move |id, token| {
                let mode = ChildMode::Background {
                    parent_task_id: id.to_owned(),
                };
                let lineage = new_lineage(&view, &def, &mode);
                handle.block_on(report_spawned(
                    &*view.agent,
                    &lineage,
                    &def,
                    &owned,
                    ctx.cancel,
                ));
                let unsettled = Unsettled {
                    agent: Some(view.agent.clone()),
                    lineage: lineage.clone(),
                    token: token.clone(),
                };
                async move {
                    let report = run_spawned(&view, &def, &owned, mode, token, lineage).await;
                    unsettled.settled();
                    background::run_report(report)
                }
            })
            .map_err(|e| ToolError::new(e.kind(), e.to_string()))?;
        Ok(background::started_text(&self.def.name, &id, task))
    }
}

/// A background child whose `spawned` is out and whose terminal event is not: dropped so (its
/// task cancelled before it started, or aborted when the agent closed), it publishes
/// `cancelled`, so every `spawned` a host saw is closed.
struct Unsettled {
    agent: Option<Arc<dyn ParentAgent>>,
    lineage: Lineage,
    token: CancelToken,
}

impl Unsettled {
    /// The run published its own terminal event.
    fn settled(mut self) {
        self.agent = None;
    }
}

impl Drop for Unsettled {
    fn drop(&mut self) {
        let Some(agent) = self.agent.take() else {
            return;
        };
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let lineage = self.lineage.clone();
        let token = self.token.clone();
        handle.spawn(async move {
            let end = SubagentEnded {
                lineage: &lineage,
                state: ChildState::Cancelled,
                stats: None,
                error: None,
                error_type: None,
                usage: None,
            };
            report(&*agent, &TurnEvent::SubagentEnded(end), &token).await;
        });
    }
}

impl Tool for SpawnTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.def.description
    }

    fn parameters(&self) -> Value {
        let mut properties = json!({
            "task": {
                "type": "string",
                "description": "Task description to delegate to this agent",
            },
        });
        if self.background.enabled {
            properties["run_in_background"] = json!({
                "type": "boolean",
                "description": format!("If true, run the agent asynchronously. The tool returns an agent_id at once.\n- Continue with other work. Do not wait with sleep or with repeated status checks.\n- If you have no other work, end this turn. You can read the update of a background agent the next time this session runs.\n- If this turn cannot continue without the result, call check_background_agent with wait_seconds one time.\nAt most {} background agents may be pending or running at once; a launch beyond that fails.", background::store::MAX_IN_FLIGHT),
            });
        }
        json!({"type": "object", "properties": properties, "required": ["task"]})
    }

    fn is_read_only(&self) -> bool {
        true
    }

    fn requires_confirmation(&self) -> bool {
        false
    }

    fn origin(&self) -> ToolOrigin {
        ToolOrigin::Agent
    }

    fn execute(
        &self,
        args: &Map<String, Value>,
        ctx: &ToolContext<'_>,
    ) -> Result<String, ToolError> {
        let task = required_str(args, "task", "execute")?;
        if arg_bool(args, "run_in_background")?.unwrap_or(false) {
            if !self.background.enabled {
                return Err(ToolError::new(
                    "ValueError",
                    "run_in_background=True but background-agent store is disabled (bg_store=None) on this runtime.",
                ));
            }
            return self.launch_background(task, ctx);
        }
        let handle = tokio::runtime::Handle::try_current()
            .map_err(|_| ToolError::new("RuntimeError", "no runtime to run the sub-agent on"))?;
        let view = self.parent_view(ctx)?;
        let report = handle.block_on(run_child(
            &view,
            &self.def,
            task,
            ChildMode::Foreground,
            ctx.cancel.clone(),
        ));
        match report.setup_error {
            Some(kind) => Err(ToolError::new(&kind, report.text)),
            None => Ok(report.text),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::time::Duration;

    use super::*;
    use crate::events::host::HostEventHub;
    use crate::events::Emitter;
    use crate::llm::Usage;

    /// A parent that only reports events: all a dropped [`Unsettled`] reaches.
    struct Publisher {
        hub: HostEventHub,
        emitter: Emitter,
    }

    impl Default for Publisher {
        fn default() -> Self {
            Publisher {
                hub: HostEventHub::default(),
                emitter: Emitter::new(Arc::new(crate::events::transport::NullTransport::default())),
            }
        }
    }

    impl ParentAgent for Publisher {
        fn session_id(&self) -> &str {
            "parent"
        }
        fn snapshot(&self) -> super::super::parent::ParentSnapshot {
            unreachable!()
        }
        fn emitter(&self) -> &Emitter {
            &self.emitter
        }
        fn hub(&self) -> &HostEventHub {
            &self.hub
        }
        fn add_usage(&self, _usage: &Usage) {}
        fn background(&self) -> Arc<background::BackgroundStore> {
            unreachable!()
        }
        fn engine(&self) -> &std::sync::RwLock<Option<crate::permissions::PermissionEngine>> {
            unreachable!()
        }
        fn read_only(&self) -> &std::sync::atomic::AtomicBool {
            unreachable!()
        }
    }

    fn lineage() -> Lineage {
        Lineage {
            parent_session_id: "parent".into(),
            parent_task_id: Some("1234abcd".into()),
            parent_tool_call_id: Some("c1".into()),
            child_session_id: "child".into(),
            child_task_id: "task".into(),
            name: "n".into(),
            started_at: crate::events::host::now_rfc3339(),
        }
    }

    /// A background child dropped before its run published a terminal event (cancelled while
    /// pending, or aborted) still closes its `spawned` with `cancelled`; one that settled
    /// publishes nothing more.
    #[test]
    fn an_unsettled_child_publishes_cancelled_when_dropped() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let parent = Arc::new(Publisher::default());
        let seen = Arc::new(Mutex::new(Vec::<Value>::new()));
        let s = seen.clone();
        parent.hub.add_observer(Arc::new(move |j: &str| {
            s.lock().unwrap().push(serde_json::from_str(j).unwrap());
        }));
        let guard = |agent: &Arc<Publisher>| Unsettled {
            agent: Some(agent.clone() as Arc<dyn ParentAgent>),
            lineage: lineage(),
            token: CancelToken::new(),
        };
        rt.block_on(async {
            guard(&parent).settled();
            drop(guard(&parent));
            tokio::time::sleep(Duration::from_millis(20)).await;
        });
        let seen = seen.lock().unwrap().clone();
        assert_eq!(seen.len(), 1, "{seen:#?}");
        assert_eq!(seen[0]["phase"], "cancelled");
        assert_eq!(seen[0]["parent_tool_call_id"], "c1");
        assert_eq!(seen[0]["parent_task_id"], "1234abcd");
    }
}
