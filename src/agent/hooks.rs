//! The agent's side of lifecycle hooks: the host's in-process hooks, installed between turns
//! beside the configured command hooks (docs/hooks.md).

use std::sync::Arc;

use super::{lock, Agent, AgentError, TurnOptions};
use crate::hooks::{Hooks, HostHooks};

impl Agent {
    /// Installs the host's hooks (`None` removes them), between turns: asked at every hook
    /// point from the next turn on, after the configured command hooks.
    pub fn set_host_hooks(&self, host: Option<Arc<dyn HostHooks>>) -> Result<(), AgentError> {
        let (slot, _token) = self.begin(&TurnOptions::default())?;
        let config = &self.core.config;
        let hooks = Hooks::new(
            config.hooks.clone(),
            &config.working_directory,
            host,
            config.reply_timeout,
        )
        .map(Arc::new);
        let old = std::mem::replace(&mut *lock(&self.core.hooks), hooks);
        drop(slot);
        // The old hooks may run the host's finalizer: never under the lock.
        drop(old);
        Ok(())
    }
}
