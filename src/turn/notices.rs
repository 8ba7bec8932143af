//! Background agents' completion notices (spec §5.2 step 3, §6.5): drained at the start of an
//! LLM iteration and stored in the history as one `<system-reminder>` user message. A turn
//! without a source (a sub-agent's) never drains.

use super::Turn;
use crate::events::turn_event::BackgroundNotificationInjected;
use crate::events::TurnEvent;

/// Where a turn reads the notices queued since its last LLM iteration.
pub(crate) trait BackgroundNotices: Send + Sync {
    /// The queued notices, removed from the queue.
    fn drain(&self) -> Vec<String>;
}

impl Turn<'_, '_> {
    pub(super) fn inject_background_notices(&mut self) {
        let Some(source) = self.env.background else {
            return;
        };
        let notes = source.drain();
        if notes.is_empty() {
            return;
        }
        let content = notes.join("\n\n");
        self.record_user(format!(
            "<system-reminder>\nBackground agent update:\n{content}\n</system-reminder>"
        ));
        self.emit_event(&TurnEvent::BackgroundNotificationInjected(
            BackgroundNotificationInjected {
                note_count: notes.len(),
                content: &content,
            },
        ));
    }
}
