//! Skills (spec §8.3, docs/skills.md): `SKILL.md` files found in the reference's locations and
//! in the directories the host names, plus the host's inline skills, listed in the system
//! prompt and loaded into the conversation by `activate_skill`.
//!
//! One file per concept: the config section (`config.rs`), a skill (`skill.rs`), a file's front
//! matter (`front_matter.rs`), finding them (`discovery.rs`), the catalogue and its prompt block
//! (`catalogue.rs`), the tool (`activate.rs`). [`AgentSkills`] is what an agent holds: the
//! section, and the catalogue found through the file system the agent uses now.

pub(crate) mod activate;
pub(crate) mod catalogue;
pub(crate) mod config;
pub(crate) mod discovery;
pub(crate) mod front_matter;
pub(crate) mod skill;

use std::sync::{Arc, Mutex, Weak};

use serde_json::Value;

pub(crate) use catalogue::Catalogue;
pub(crate) use config::SkillsConfig;

use crate::tools::{FileSystem, Tool};

/// The largest `SKILL.md` (or inline `instructions`) read, in bytes.
pub(crate) const MAX_SKILL_BYTES: usize = 256 * 1024;
/// How many skills one agent may have.
pub(crate) const MAX_SKILLS: usize = 128;
/// How many subdirectories of one location are looked at.
pub(crate) const MAX_ENTRIES_PER_LOCATION: usize = 1024;
/// The longest skill name, in characters.
pub(crate) const MAX_NAME_CHARS: usize = 64;
/// The longest description (and `when-to-use`) kept, in characters (the Agent Skills limit).
pub(crate) const MAX_DESCRIPTION_CHARS: usize = 1024;
/// The largest catalogue block in the system prompt, in bytes.
pub(crate) const MAX_CATALOGUE_BYTES: usize = 16 * 1024;

/// An agent's skills: its config section and the catalogue found through the file system it
/// used (found again when the host installs another).
#[derive(Default)]
pub(crate) struct AgentSkills {
    config: SkillsConfig,
    loaded: Mutex<Option<Loaded>>,
}

/// A catalogue and the file system it was found through (held weakly: only its address is
/// compared, and the allocation cannot be reused while the weak pointer lives).
#[derive(Clone)]
pub(crate) struct Loaded {
    fs: Weak<dyn FileSystem>,
    pub(crate) catalogue: Arc<Catalogue>,
    /// `activate_skill`, when there is a skill to activate.
    pub(crate) tool: Option<Arc<dyn Tool>>,
}

impl AgentSkills {
    pub(crate) fn new(config: SkillsConfig) -> Self {
        AgentSkills {
            config,
            loaded: Mutex::new(None),
        }
    }

    /// Whether the agent has a `skills` section that is enabled (otherwise it reads nothing).
    pub(crate) fn enabled(&self) -> bool {
        self.config.enabled
    }

    /// The catalogue already found through `fs`, if any (no file is read).
    pub(crate) fn cached(&self, fs: &Arc<dyn FileSystem>) -> Option<Loaded> {
        if !self.config.enabled {
            return None;
        }
        let loaded = self.loaded.lock().unwrap_or_else(|e| e.into_inner());
        loaded
            .as_ref()
            .filter(|l| std::ptr::addr_eq(l.fs.as_ptr(), Arc::as_ptr(fs)))
            .cloned()
    }

    /// The catalogue found through `fs`: the cached one, or found now (blocking: files are
    /// read through `fs`, which may be host code).
    pub(crate) fn load(&self, fs: &Arc<dyn FileSystem>) -> Option<Loaded> {
        if !self.config.enabled {
            return None;
        }
        if let Some(l) = self.cached(fs) {
            return Some(l);
        }
        let catalogue = Arc::new(Catalogue::new(discovery::discover(&self.config, &**fs)));
        let tool = (!catalogue.is_empty())
            .then(|| Arc::new(activate::ActivateSkill::new(catalogue.clone())) as Arc<dyn Tool>);
        let loaded = Loaded {
            fs: Arc::downgrade(fs),
            catalogue,
            tool,
        };
        let old = self
            .loaded
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .replace(loaded.clone());
        drop(old);
        Some(loaded)
    }

    /// The host's report (`agentao_agent_skills`): `{"enabled": false}` without skills.
    pub(crate) fn report(&self, fs: &Arc<dyn FileSystem>) -> Value {
        match self.load(fs) {
            Some(l) => l.catalogue.report(),
            None => serde_json::json!({"enabled": false, "skills": [], "skipped": []}),
        }
    }
}
