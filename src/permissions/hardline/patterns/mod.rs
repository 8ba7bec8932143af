//! The table's patterns, matched over the shell-word-normalised view of one text.

mod tables;

use super::bit;
use super::index::{candidates, first_head, Idx, SEP_FIRST};
use super::lex::{get, normalize, Contexts, Ctx};

use tables::{raw_device_at, PatTables};

const SYS_BIN: &[&str] = &[
    "/usr/local/sbin/",
    "/usr/local/bin/",
    "/usr/sbin/",
    "/usr/bin/",
    "/sbin/",
    "/bin/",
];
const RM_PATH_NAMES: &[&str] = &[
    "etc", "usr", "var", "boot", "bin", "sbin", "lib", "home", "root",
];
pub(super) const RAW_DEVICES: &[&str] =
    &["sd", "nvme", "hd", "mmcblk", "vd", "xvd", "disk", "rdisk"];

// Tail bits (a command name and what follows it), evaluated after the optional binary path.
const T_RM: u32 = 0;
const T_MKFS: u32 = 1;
const T_DD: u32 = 2;
const T_KHUP: u32 = 3;
const T_KKILL: u32 = 4;
const T_SHUTDOWN: u32 = 5;
const T_REBOOT: u32 = 6;
const T_HALT: u32 = 7;
const T_POWEROFF: u32 = 8;
const T_INIT: u32 = 9;
const T_SYSTEMCTL: u32 = 10;
const T_SHRED: u32 = 11;
const T_WIPEFS: u32 = 12;
const T_BLKDISCARD: u32 = 13;
const T_PARTITION: u32 = 14;
const T_TEE: u32 = 15;
const T_CRYPTSETUP: u32 = 16;
const T_DISKUTIL: u32 = 17;
const T_FIND_DELETE: u32 = 18;
const T_FIND_EXEC: u32 = 19;
/// Helper: `rm` with recursive+force flags later in its segment (the inner command of xargs).
const T_XARGS_RM: u32 = 20;
/// `xargs … rm -rf`, anchored directly at the command position (no binary path).
const X_XARGS: u32 = 21;

/// Bits that count as a pattern match at a command position.
const CMD_PATTERN_MASK: u32 = !(bit(T_XARGS_RM));

enum Pat {
    Cmd(u32),
    Redirect,
    ForkBomb,
}

/// The table, in the reference's order (the first row with a real match names the verdict).
const TABLE: &[(Pat, &str)] = &[
    (
        Pat::Cmd(T_RM),
        "recursive delete of root / system directory / home",
    ),
    (Pat::Cmd(T_MKFS), "filesystem creation (mkfs)"),
    (Pat::Cmd(T_DD), "dd write to raw block device"),
    (Pat::Redirect, "redirect output to raw block device"),
    (Pat::ForkBomb, "fork bomb"),
    (Pat::Cmd(T_KHUP), "kill -HUP broadcast"),
    (Pat::Cmd(T_KKILL), "kill -KILL broadcast"),
    (Pat::Cmd(T_SHUTDOWN), "shutdown"),
    (Pat::Cmd(T_REBOOT), "reboot"),
    (Pat::Cmd(T_HALT), "halt"),
    (Pat::Cmd(T_POWEROFF), "poweroff"),
    (Pat::Cmd(T_INIT), "init runlevel 0/6"),
    (Pat::Cmd(T_SYSTEMCTL), "systemctl power transition"),
    (Pat::Cmd(T_SHRED), "shred raw block device"),
    (Pat::Cmd(T_WIPEFS), "wipefs raw block device"),
    (Pat::Cmd(T_BLKDISCARD), "blkdiscard raw block device"),
    (Pat::Cmd(T_PARTITION), "partition tool on raw block device"),
    (Pat::Cmd(T_TEE), "tee write to raw block device"),
    (Pat::Cmd(T_CRYPTSETUP), "cryptsetup luksFormat"),
    (Pat::Cmd(T_DISKUTIL), "diskutil destructive op"),
    (Pat::Cmd(X_XARGS), "xargs rm with recursive+force flags"),
    (Pat::Cmd(T_FIND_DELETE), "find -delete on root/system path"),
    (Pat::Cmd(T_FIND_EXEC), "find -exec rm on root/system path"),
];
// ---------------------------------------------------------------------------------------------

pub(super) fn match_table(masked: &[char], ctx: &Contexts) -> Option<&'static str> {
    let (norm, map) = normalize(masked);
    if norm.is_empty() {
        return None;
    }
    let t = PatTables::new(&norm);
    let n = norm.len();
    let cands = candidates(&norm, &t.ix.skip_ws);
    let gts: Vec<usize> = (0..n).filter(|&i| norm[i] == '>').collect();
    let colons: Vec<usize> = (0..n).filter(|&i| norm[i] == ':').collect();
    let valid = |start: usize| -> bool {
        if start == 0 && !SEP_FIRST.contains(&norm[0]) {
            return true;
        }
        let o = map[start];
        if ctx.escaped[o] {
            return false;
        }
        match ctx.ctx[o] {
            Ctx::Top | Ctx::Sub | Ctx::Bt => true,
            Ctx::Sq => false,
            Ctx::Dq => matches!(masked[o], '$' | '`'),
        }
    };
    for (pat, desc) in TABLE {
        let mut last_end = 0usize;
        match pat {
            Pat::Cmd(b) => {
                let want = bit(*b);
                for &(i, heads, k) in &cands {
                    if i < last_end {
                        continue;
                    }
                    let Some(x) = first_head(&heads[..k], n, &t.env, want) else {
                        continue;
                    };
                    if valid(i) {
                        return Some(desc);
                    }
                    let end = t
                        .walk(x, *b)
                        .map_or(i + 1, |p| t.tail_end(p, *b))
                        .max(i + 1);
                    last_end = end;
                }
            }
            Pat::Redirect => {
                for &i in &gts {
                    if i < last_end {
                        continue;
                    }
                    let s = t.ix.skip_ws[i + 1];
                    if let Some(e) = raw_device_at(&norm, s) {
                        if valid(i) {
                            return Some(desc);
                        }
                        last_end = e;
                    }
                }
            }
            Pat::ForkBomb => {
                for &i in &colons {
                    if i < last_end {
                        continue;
                    }
                    if let Some(e) = fork_bomb_at(&t.ix, i) {
                        if valid(i) {
                            return Some(desc);
                        }
                        last_end = e;
                    }
                }
            }
        }
    }
    let _ = &t.seg_end;
    None
}

/// `:\s*\(\s*\)\s*\{\s*:\s*\|\s*:\s*&\s*\}\s*;\s*:` at i; returns the end.
fn fork_bomb_at(ix: &Idx, i: usize) -> Option<usize> {
    let seq = [':', '(', ')', '{', ':', '|', ':', '&', '}', ';', ':'];
    let mut p = i;
    for (k, &ch) in seq.iter().enumerate() {
        if k > 0 {
            p = ix.skip_ws[p.min(ix.n)];
        }
        if get(ix.c, p) != Some(ch) {
            return None;
        }
        p += 1;
    }
    Some(p)
}
