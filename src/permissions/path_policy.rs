//! Path containment policy (spec §3.8): where write tools and the shell's working directory may
//! point. Read tools use [`resolve_for_read`] (a port decision: reads outside the workspace are
//! refused unless the config allows them).
//!
//! Resolution follows the OS the way `os.path.realpath(strict=False)` does: components are
//! walked left to right, every symlink met is dereferenced before a following `..` is applied,
//! and the part that does not exist yet is appended lexically (a `..` climbing back out of it
//! resumes resolution). A symlink loop leaves the rest of the path unresolved (the later OS
//! call then fails with ELOOP).

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};

/// The reference's refusal text (without the `Error: ` prefix the tools add).
pub(crate) fn refusal(raw: &str, resolved: &Path, root: &Path) -> String {
    format!(
        "PathPolicy: refused '{raw}' — resolves to '{}', outside project_root '{}'",
        resolved.display(),
        root.display()
    )
}

/// `~` expanded, absolute kept, relative joined to `root` (no resolution).
pub(crate) fn join_to_root(root: &Path, raw: &str) -> PathBuf {
    let home = if raw == "~" || raw.starts_with("~/") {
        std::env::var_os("HOME")
    } else {
        None
    };
    let Some(home) = home else {
        // `join` keeps an absolute path whole and puts `root` before a relative one, from the
        // text itself (a `PathBuf` of `raw` first was a second allocation a read).
        return root.join(raw);
    };
    let rest = raw.trim_start_matches('~').trim_start_matches('/');
    let mut expanded = PathBuf::from(home);
    if !rest.is_empty() {
        expanded.push(rest);
    }
    root.join(expanded)
}

/// One step of [`resolve`]: a component still to walk, or the end of a link's target (its
/// resolution is then known and cached).
enum Step {
    Part(OsString),
    LinkDone(PathBuf),
}

fn push_components(pending: &mut Vec<Step>, path: &Path) {
    for c in path.components().rev() {
        match c {
            Component::Normal(s) => pending.push(Step::Part(s.to_owned())),
            Component::ParentDir => pending.push(Step::Part(OsString::from(".."))),
            Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
        }
    }
}

/// `realpath(strict=False)` of an absolute path.
///
/// Like Python's, it caches each link's resolution and stops only at a real loop (a link met
/// again while its own target is being resolved): a fixed budget of links would leave the rest
/// of a long but legitimate chain (`up/ws/up/ws/…` with `up -> ..`) unresolved, and the kernel,
/// which starts a fresh budget on the returned path, would follow it out of the workspace.
pub(crate) fn resolve(path: &Path) -> PathBuf {
    if resolves_to_itself(path).is_some() {
        return path.to_path_buf();
    }
    resolve_by_walk(path)
}

/// What [`resolve_for_read_leaf`]'s shortcut saw of the path itself with its last `lstat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Leaf {
    /// A regular file, no symlink: a `stat` of the path would say the same.
    File,
    /// Not looked at, a symlink, or something else: ask again.
    Unknown,
}

/// The common case of [`resolve`] without its walk's allocations: an absolute path in normal
/// form (no `.` or `..`, no repeated or trailing `/`) whose every prefix is `lstat`ed, as the
/// walk does, and found to be no symlink, up to the first that does not exist (the walk
/// appends the rest lexically). Such a path resolves to itself, and the last `lstat` says
/// what it is ([`Leaf`]). `None` sends the path to the walk, which then decides.
fn resolves_to_itself(path: &Path) -> Option<Leaf> {
    use std::os::unix::ffi::OsStrExt;
    let bytes = path.as_os_str().as_bytes();
    let rest = bytes.strip_prefix(b"/")?;
    if rest.is_empty() {
        return Some(Leaf::Unknown);
    }
    if rest
        .split(|&b| b == b'/')
        .any(|c| c.is_empty() || c == b"." || c == b"..")
    {
        return None;
    }
    let ends = memchr::memchr_iter(b'/', rest)
        .map(|at| at + 1)
        .chain([bytes.len()]);
    let mut leaf = Leaf::Unknown;
    for end in ends {
        let prefix = Path::new(std::ffi::OsStr::from_bytes(&bytes[..end]));
        match std::fs::symlink_metadata(prefix) {
            Ok(meta) if meta.file_type().is_symlink() => return None,
            Ok(meta) => {
                leaf = if end == bytes.len() && meta.is_file() {
                    Leaf::File
                } else {
                    Leaf::Unknown
                };
            }
            Err(_) => return Some(Leaf::Unknown),
        }
    }
    Some(leaf)
}

/// Whether `root`'s bytes begin `path` and end at one of its component boundaries: for a path
/// in the normal form [`resolves_to_itself`] checks, `Path::starts_with` without walking both
/// paths' components (a read's most repeated check). A root not in normal form never matches
/// here, and the caller then asks `Path::starts_with`.
fn starts_with_bytes(path: &Path, root: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let (path, root) = (path.as_os_str().as_bytes(), root.as_os_str().as_bytes());
    path.starts_with(root)
        && (path.len() == root.len() || root.ends_with(b"/") || path[root.len()] == b'/')
}

/// [`resolve`] component by component.
fn resolve_by_walk(path: &Path) -> PathBuf {
    let mut pending: Vec<Step> = Vec::new();
    push_components(&mut pending, path);
    let mut out = PathBuf::from("/");
    // Link path -> its resolution; `None` while it is being resolved.
    let mut seen: HashMap<PathBuf, Option<PathBuf>> = HashMap::new();
    // Components appended lexically below the last existing directory (a missing one). A `..`
    // that climbs back out of them lands on a real directory again, whose symlinks must be
    // followed: `missing/../link_out` is `link_out`, resolved.
    let mut lexical = 0usize;
    while let Some(step) = pending.pop() {
        let part = match step {
            Step::Part(p) => p,
            Step::LinkDone(link) => {
                seen.insert(link, Some(out.clone()));
                continue;
            }
        };
        if part == ".." {
            out.pop();
            lexical = lexical.saturating_sub(1);
            continue;
        }
        let next = out.join(&part);
        if lexical > 0 {
            out = next;
            lexical += 1;
            continue;
        }
        match std::fs::symlink_metadata(&next) {
            Ok(meta) if meta.file_type().is_symlink() => match seen.get(&next) {
                Some(Some(resolved)) => out = resolved.clone(),
                Some(None) => {
                    // A loop: the rest stays unresolved (the OS call fails with ELOOP there).
                    let mut rest = next;
                    while let Some(step) = pending.pop() {
                        if let Step::Part(p) = step {
                            rest.push(p);
                        }
                    }
                    return rest;
                }
                None => match std::fs::read_link(&next) {
                    Ok(target) => {
                        seen.insert(next.clone(), None);
                        pending.push(Step::LinkDone(next));
                        if target.is_absolute() {
                            out = PathBuf::from("/");
                        }
                        push_components(&mut pending, &target);
                    }
                    Err(_) => {
                        out = next;
                        lexical = 1;
                    }
                },
            },
            Ok(_) => out = next,
            Err(_) => {
                lexical = 1;
                out = next;
            }
        }
    }
    out
}

/// `contain_file` (spec §3.8): the parent resolved through every symlink, the leaf put back;
/// a leaf that is itself a symlink must also point inside. Used by `write_file` and `replace`.
pub fn contain_file(root: &Path, raw: &str) -> Result<PathBuf, String> {
    let candidate = join_to_root(root, raw);
    let resolved = match candidate.file_name() {
        Some(leaf) if !candidate.as_os_str().to_string_lossy().ends_with("/..") => {
            let parent = candidate.parent().unwrap_or(Path::new("/"));
            resolve(parent).join(leaf)
        }
        _ => resolve(&candidate),
    };
    if !resolved.starts_with(root) {
        return Err(refusal(raw, &resolved, root));
    }
    if std::fs::symlink_metadata(&resolved).is_ok_and(|m| m.file_type().is_symlink()) {
        let target = resolve(&resolved);
        if !target.starts_with(root) {
            return Err(refusal(raw, &target, root));
        }
    }
    Ok(resolved)
}

/// `contain_directory` (spec §3.8): resolved fully, must lie under the root. Used for the
/// shell's working directory; existence is the caller's check.
pub fn contain_directory(root: &Path, raw: &str) -> Result<PathBuf, String> {
    let resolved = resolve(&join_to_root(root, raw));
    if resolved.starts_with(root) {
        Ok(resolved)
    } else {
        Err(refusal(raw, &resolved, root))
    }
}

/// Read-side check: the fully resolved path must lie under the root unless reads outside are
/// allowed. Returns the unresolved joined path (error messages keep the caller's spelling).
pub fn resolve_for_read(root: &Path, raw: &str, allow_outside: bool) -> Result<PathBuf, String> {
    resolve_for_read_leaf(root, raw, allow_outside).map(|(path, _)| path)
}

/// [`resolve_for_read`], and what the path itself was when its shortcut `lstat`ed it: a read
/// tool then needs no second `stat` to know it names a regular file.
pub(crate) fn resolve_for_read_leaf(
    root: &Path,
    raw: &str,
    allow_outside: bool,
) -> Result<(PathBuf, Leaf), String> {
    let path = join_to_root(root, raw);
    if allow_outside || raw.contains('\0') {
        return Ok((path, Leaf::Unknown));
    }
    // Most paths resolve to themselves: no copy of the path for that.
    if let Some(leaf) = resolves_to_itself(&path) {
        if starts_with_bytes(&path, root) || path.starts_with(root) {
            return Ok((path, leaf));
        }
    }
    let resolved = resolve(&path);
    if resolved.starts_with(root) {
        Ok((path, Leaf::Unknown))
    } else {
        Err(refusal(raw, &resolved, root))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Relative paths join the root, absolute ones stand, `~` is the home directory.
    #[test]
    fn paths_join_the_root_as_written() {
        let root = Path::new("/ws");
        assert_eq!(join_to_root(root, "a/b.txt"), Path::new("/ws/a/b.txt"));
        assert_eq!(join_to_root(root, "../x"), Path::new("/ws/../x"));
        assert_eq!(join_to_root(root, ""), Path::new("/ws/"));
        assert_eq!(join_to_root(root, "/etc/passwd"), Path::new("/etc/passwd"));
        assert_eq!(join_to_root(root, "~x"), Path::new("/ws/~x"));
        if let Some(home) = std::env::var_os("HOME") {
            assert_eq!(join_to_root(root, "~"), PathBuf::from(&home));
            assert_eq!(join_to_root(root, "~/a"), PathBuf::from(&home).join("a"));
        }
    }

    #[test]
    fn containment() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        assert_eq!(
            contain_file(&root, "a/b.txt").unwrap(),
            root.join("a/b.txt")
        );
        let e = contain_file(&root, "../x").unwrap_err();
        assert!(
            e.starts_with("PathPolicy: refused '../x' — resolves to '"),
            "{e}"
        );
        assert!(
            e.ends_with(&format!("outside project_root '{}'", root.display())),
            "{e}"
        );
        assert!(contain_file(&root, "/etc/passwd").is_err());
        std::os::unix::fs::symlink("/tmp", root.join("out")).unwrap();
        assert!(contain_file(&root, "out/x").is_err());
        // `link/..` follows the link before going up, as the OS does.
        assert!(contain_file(&root, "out/../y").is_err());
        std::os::unix::fs::symlink("/etc/passwd", root.join("leaf")).unwrap();
        assert!(contain_file(&root, "leaf").is_err());
        std::fs::create_dir(root.join("sub")).unwrap();
        std::os::unix::fs::symlink(root.join("sub"), root.join("in")).unwrap();
        assert_eq!(contain_file(&root, "in/z").unwrap(), root.join("sub/z"));
        assert!(contain_directory(&root, "sub").is_ok());
        assert!(contain_directory(&root, "out").is_err());
        assert!(contain_directory(&root, "..").is_err());
    }

    /// The byte check agrees with `Path::starts_with` for normal-form roots, and never says
    /// yes where it says no for any root (the caller then asks it).
    #[test]
    fn the_byte_prefix_check_is_path_starts_with() {
        let paths = ["/", "/a", "/a/b", "/a/b/x", "/a/bc", "/a/b/x/y", "/ab/x"];
        for root in ["/", "/a", "/a/b"] {
            for p in paths {
                let (p, r) = (Path::new(p), Path::new(root));
                assert_eq!(
                    starts_with_bytes(p, r),
                    p.starts_with(r),
                    "{p:?} under {r:?}"
                );
            }
        }
        for root in ["/a/b/", "/a/./b", "/a//b", "/a/b/.", "a/b"] {
            for p in paths {
                let (p, r) = (Path::new(p), Path::new(root));
                assert!(
                    !starts_with_bytes(p, r) || p.starts_with(r),
                    "{p:?} under {r:?}"
                );
            }
        }
    }

    /// The shortcut for paths that resolve to themselves gives what the walk gives, for paths
    /// through symlinks (in, out, absolute, relative, to a file, dangling, looping), missing
    /// parts, a file used as a directory, `.`, `..`, repeated and trailing slashes.
    #[test]
    fn the_shortcut_resolves_as_the_walk_does() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let link =
            |target: &str, at: &str| std::os::unix::fs::symlink(target, root.join(at)).unwrap();
        std::fs::create_dir_all(root.join("d/e")).unwrap();
        std::fs::write(root.join("d/f.txt"), "x").unwrap();
        link("/tmp", "out");
        link("d", "in");
        link("d/f.txt", "file_link");
        link("nowhere", "dangling");
        link("loop_b", "loop_a");
        link("loop_a", "loop_b");
        link("..", "d/up");
        let tails = [
            "",
            "d",
            "d/",
            "d//e",
            "d/./e",
            "d/e/..",
            "d/f.txt",
            "d/f.txt/x",
            "d/missing",
            "d/missing/more",
            "d/missing/../e",
            "out",
            "out/x",
            "in/e",
            "in/../d",
            "file_link",
            "dangling",
            "dangling/x",
            "loop_a/x",
            "d/up",
            "d/up/d/up/d/e",
            "missing/../out",
        ];
        let mut shortcuts = 0;
        for tail in tails {
            let path = root.join(tail);
            assert_eq!(resolve(&path), resolve_by_walk(&path), "{tail:?}");
            let leaf = resolves_to_itself(&path);
            shortcuts += usize::from(leaf.is_some());
            // `File` stands for the `stat` a read tool no longer makes: it must agree.
            let is_file = std::fs::metadata(&path).is_ok_and(|m| m.is_file());
            let plain = std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_file());
            assert_eq!(leaf == Some(Leaf::File), is_file && plain, "{tail:?}");
            for raw in [tail, &format!("../{tail}")] {
                let walked = {
                    let joined = join_to_root(&root, raw);
                    let resolved = resolve_by_walk(&joined);
                    if resolved.starts_with(&root) {
                        Ok(joined)
                    } else {
                        Err(refusal(raw, &resolved, &root))
                    }
                };
                assert_eq!(resolve_for_read(&root, raw, false), walked, "{raw:?}");
            }
        }
        for p in ["/", "/tmp", "relative/path", "/tmp/../etc"] {
            assert_eq!(resolve(Path::new(p)), resolve_by_walk(Path::new(p)), "{p}");
        }
        // The plain ones take the shortcut: "d", "d/f.txt", "d/f.txt/x" and the two missing.
        assert_eq!(shortcuts, 5);
    }

    #[test]
    fn symlink_loop_does_not_hang() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::os::unix::fs::symlink(root.join("b"), root.join("a")).unwrap();
        std::os::unix::fs::symlink(root.join("a"), root.join("b")).unwrap();
        let p = resolve(&root.join("a/x"));
        assert!(p.starts_with(&root));
    }
}
