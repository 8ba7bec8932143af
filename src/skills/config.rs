//! The `skills` section of the agent config (docs/config.md, docs/skills.md), typed.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use super::skill::{Skill, SkillOrigin};
use super::{MAX_DESCRIPTION_CHARS, MAX_SKILL_BYTES};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSection {
    #[serde(default = "yes")]
    enabled: bool,
    #[serde(default = "yes")]
    discover: bool,
    /// `null`: no user directory; absent: `$HOME/.agentao/skills`.
    #[serde(default = "home_default")]
    user_directory: Option<String>,
    #[serde(default)]
    directories: Vec<String>,
    #[serde(default)]
    inline: Vec<RawInline>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawInline {
    name: String,
    #[serde(default)]
    description: String,
    instructions: String,
    #[serde(default, rename = "when_to_use")]
    when_to_use: String,
}

impl crate::config_field::Section for RawSection {}

/// Gives errors the section's path (`config field `skills.inline[0]`: …`).
#[derive(Deserialize)]
struct Wrapper {
    #[serde(deserialize_with = "crate::config_field::object")]
    skills: RawSection,
}

fn yes() -> bool {
    true
}

/// A sentinel for "absent" (serde cannot tell an absent key from `null` in an `Option`).
const HOME_DEFAULT: &str = "\0home";

fn home_default() -> Option<String> {
    Some(HOME_DEFAULT.to_owned())
}

/// Where discovery looks, in precedence order (a later skill replaces an earlier one of the
/// same name), and the host's inline skills, which come last.
#[derive(Debug, Clone, Default)]
pub(crate) struct SkillsConfig {
    /// The section is present and `enabled`: without it the agent has no skills and reads
    /// nothing.
    pub(crate) enabled: bool,
    pub(crate) locations: Vec<Location>,
    pub(crate) inline: Vec<Skill>,
}

/// One directory whose subdirectories hold a `SKILL.md` each.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Location {
    pub(crate) dir: PathBuf,
    pub(crate) origin: SkillOrigin,
    /// What a skill's file may resolve to on the local disk: a link that leads outside is
    /// skipped.
    pub(crate) bound: PathBuf,
}

impl SkillsConfig {
    /// Reads the raw section (`None`: no skills). Relative directories are resolved against the
    /// workspace; an inline skill that is not valid is a config error (the host wrote it).
    pub(crate) fn from_value(v: Option<&Value>, workspace: &Path) -> Result<Self, String> {
        let Some(v) = v else {
            return Ok(SkillsConfig::default());
        };
        let doc = serde_json::json!({ "skills": v });
        let Wrapper { skills: raw } =
            serde_path_to_error::deserialize(&doc).map_err(|e| crate::config_field::message(&e))?;
        if !raw.enabled {
            return Ok(SkillsConfig::default());
        }
        let mut locations = Vec::new();
        if raw.discover {
            let user = match raw.user_directory.as_deref() {
                Some(HOME_DEFAULT) => std::env::var_os("HOME")
                    .filter(|h| !h.is_empty())
                    .map(|h| PathBuf::from(h).join(".agentao").join("skills")),
                Some("") | None => None,
                Some(d) => Some(crate::tools::resolve_path(workspace, d)),
            };
            if let Some(dir) = user {
                locations.push(Location {
                    bound: dir.clone(),
                    dir,
                    origin: SkillOrigin::User,
                });
            }
            for (rel, origin) in [
                (".agentao/skills", SkillOrigin::Workspace),
                ("skills", SkillOrigin::Repository),
            ] {
                locations.push(Location {
                    dir: workspace.join(rel),
                    origin,
                    bound: workspace.to_path_buf(),
                });
            }
        }
        for (i, d) in raw.directories.iter().enumerate() {
            if d.is_empty() {
                return Err(format!(
                    "config field `skills.directories[{i}]`: must not be empty"
                ));
            }
            let dir = crate::tools::resolve_path(workspace, d);
            locations.push(Location {
                bound: dir.clone(),
                dir,
                origin: SkillOrigin::Configured,
            });
        }
        let mut inline = Vec::with_capacity(raw.inline.len());
        for (i, s) in raw.inline.into_iter().enumerate() {
            let at = |m: String| format!("config field `skills.inline[{i}]`: {m}");
            let name = super::skill::checked_name(&s.name).map_err(at)?;
            if s.instructions.len() > MAX_SKILL_BYTES {
                return Err(at(format!(
                    "`instructions` is longer than {MAX_SKILL_BYTES} bytes"
                )));
            }
            if s.description.chars().count() > MAX_DESCRIPTION_CHARS {
                return Err(at(format!(
                    "`description` is longer than {MAX_DESCRIPTION_CHARS} characters"
                )));
            }
            inline.push(Skill {
                title: super::skill::title_of(&s.instructions)
                    .unwrap_or(&name)
                    .to_owned(),
                name,
                description: s.description.trim().to_owned(),
                when_to_use: s.when_to_use.trim().to_owned(),
                origin: SkillOrigin::Inline,
                path: None,
                instructions: Some(s.instructions.into()),
            });
        }
        Ok(SkillsConfig {
            enabled: true,
            locations,
            inline,
        })
    }
}
