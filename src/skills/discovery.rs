//! Finding skills: each location's subdirectories that hold a `SKILL.md`, read through the
//! agent's file system (a host's, when it installed one), then the host's inline skills. A
//! file that cannot be a skill is skipped with the reason, never an error of the agent.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::config::{Location, SkillsConfig};
use super::front_matter;
use super::skill::{checked_name, title_of, Skill, SkillOrigin};
use super::{MAX_DESCRIPTION_CHARS, MAX_ENTRIES_PER_LOCATION, MAX_SKILLS, MAX_SKILL_BYTES};
use crate::tools::FileSystem;

/// Why a `SKILL.md` (or a location) is not in the catalogue.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum SkipReason {
    TooLarge {
        bytes: u64,
    },
    NotUtf8,
    FrontMatter(String),
    Name(String),
    /// On the local disk it resolves outside the location's bound (a link out).
    OutsideLocation {
        resolved: PathBuf,
    },
    Unreadable(String),
    /// More than [`MAX_SKILLS`] names.
    OverLimit,
    /// A skill of the same name from a later location (or inline) replaced it.
    Shadowed,
}

impl std::fmt::Display for SkipReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SkipReason::TooLarge { bytes } => write!(
                f,
                "the file has {bytes} bytes, more than the {MAX_SKILL_BYTES} a SKILL.md may have"
            ),
            SkipReason::NotUtf8 => f.write_str("the file is not UTF-8"),
            SkipReason::FrontMatter(m) => f.write_str(m),
            SkipReason::Name(m) => f.write_str(m),
            SkipReason::OutsideLocation { resolved } => write!(
                f,
                "it resolves to {}, outside the directory it was found in",
                resolved.display()
            ),
            SkipReason::Unreadable(m) => write!(f, "cannot be read: {m}"),
            SkipReason::OverLimit => write!(f, "more than {MAX_SKILLS} skills"),
            SkipReason::Shadowed => f.write_str("a later skill of the same name replaces it"),
        }
    }
}

impl SkipReason {
    /// A stable word for the report's `kind`.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            SkipReason::TooLarge { .. } => "too_large",
            SkipReason::NotUtf8 => "not_utf8",
            SkipReason::FrontMatter(_) => "front_matter",
            SkipReason::Name(_) => "name",
            SkipReason::OutsideLocation { .. } => "outside_location",
            SkipReason::Unreadable(_) => "unreadable",
            SkipReason::OverLimit => "over_limit",
            SkipReason::Shadowed => "shadowed",
        }
    }
}

/// A skipped file (or location) and why; `name` when it was read that far.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SkippedSkill {
    pub(crate) path: Option<PathBuf>,
    pub(crate) name: Option<String>,
    pub(crate) reason: SkipReason,
}

/// What discovery found: the skills by name, and what it skipped.
#[derive(Debug, Default)]
pub(crate) struct Discovered {
    pub(crate) skills: BTreeMap<String, Skill>,
    pub(crate) skipped: Vec<SkippedSkill>,
}

impl Discovered {
    fn add(&mut self, skill: Skill) {
        if !self.skills.contains_key(&skill.name) && self.skills.len() >= MAX_SKILLS {
            self.skipped.push(SkippedSkill {
                path: skill.path,
                name: Some(skill.name),
                reason: SkipReason::OverLimit,
            });
            return;
        }
        if let Some(old) = self.skills.insert(skill.name.clone(), skill) {
            self.skipped.push(SkippedSkill {
                path: old.path,
                name: Some(old.name),
                reason: SkipReason::Shadowed,
            });
        }
    }

    fn skip(&mut self, path: &Path, reason: SkipReason) {
        self.skipped.push(SkippedSkill {
            path: Some(path.to_path_buf()),
            name: None,
            reason,
        });
    }
}

/// Every location in order, then the inline skills.
pub(crate) fn discover(config: &SkillsConfig, fs: &dyn FileSystem) -> Discovered {
    let mut found = Discovered::default();
    for location in &config.locations {
        scan(location, fs, &mut found);
    }
    for skill in &config.inline {
        found.add(skill.clone());
    }
    found
}

/// On the local disk, where `path` really is, if that is inside `bound`; `Err` with the
/// resolved path otherwise. A host's file system is trusted with its own links.
fn contained(fs: &dyn FileSystem, path: &Path, bound: &Path) -> Result<PathBuf, SkipReason> {
    if !fs.is_local_disk() {
        return Ok(path.to_path_buf());
    }
    let resolved =
        std::fs::canonicalize(path).map_err(|e| SkipReason::Unreadable(e.to_string()))?;
    let bound = std::fs::canonicalize(bound).unwrap_or_else(|_| bound.to_path_buf());
    if resolved.starts_with(&bound) {
        Ok(resolved)
    } else {
        Err(SkipReason::OutsideLocation { resolved })
    }
}

fn scan(location: &Location, fs: &dyn FileSystem, found: &mut Discovered) {
    let dir = &location.dir;
    if !fs.is_dir(dir) {
        // The reference's locations are optional; a directory the host named is not.
        if location.origin == SkillOrigin::Configured {
            found.skip(dir, SkipReason::Unreadable("no such directory".into()));
        }
        return;
    }
    if let Err(reason) = contained(fs, dir, &location.bound) {
        found.skip(dir, reason);
        return;
    }
    let mut entries = match fs.list_dir(dir) {
        Ok(entries) => entries,
        Err(e) => {
            found.skip(dir, SkipReason::Unreadable(e.to_string()));
            return;
        }
    };
    entries.retain(|e| e.is_dir && !e.name.starts_with('.'));
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    if entries.len() > MAX_ENTRIES_PER_LOCATION {
        found.skip(
            dir,
            SkipReason::Unreadable(format!(
                "{} subdirectories; only the first {MAX_ENTRIES_PER_LOCATION} are read",
                entries.len()
            )),
        );
        entries.truncate(MAX_ENTRIES_PER_LOCATION);
    }
    for entry in entries {
        let file = dir.join(&entry.name).join("SKILL.md");
        match fs.stat(&file) {
            Ok(stat) if stat.is_file => {}
            // Not a skill directory.
            _ => continue,
        }
        match read_skill(fs, &file, &entry.name, location) {
            Ok(skill) => found.add(skill),
            Err(reason) => found.skip(&file, reason),
        }
    }
}

/// Reads one `SKILL.md` (through `fs`) as a skill named by its front matter, else by its
/// directory.
fn read_skill(
    fs: &dyn FileSystem,
    file: &Path,
    dir_name: &str,
    location: &Location,
) -> Result<Skill, SkipReason> {
    let path = contained(fs, file, &location.bound)?;
    let text = read_bounded(fs, &path)?;
    let parsed = front_matter::parse(&text).map_err(SkipReason::FrontMatter)?;
    let name =
        checked_name(parsed.front.name.as_deref().unwrap_or(dir_name)).map_err(SkipReason::Name)?;
    Ok(Skill {
        title: title_of(parsed.body).unwrap_or(&name).to_owned(),
        description: bounded(parsed.front.description.unwrap_or_default()),
        when_to_use: bounded(parsed.front.when_to_use.unwrap_or_default()),
        name,
        origin: location.origin,
        path: Some(path),
        instructions: None,
    })
}

/// A `SKILL.md`'s text: at most [`MAX_SKILL_BYTES`] bytes of UTF-8. Read through `fs` with
/// one byte more than the bound, so a file that grew after its `stat` is still refused.
pub(crate) fn read_bounded(fs: &dyn FileSystem, path: &Path) -> Result<String, SkipReason> {
    let stat = fs
        .stat(path)
        .map_err(|e| SkipReason::Unreadable(e.to_string()))?;
    if stat.size > MAX_SKILL_BYTES as u64 {
        return Err(SkipReason::TooLarge { bytes: stat.size });
    }
    let bytes = fs
        .read_partial(path, MAX_SKILL_BYTES + 1)
        .map_err(|e| SkipReason::Unreadable(e.to_string()))?;
    if bytes.len() > MAX_SKILL_BYTES {
        return Err(SkipReason::TooLarge {
            bytes: bytes.len() as u64,
        });
    }
    String::from_utf8(bytes).map_err(|_| SkipReason::NotUtf8)
}

/// A description trimmed and cut to [`MAX_DESCRIPTION_CHARS`] (the Agent Skills limit).
fn bounded(text: String) -> String {
    let text = text.trim();
    match text.char_indices().nth(MAX_DESCRIPTION_CHARS) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::io;
    use std::path::{Path, PathBuf};

    use super::*;
    use crate::tools::{FileEntry, FileStat, WalkEntry};

    /// A host's file system that exists only in memory: discovery must find skills in it and
    /// read nothing from the real disk.
    #[derive(Default)]
    struct MemFs {
        files: BTreeMap<PathBuf, Vec<u8>>,
    }

    impl MemFs {
        fn is_dir_path(&self, p: &Path) -> bool {
            self.files.keys().any(|f| f != p && f.starts_with(p))
        }
    }

    impl FileSystem for MemFs {
        fn read_bytes(&self, path: &Path) -> io::Result<Vec<u8>> {
            self.files
                .get(path)
                .cloned()
                .ok_or_else(|| io::ErrorKind::NotFound.into())
        }
        fn read_partial(&self, path: &Path, n: usize) -> io::Result<Vec<u8>> {
            let mut b = self.read_bytes(path)?;
            b.truncate(n);
            Ok(b)
        }
        fn write_bytes(&self, _: &Path, _: &[u8], _: bool) -> io::Result<()> {
            Err(io::ErrorKind::Unsupported.into())
        }
        fn list_dir(&self, path: &Path) -> io::Result<Vec<FileEntry>> {
            let mut names: Vec<String> = self
                .files
                .keys()
                .filter_map(|f| f.strip_prefix(path).ok())
                .filter_map(|rel| rel.components().next())
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            names.dedup();
            Ok(names
                .into_iter()
                .map(|name| {
                    let is_dir = self.is_dir_path(&path.join(&name));
                    FileEntry {
                        name,
                        is_dir,
                        is_file: !is_dir,
                        size: 0,
                    }
                })
                .collect())
        }
        fn walk(
            &self,
            _: &Path,
            _: Option<usize>,
            _: &dyn Fn() -> bool,
        ) -> io::Result<Vec<WalkEntry>> {
            Err(io::ErrorKind::Unsupported.into())
        }
        fn stat(&self, path: &Path) -> io::Result<FileStat> {
            if let Some(b) = self.files.get(path) {
                return Ok(FileStat {
                    size: b.len() as u64,
                    mtime: 0.0,
                    is_dir: false,
                    is_file: true,
                });
            }
            if self.is_dir_path(path) {
                return Ok(FileStat {
                    size: 0,
                    mtime: 0.0,
                    is_dir: true,
                    is_file: false,
                });
            }
            Err(io::ErrorKind::NotFound.into())
        }
    }

    #[test]
    fn discovery_goes_through_the_hosts_file_system() {
        let mut fs = MemFs::default();
        let mut add = |path: &str, text: &str| {
            fs.files
                .insert(PathBuf::from(path), text.as_bytes().to_vec());
        };
        add(
            "/virtual-home/skills/mine/SKILL.md",
            "---\ndescription: Mine.\n---\n# Mine\nx",
        );
        add(
            "/virtual-ws/.agentao/skills/proj/SKILL.md",
            "---\nname: proj\ndescription: Project.\n---\nx",
        );
        add(
            "/virtual-ws/skills/big/SKILL.md",
            &"x".repeat(MAX_SKILL_BYTES + 1),
        );
        let config = SkillsConfig::from_value(
            Some(&serde_json::json!({"user_directory": "/virtual-home/skills"})),
            Path::new("/virtual-ws"),
        )
        .unwrap();
        let found = discover(&config, &fs);
        let names: Vec<&str> = found.skills.keys().map(String::as_str).collect();
        assert_eq!(names, ["mine", "proj"]);
        assert_eq!(found.skills["mine"].title, "Mine");
        assert_eq!(found.skills["mine"].origin, SkillOrigin::User);
        // Paths are the host's, unresolved by the local disk.
        assert_eq!(
            found.skills["proj"].path.as_deref(),
            Some(Path::new("/virtual-ws/.agentao/skills/proj/SKILL.md"))
        );
        assert_eq!(found.skipped.len(), 1);
        assert_eq!(
            found.skipped[0].reason,
            SkipReason::TooLarge {
                bytes: MAX_SKILL_BYTES as u64 + 1
            }
        );
    }
}
