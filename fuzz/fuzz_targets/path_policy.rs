//! Path containment (`permissions::path_policy`): `contain_file` (write_file, replace),
//! `contain_directory` (the shell's working directory) and `resolve_for_read` (read tools).
//!
//! The workspace is a real directory tree with the symlinks an attacker plants: links inside,
//! links out (relative and absolute), a dangling link out, loops, a link to `..` and to `/`, a
//! link inside a directory that points out. `HOME` is outside the workspace.
//!
//! Asserts: no panic or hang on any path text; and containment, judged by an independent walk
//! of the returned path as the kernel would follow it (every symlink followed, `..` taken
//! physically; for writes, missing directories are assumed created, as `create_dir_all`
//! would): wherever an accepted path leads, it is inside the workspace.
#![no_main]

use std::ffi::OsString;
use std::os::unix::fs::symlink;
use std::path::{Component, Path, PathBuf};
use std::sync::OnceLock;

use agentao::permissions::path_policy::{contain_directory, contain_file, resolve_for_read};
use libfuzzer_sys::fuzz_target;

struct Fixture {
    root: PathBuf,
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let base = std::env::temp_dir().join(format!("agentao-fuzz-path-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let root = base.join("ws");
        let outside = base.join("outside");
        let home = base.join("home");
        for d in [&root.join("dir/sub"), &outside, &home] {
            std::fs::create_dir_all(d).expect("fixture dirs");
        }
        std::fs::write(root.join("file"), "x").expect("fixture file");
        std::fs::write(outside.join("secret"), "s").expect("fixture secret");
        let links: &[(&str, PathBuf)] = &[
            ("link_in", "dir".into()),
            ("link_in_abs", root.join("dir")),
            ("link_out", "../outside".into()),
            ("link_out_abs", outside.clone()),
            ("dangling_out", "../outside/nothing/deeper".into()),
            ("loop", "loop".into()),
            ("loop_a", "loop_b".into()),
            ("loop_b", "loop_a".into()),
            ("up", "..".into()),
            ("slash", "/".into()),
            ("dir/back_out", "../link_out".into()),
            ("dir/sub/up2", "../..".into()),
        ];
        for (name, target) in links {
            symlink(target, root.join(name)).expect("fixture link");
        }
        std::env::set_var("HOME", &home);
        Fixture {
            root: std::fs::canonicalize(&root).expect("fixture root"),
        }
    })
}

/// Where the kernel takes `path` (absolute): `None` when it cannot get there (a loop, a file
/// used as a directory, or — when `create` is false — a missing directory on the way).
fn kernel_walk(path: &Path, create: bool) -> Option<PathBuf> {
    let mut pending: Vec<OsString> = Vec::new();
    let push_all = |pending: &mut Vec<OsString>, p: &Path| {
        for c in p.components().rev() {
            match c {
                Component::Normal(s) => pending.push(s.to_owned()),
                Component::ParentDir => pending.push("..".into()),
                _ => {}
            }
        }
    };
    push_all(&mut pending, path);
    let mut cur = PathBuf::from("/");
    let mut links = 0;
    while let Some(part) = pending.pop() {
        if part == ".." {
            cur.pop();
            continue;
        }
        let next = cur.join(&part);
        match std::fs::symlink_metadata(&next) {
            Ok(m) if m.file_type().is_symlink() => {
                links += 1;
                if links > 40 {
                    return None;
                }
                let target = std::fs::read_link(&next).ok()?;
                if target.is_absolute() {
                    cur = PathBuf::from("/");
                }
                push_all(&mut pending, &target);
            }
            Ok(m) if !m.is_dir() && !pending.is_empty() => return None,
            Ok(_) => cur = next,
            Err(_) if create || pending.is_empty() => cur = next,
            Err(_) => return None,
        }
    }
    Some(cur)
}

fn assert_inside(what: &str, raw: &str, accepted: &Path, create: bool, root: &Path) {
    if let Some(end) = kernel_walk(accepted, create) {
        assert!(
            end.starts_with(root),
            "{what}({raw:?}) accepted {accepted:?}, which leads to {end:?}, outside {root:?}"
        );
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(raw) = std::str::from_utf8(data) else {
        return;
    };
    if raw.contains('\0') {
        // The OS refuses such a path; the policy passes it through for the OS to refuse.
        return;
    }
    let root = &fixture().root;
    if let Ok(p) = contain_file(root, raw) {
        assert_inside("contain_file", raw, &p, true, root);
    }
    if let Ok(p) = contain_directory(root, raw) {
        assert_inside("contain_directory", raw, &p, true, root);
    }
    if let Ok(p) = resolve_for_read(root, raw, false) {
        assert_inside("resolve_for_read", raw, &p, false, root);
    }
});
