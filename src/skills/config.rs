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
    #[serde(default, deserialize_with = "user_directory")]
    user_directory: UserDirectory,
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
    #[serde(default)]
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

/// `skills.user_directory`: absent, `null` (or `""`), or a path.
#[derive(Default)]
enum UserDirectory {
    /// `$HOME/.agentao/skills`, as the reference.
    #[default]
    Home,
    None,
    At(String),
}

/// A present key: `null` and `""` mean no user directory (an absent key is the default).
fn user_directory<'de, D: serde::Deserializer<'de>>(d: D) -> Result<UserDirectory, D::Error> {
    Ok(match Option::<String>::deserialize(d)? {
        None => UserDirectory::None,
        Some(s) if s.is_empty() => UserDirectory::None,
        Some(s) => UserDirectory::At(s),
    })
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
            let user = match &raw.user_directory {
                UserDirectory::Home => std::env::var_os("HOME")
                    .filter(|h| !h.is_empty())
                    .map(|h| PathBuf::from(h).join(".agentao").join("skills")),
                UserDirectory::None => None,
                UserDirectory::At(d) => Some(crate::tools::resolve_path(workspace, d)),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn user_location(section: Value) -> Option<PathBuf> {
        let c = SkillsConfig::from_value(Some(&section), Path::new("/ws")).unwrap();
        c.locations
            .iter()
            .find(|l| l.origin == SkillOrigin::User)
            .map(|l| l.dir.clone())
    }

    #[test]
    fn the_user_directory_is_home_by_default_and_none_when_null() {
        let home = std::env::var_os("HOME").filter(|h| !h.is_empty());
        assert_eq!(
            user_location(serde_json::json!({})),
            home.map(|h| PathBuf::from(h).join(".agentao/skills"))
        );
        assert_eq!(
            user_location(serde_json::json!({"user_directory": null})),
            None
        );
        assert_eq!(
            user_location(serde_json::json!({"user_directory": ""})),
            None
        );
        assert_eq!(
            user_location(serde_json::json!({"user_directory": "mine"})),
            Some(PathBuf::from("/ws/mine"))
        );
        // Without discovery no location of the reference's is read.
        let c = SkillsConfig::from_value(
            Some(&serde_json::json!({"discover": false})),
            Path::new("/ws"),
        )
        .unwrap();
        assert!(c.enabled && c.locations.is_empty());
        let off = SkillsConfig::from_value(
            Some(&serde_json::json!({"enabled": false})),
            Path::new("/ws"),
        )
        .unwrap();
        assert!(!off.enabled);
        assert!(SkillsConfig::from_value(
            Some(&serde_json::json!({"user_directory": 3})),
            Path::new("/ws")
        )
        .unwrap_err()
        .contains("skills.user_directory"));
    }
}
