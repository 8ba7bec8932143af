//! Where long results and MCP binary resources are saved: the directory the host configured
//! (`tools.settings.tool_outputs_dir`), or `<workspace>/.agentao/tool-outputs`.
//!
//! A directory inside the workspace must be the workspace's own all the way down: the
//! checkout controls what is there, and a planted `.agentao -> ~/notes` would otherwise make
//! the library write (and prune) wherever the repository points, even in read-only mode. So
//! each component below the workspace is looked at without following links and created one
//! at a time; a symlink or a non-directory refuses the save (the model then gets the excerpt
//! without a saved copy). A directory the host named outside the workspace is the host's
//! choice and is used as it is, links included.

use std::io::{Error, ErrorKind};
use std::path::{Component, Path, PathBuf};

use super::normalize;
use crate::permissions::path_policy;

/// The spill directory of one agent.
#[derive(Debug, Clone)]
pub struct SpillDir {
    path: PathBuf,
    /// The workspace, when `path` lies in it: every component below it must be a real
    /// directory.
    confined_to: Option<PathBuf>,
}

impl SpillDir {
    /// `configured` (`~` expanded, relative to `workspace`, `.`/`..` folded) in `workspace`
    /// (absolute, canonical).
    pub(crate) fn new(workspace: &Path, configured: &str) -> SpillDir {
        let path = normalize(&path_policy::join_to_root(workspace, configured));
        let confined_to = path.starts_with(workspace).then(|| workspace.to_path_buf());
        SpillDir { path, confined_to }
    }

    /// A directory used as it is (tests and services built without a workspace).
    pub(crate) fn unconfined(path: PathBuf) -> SpillDir {
        SpillDir {
            path,
            confined_to: None,
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Creates what is missing of the directory on the local disk and returns it; refuses a
    /// directory of the workspace reached through a symlink or a file.
    pub(crate) fn prepare(&self) -> std::io::Result<&Path> {
        let Some(root) = &self.confined_to else {
            std::fs::create_dir_all(&self.path)?;
            return Ok(&self.path);
        };
        let below = self.path.strip_prefix(root).map_err(Error::other)?;
        let mut at = root.clone();
        for part in below.components() {
            let Component::Normal(name) = part else {
                return Err(Error::other(format!(
                    "{} is not a plain path in the workspace",
                    self.path.display()
                )));
            };
            at.push(name);
            ensure_real_directory(&at)?;
        }
        Ok(&self.path)
    }
}

/// `dir` is a directory and not a link to one; created when missing.
fn ensure_real_directory(dir: &Path) -> std::io::Result<()> {
    let meta = match std::fs::symlink_metadata(dir) {
        Ok(meta) => meta,
        Err(e) if e.kind() == ErrorKind::NotFound => match std::fs::create_dir(dir) {
            Ok(()) => return Ok(()),
            // Another save created it in between: look at what it is.
            Err(e) if e.kind() == ErrorKind::AlreadyExists => std::fs::symlink_metadata(dir)?,
            Err(e) => return Err(e),
        },
        Err(e) => return Err(e),
    };
    if meta.file_type().is_dir() {
        Ok(())
    } else {
        Err(Error::other(format!(
            "{} is a symlink or a file in the workspace, not a directory of it",
            dir.display()
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inside_the_workspace_only_real_directories() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let out = root.join("out");
        std::fs::create_dir(&out).unwrap();

        let spill = SpillDir::new(&root, ".agentao/tool-outputs");
        assert_eq!(spill.prepare().unwrap(), root.join(".agentao/tool-outputs"));
        assert!(root.join(".agentao/tool-outputs").is_dir());

        std::os::unix::fs::symlink(&out, root.join("link")).unwrap();
        let through_link = SpillDir::new(&root, "link/spill");
        let e = through_link.prepare().unwrap_err().to_string();
        assert!(e.contains("is a symlink or a file in the workspace"), "{e}");
        assert!(!out.join("spill").exists());

        std::fs::write(root.join("file"), "").unwrap();
        assert!(SpillDir::new(&root, "file/x").prepare().is_err());

        // `..` is folded: a host's `../elsewhere` is outside, and used as it is.
        let sibling = SpillDir::new(&root.join("sub"), "../sub2/out");
        assert_eq!(sibling.path(), root.join("sub2/out"));
        assert!(sibling.confined_to.is_none());
        std::fs::create_dir(root.join("sub")).unwrap();
        assert!(sibling.prepare().is_ok());
    }

    #[test]
    fn outside_the_workspace_the_hosts_choice_is_followed() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let ws = root.join("ws");
        std::fs::create_dir(&ws).unwrap();
        std::fs::create_dir(root.join("real")).unwrap();
        std::os::unix::fs::symlink(root.join("real"), root.join("alias")).unwrap();
        let spill = SpillDir::new(&ws, root.join("alias/spill").to_str().unwrap());
        assert!(spill.prepare().is_ok());
        assert!(root.join("real/spill").is_dir());
    }
}
