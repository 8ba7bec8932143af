//! The agent's skills in its turns: the catalogue found through the file system the agent uses
//! now (once, then kept), `activate_skill` added to the turn's tools, and the system prompt
//! with the catalogue's block. An agent without a `skills` section does none of this.

use std::sync::{Arc, Mutex};

use serde_json::Value;

use crate::cancel::CancelToken;
use crate::skills::{self, Catalogue};
use crate::tools::{Tool, ToolRegistry};
use crate::turn::prompt::SystemPrompt;

use super::api::Agent;
use super::lock;
use super::session::AgentCore;

/// What the last turn built from a catalogue, reused while the catalogue (and the tools it was
/// added to) are the same: a new registry or prompt every turn would miss the caches of the
/// tools array and of the prompt's digest.
#[derive(Default)]
pub(super) struct SkillsInTurns {
    tools: Mutex<Option<ToolsWithSkill>>,
    prompt: Mutex<Option<PromptWithCatalogue>>,
}

impl SkillsInTurns {
    /// Lets go of the last turn's tools (a host removed one: its finalizer runs once nothing
    /// holds it); returned, to be dropped outside the caller's locks.
    pub(super) fn forget_tools(&self) -> impl Sized {
        lock(&self.tools).take()
    }
}

/// `made`: the registry `from` with the tool of `catalogue` added.
struct ToolsWithSkill {
    from: Arc<ToolRegistry>,
    catalogue: Arc<Catalogue>,
    made: Arc<ToolRegistry>,
}

/// The agent's prompt with `catalogue`'s block.
struct PromptWithCatalogue {
    catalogue: Arc<Catalogue>,
    prompt: Arc<SystemPrompt>,
}

impl AgentCore {
    /// The catalogue for this turn. Found on a blocking thread the first time (or after the
    /// host installed another file system): files are read, maybe through host code, so a
    /// cancelled turn stops waiting (and goes on without skills, to its end).
    pub(super) async fn turn_skills(&self, cancel: &CancelToken) -> Option<skills::Loaded> {
        if !self.skills.enabled() {
            return None;
        }
        let fs = self.tool_services.fs();
        if let Some(l) = self.skills.cached(&fs) {
            return Some(l);
        }
        let core_skills = self.skills.clone();
        let found = tokio::task::spawn_blocking(move || core_skills.load(&fs));
        tokio::select! {
            found = found => found.ok().flatten(),
            _ = cancel.cancelled() => None,
        }
    }

    /// `tools` with `activate_skill` when the catalogue has a skill and the config selects the
    /// tool; a host tool of that name wins.
    pub(super) fn with_skill_tool(
        &self,
        tools: Arc<ToolRegistry>,
        loaded: Option<&skills::Loaded>,
    ) -> Arc<ToolRegistry> {
        let Some((tool, catalogue)) = loaded.and_then(|l| Some((l.tool.clone()?, &l.catalogue)))
        else {
            return tools;
        };
        if tools.get(skills::activate::NAME).is_some()
            || !crate::tools::ToolSelection::of(&self.config.tools).selects(skills::activate::NAME)
        {
            return tools;
        }
        let mut cache = lock(&self.skills_in_turns.tools);
        if let Some(hit) = cache
            .as_ref()
            .filter(|c| Arc::ptr_eq(&c.from, &tools) && Arc::ptr_eq(&c.catalogue, catalogue))
        {
            return hit.made.clone();
        }
        let mut reg = (*tools).clone();
        reg.insert(tool as Arc<dyn Tool>);
        let made = Arc::new(reg);
        let old = cache.replace(ToolsWithSkill {
            from: tools,
            catalogue: catalogue.clone(),
            made: made.clone(),
        });
        drop(cache);
        // A tool dropped with it may run a host finalizer: never under the lock.
        drop(old);
        made
    }

    /// The agent's prompt with the catalogue's block, when it has one (made once per
    /// catalogue).
    pub(super) fn skills_prompt(&self, loaded: &skills::Loaded) -> Option<Arc<SystemPrompt>> {
        let catalogue = &loaded.catalogue;
        let block = catalogue.prompt_block()?;
        let mut cache = lock(&self.skills_in_turns.prompt);
        if let Some(hit) = cache
            .as_ref()
            .filter(|c| Arc::ptr_eq(&c.catalogue, catalogue))
        {
            return Some(hit.prompt.clone());
        }
        let prompt = Arc::new(SystemPrompt::new(format!(
            "{}\n\n{block}",
            self.system_prompt.text()
        )));
        *cache = Some(PromptWithCatalogue {
            catalogue: catalogue.clone(),
            prompt: prompt.clone(),
        });
        Some(prompt)
    }

    /// The estimated tokens of the system prompt the last turn sent: the agent's own, with the
    /// skills catalogue when a turn showed it (the estimate outside a turn counts it too).
    pub(super) fn prompt_tokens_now(&self) -> u64 {
        if self.skills.enabled() {
            if let Some(p) = lock(&self.skills_in_turns.prompt).as_ref() {
                return p.prompt.tokens();
            }
        }
        crate::turn::compaction::estimate::text_tokens(self.system_prompt.text())
    }

    /// The catalogue's block for a child's prompt, if this agent's turns have one.
    pub(super) fn skills_block(&self) -> Option<Arc<str>> {
        if !self.skills.enabled() {
            return None;
        }
        let loaded = self.skills.cached(&self.tool_services.fs())?;
        loaded.catalogue.prompt_block().map(Arc::from)
    }
}

impl Agent {
    /// The skills report (`agentao_agent_skills`): finds the catalogue if no turn has yet
    /// (blocking this thread on the file system).
    pub fn skills_json(&self) -> String {
        let report: Value = self.core.skills.report(&self.core.tool_services.fs());
        report.to_string()
    }
}
