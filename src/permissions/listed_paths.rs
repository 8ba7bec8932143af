//! The read path policy applied to the paths a listing yields (a walk's answer, a directory's
//! entries) before anything of what they lead to is shown or read.
//!
//! A listing only proves where a path is spelled, not where it leads: a checkout may hold a
//! link out of the workspace, and a host's walk may list it (as `os.walk` does), or even
//! descend through it. Whichever slot then reads the path, the host's or the local disk's,
//! would read outside. So every listed path is resolved the way `read_file` resolves its
//! argument, on the local disk, and the listing tools keep only what stays inside.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::path_policy;

/// Where a listed path leads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Listed {
    /// Inside the workspace (or reads outside are allowed): list it, read it.
    Inside,
    /// A link, in a directory inside the workspace, that resolves outside: a listing may show
    /// the link's name, and nothing of what it leads to.
    LinkOut,
    /// Reached through a link out (the listing went through it): not shown at all.
    Outside,
}

/// Checks the paths of one listing. Directories are resolved once each, so a listing costs
/// one `lstat` per entry plus one resolution per directory.
pub(crate) struct ListedPaths<'a> {
    root: &'a Path,
    allow_outside: bool,
    /// A directory as listed -> its resolution, if that stays inside the root.
    dirs: HashMap<PathBuf, Option<PathBuf>>,
}

impl<'a> ListedPaths<'a> {
    /// For a workspace `root` (absolute, canonical); `allow_outside` is
    /// `tools.allow_reads_outside_workspace`, which admits every path.
    pub(crate) fn new(root: &'a Path, allow_outside: bool) -> Self {
        ListedPaths {
            root,
            allow_outside,
            dirs: HashMap::new(),
        }
    }

    /// Where the absolute `path` leads.
    pub(crate) fn check(&mut self, path: &Path) -> Listed {
        if self.allow_outside {
            return Listed::Inside;
        }
        let (Some(dir), Some(leaf)) = (path.parent(), path.file_name()) else {
            return self.whole(path);
        };
        // `a/..` has the name `..` only by spelling; listings never yield one, but resolving
        // it whole keeps the answer right if one does.
        if leaf == ".." {
            return self.whole(path);
        }
        let root = self.root;
        // Looked up before inserting: most entries share a directory already resolved, and the
        // key's copy is made once per directory, not per entry.
        if !self.dirs.contains_key(dir) {
            let resolved = Some(path_policy::resolve(dir)).filter(|r| r.starts_with(root));
            self.dirs.insert(dir.to_path_buf(), resolved);
        }
        let Some(resolved_dir) = &self.dirs[dir] else {
            return Listed::Outside;
        };
        let at = resolved_dir.join(leaf);
        let is_link = std::fs::symlink_metadata(&at).is_ok_and(|m| m.file_type().is_symlink());
        if is_link && !path_policy::resolve(&at).starts_with(root) {
            Listed::LinkOut
        } else {
            Listed::Inside
        }
    }

    fn whole(&self, path: &Path) -> Listed {
        if path_policy::resolve(path).starts_with(self.root) {
            Listed::Inside
        } else {
            Listed::Outside
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_out_and_what_lies_behind_them() {
        let dir = tempfile::tempdir().unwrap();
        let top = std::fs::canonicalize(dir.path()).unwrap();
        let root = top.join("ws");
        let outside = top.join("outside");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("secret"), "x").unwrap();
        std::fs::write(root.join("sub/plain"), "x").unwrap();
        let link = |target: &Path, at: &str| std::os::unix::fs::symlink(target, root.join(at));
        link(&outside.join("secret"), "evil").unwrap();
        link(&outside, "evildir").unwrap();
        link(Path::new("../../outside/secret"), "sub/evil2").unwrap();
        link(&root.join("sub"), "inlink").unwrap();
        link(Path::new("plain"), "sub/inleaf").unwrap();
        let mut paths = ListedPaths::new(&root, false);
        let cases = [
            ("sub/plain", Listed::Inside),
            ("sub", Listed::Inside),
            ("inlink", Listed::Inside),
            ("inlink/plain", Listed::Inside),
            ("sub/inleaf", Listed::Inside),
            ("missing/file", Listed::Inside),
            ("evil", Listed::LinkOut),
            ("evildir", Listed::LinkOut),
            ("sub/evil2", Listed::LinkOut),
            ("inlink/evil2", Listed::LinkOut),
            ("evildir/secret", Listed::Outside),
            ("evildir/deeper/x", Listed::Outside),
        ];
        for (rel, want) in cases {
            assert_eq!(paths.check(&root.join(rel)), want, "{rel}");
        }
        assert_eq!(paths.check(&root.join("sub/..")), Listed::Inside);
        assert_eq!(paths.check(&root.join("..")), Listed::Outside);
        let mut open = ListedPaths::new(&root, true);
        assert_eq!(open.check(&root.join("evildir/secret")), Listed::Inside);
    }
}
