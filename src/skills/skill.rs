//! One skill as the catalogue holds it: its name and what the model is told of it. The
//! instructions of a discovered skill stay on disk until it is activated, so an agent with many
//! skills holds only their names and descriptions.

use std::path::PathBuf;
use std::sync::Arc;

use super::MAX_NAME_CHARS;

/// Where a skill came from, lowest precedence first (a later one replaces an earlier one of
/// the same name).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, strum::IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
pub(crate) enum SkillOrigin {
    /// `<home>/.agentao/skills` (config `skills.user_directory`).
    User,
    /// `<workspace>/.agentao/skills`.
    Workspace,
    /// `<workspace>/skills`.
    Repository,
    /// A directory of `skills.directories`.
    Configured,
    /// `skills.inline`: the host's own.
    Inline,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Skill {
    pub(crate) name: String,
    pub(crate) description: String,
    /// Front matter `when-to-use` (or `when_to_use`), shown after the description.
    pub(crate) when_to_use: String,
    /// The body's first `# ` heading, else the name.
    pub(crate) title: String,
    pub(crate) origin: SkillOrigin,
    /// The `SKILL.md` file; `None` for an inline skill.
    pub(crate) path: Option<PathBuf>,
    /// An inline skill's instructions; a file's are read when it is activated.
    pub(crate) instructions: Option<Arc<str>>,
}

impl Skill {
    /// The directory relative paths in the instructions resolve against.
    pub(crate) fn directory(&self) -> Option<&std::path::Path> {
        self.path.as_deref().and_then(std::path::Path::parent)
    }
}

/// A skill name as the catalogue and the tool's enum take it: trimmed, 1 to 64 characters, no
/// control characters (a name is one line of the system prompt).
pub(crate) fn checked_name(raw: &str) -> Result<String, String> {
    let name = raw.trim();
    if name.is_empty() {
        return Err("`name` must not be empty".into());
    }
    if name.chars().count() > MAX_NAME_CHARS {
        return Err(format!("`name` is longer than {MAX_NAME_CHARS} characters"));
    }
    if name.chars().any(char::is_control) {
        return Err("`name` must not contain control characters".into());
    }
    Ok(name.to_owned())
}

/// The first Markdown `# ` heading of a body.
pub(crate) fn title_of(body: &str) -> Option<&str> {
    body.lines()
        .find_map(|l| l.strip_prefix("# "))
        .map(str::trim)
        .filter(|t| !t.is_empty())
}
