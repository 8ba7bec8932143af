//! The per-text tables the command patterns walk: segment ends, command-position states
//! (environment, wrappers, flags), path tails and device targets, computed once per text.

use super::super::index::{
    head_env, head_flags, head_walk, head_wrap, needed_positions, next_table, Idx,
};
use super::super::lex::{
    at_ci, fold, get, is_alnum_ci, is_letter_ci, is_space, is_ts, is_word, name_end_ok, wb_end,
};
use super::super::{bit, NONE};
use super::{
    CMD_PATTERN_MASK, RAW_DEVICES, RM_PATH_NAMES, SYS_BIN, T_BLKDISCARD, T_CRYPTSETUP, T_DD,
    T_DISKUTIL, T_FIND_DELETE, T_FIND_EXEC, T_HALT, T_INIT, T_KHUP, T_KKILL, T_MKFS, T_PARTITION,
    T_POWEROFF, T_REBOOT, T_RM, T_SHRED, T_SHUTDOWN, T_SYSTEMCTL, T_TEE, T_WIPEFS, T_XARGS_RM,
    X_XARGS,
};

/// Tables for the command patterns on one normalised text.
pub(super) struct PatTables<'a> {
    pub(super) ix: Idx<'a>,
    pub(super) seg_end: Vec<usize>,
    tails: Vec<u32>,
    slash_or: Vec<u32>,
    has_glob: Vec<bool>,
    xr_ok: Vec<bool>,
    letters_end: Vec<usize>,
    /// ENV / WRAP / FLAGS / REST states of the command-position prefix.
    pub(super) env: Vec<u32>,
    flags: Vec<u32>,
    ifl: Vec<u32>,
    // for tail ends
    ofdev_last_line: Vec<usize>,
}

pub(super) fn raw_device_at(c: &[char], j: usize) -> Option<usize> {
    let mut k = j;
    if matches!(get(c, k), Some('"' | '\'')) {
        k += 1;
    }
    if !at_ci(c, k, "/dev/") {
        return None;
    }
    k += 5;
    RAW_DEVICES
        .iter()
        .find(|d| at_ci(c, k, d))
        .map(|d| k + d.len())
}

fn path_boundary(c: &[char], e: usize, slash: bool, brace: bool) -> bool {
    match get(c, e) {
        None => true,
        Some(ch) => {
            is_space(ch)
                || matches!(ch, '"' | '\'' | '`' | ')' | ';' | '&' | '|' | '*' | '?')
                || (slash && ch == '/')
                || (brace && (ch == '{' || ch == '['))
        }
    }
}

/// The dangerous-target alternation of the rm / find rows, without the optional quote.
fn rm_path_core(c: &[char], k: usize, next_close_brace: &[usize]) -> bool {
    let n = c.len();
    match get(c, k) {
        Some('/') => {
            let mut j = k;
            while j < n && (c[j] == '/' || c[j] == '.') {
                j += 1;
            }
            if path_boundary(c, j, false, true) {
                return true;
            }
            let mut s = k;
            while s < n && c[s] == '/' {
                s += 1;
            }
            RM_PATH_NAMES
                .iter()
                .any(|name| at_ci(c, s, name) && path_boundary(c, s + name.len(), true, true))
        }
        Some('~') => {
            let j = k + 1;
            match get(c, j) {
                Some(ch) if is_letter_ci(ch) || ch == '_' => {
                    let mut e = j + 1;
                    while e < n && (is_word(c[e]) || c[e] == '-') {
                        e += 1;
                    }
                    path_boundary(c, e, true, true)
                }
                Some('+' | '-') => {
                    path_boundary(c, j + 1, true, true) || path_boundary(c, j, true, true)
                }
                _ => path_boundary(c, j, true, true),
            }
        }
        Some('$') => {
            if at_ci(c, k + 1, "home") {
                return path_boundary(c, k + 5, true, false);
            }
            if get(c, k + 1) == Some('{') && at_ci(c, k + 2, "home") {
                match get(c, k + 6) {
                    Some('}') => path_boundary(c, k + 7, true, false),
                    Some(ch) if !(is_alnum_ci(ch) || ch == '_') => {
                        let close = next_close_brace[k + 7];
                        close != NONE && path_boundary(c, close + 1, true, false)
                    }
                    _ => false,
                }
            } else {
                false
            }
        }
        _ => false,
    }
}

/// `(?:-[a-zA-Z]*[xX][a-zA-Z]*|--long)\b` at k.
fn flag_marker(c: &[char], k: usize, lo: char, up: char, long: &str) -> bool {
    let n = c.len();
    if get(c, k) != Some('-') {
        return false;
    }
    if get(c, k + 1) == Some('-') && at_ci(c, k + 2, long) && wb_end(c, k + 2 + long.len()) {
        return true;
    }
    let mut j = k + 1;
    let mut has = false;
    while j < n && is_letter_ci(c[j]) {
        if c[j] == lo || c[j] == up {
            has = true;
        }
        j += 1;
    }
    j > k + 1 && has && wb_end(c, j)
}

impl<'a> PatTables<'a> {
    // One arm per leading letter keeps the table readable; clippy would fold the conditions
    // into match guards.
    #[allow(clippy::collapsible_match)]
    pub(super) fn new(c: &'a [char]) -> PatTables<'a> {
        let ix = Idx::new(c);
        let n = ix.n;
        let ws = &ix.ws;
        let seg_end = {
            let mut v = vec![n; n + 1];
            for i in (0..n).rev() {
                v[i] = if matches!(c[i], '\n' | ';' | '&' | '|') {
                    i
                } else {
                    v[i + 1]
                };
            }
            v
        };
        let line_end = {
            let mut v = vec![n; n + 1];
            for i in (0..n).rev() {
                v[i] = if c[i] == '\n' { i } else { v[i + 1] };
            }
            v
        };
        let next_close_brace = next_table(n, |i| c[i] == '}');
        let rmark: Vec<bool> = (0..n)
            .map(|k| flag_marker(c, k, 'r', 'R', "recursive"))
            .collect();
        let fmark: Vec<bool> = (0..n)
            .map(|k| flag_marker(c, k, 'f', 'F', "force"))
            .collect();
        let path_at: Vec<bool> = (0..n)
            .map(|t| {
                rm_path_core(c, t, &next_close_brace)
                    || (matches!(c[t], '"' | '\'') && rm_path_core(c, t + 1, &next_close_brace))
            })
            .collect();
        let tok_start = |i: usize| !ws[i] && (i == 0 || ws[i - 1]);
        let mut suf_r = vec![false; n + 1];
        let mut suf_f = vec![false; n + 1];
        let mut suf_p = vec![false; n + 1];
        for i in (0..n).rev() {
            let ts = tok_start(i);
            suf_r[i] = (ts && rmark[i]) || suf_r[i + 1];
            suf_f[i] = (ts && fmark[i]) || suf_f[i + 1];
            suf_p[i] = (ts && path_at[i]) || suf_p[i + 1];
        }
        let r_any = next_table(n, |k| rmark[k]);
        let f_any = next_table(n, |k| fmark[k]);
        let ofdev = |k: usize| {
            (k == 0 || !is_word(c[k - 1]))
                && at_ci(c, k, "of=")
                && raw_device_at(c, k + 3).is_some()
        };
        let ofdev_next = next_table(n, ofdev);
        let mut ofdev_last_line = vec![NONE; n + 1];
        {
            // last ofdev start strictly before the line end, per line (stored at each position)
            let mut last = NONE;
            for i in (0..n).rev() {
                if c[i] == '\n' {
                    last = NONE;
                }
                if last == NONE && ofdev(i) {
                    last = i;
                }
                ofdev_last_line[i] = last;
            }
        }
        let wsdev_next = next_table(n, |k| ws[k] && raw_device_at(c, k + 1).is_some());
        let wspath_next = next_table(n, |k| ws[k] && k + 1 < n && path_at[k + 1]);
        let listflag_next = next_table(n, |k| {
            is_ts(c[k])
                && ((at_ci(c, k + 1, "-l") && wb_end(c, k + 3))
                    || (at_ci(c, k + 1, "--list") && wb_end(c, k + 7))
                    || (at_ci(c, k + 1, "-p") && wb_end(c, k + 3))
                    || (at_ci(c, k + 1, "--print") && wb_end(c, k + 8)))
        });
        let delete_next = next_table(n, |k| at_ci(c, k, "-delete") && wb_end(c, k + 7));
        // `(?:[\w/]*/)?rm\b` at r
        let rm_b = |k: usize| at_ci(c, k, "rm") && wb_end(c, k + 2);
        let mut rm_after_slash = vec![false; n + 1];
        for k in (0..n).rev() {
            rm_after_slash[k] = (is_word(c[k]) || c[k] == '/')
                && ((c[k] == '/' && rm_b(k + 1)) || rm_after_slash[k + 1]);
        }
        let execrm_next = next_table(n, |k| {
            if !at_ci(c, k, "-exec") {
                return false;
            }
            let mut e = k + 5;
            if at_ci(c, e, "dir") && get(c, e + 3).is_some_and(is_space) {
                e += 3;
            }
            if !get(c, e).is_some_and(is_space) {
                return false;
            }
            let r = ix.skip_ws[e];
            rm_b(r) || rm_after_slash[r]
        });
        // cryptsetup: ([ \t]+\S+)*\s+luksFormat\b from a whitespace run
        let luks_at = |r: usize| at_ci(c, r, "luksformat") && wb_end(c, r + 10);
        let mut crypt_ok = vec![false; n + 1];
        for i in (0..n).rev() {
            if !ws[i] {
                continue;
            }
            let r = ix.skip_ws[i];
            let pure = ix.ts_end[i] >= r;
            crypt_ok[i] = luks_at(r) || (pure && r < n && crypt_ok[ix.tok_end[r]]);
        }
        let mut letters_end = vec![n; n + 1];
        for i in (0..n).rev() {
            letters_end[i] = if is_letter_ci(c[i]) {
                letters_end[i + 1]
            } else {
                i
            };
        }
        let has_glob = {
            let mut v = vec![false; n + 1];
            for i in (0..n).rev() {
                v[i] = !ws[i] && (matches!(c[i], '?' | '*' | '[') || v[i + 1]);
            }
            v
        };

        // tails at every position
        let in_seg = |next: &Vec<usize>, e: usize| next[e] != NONE && next[e] < seg_end[e];
        let in_seg_ws = |next: &Vec<usize>, e: usize| next[e] != NONE && next[e] <= seg_end[e];
        let ws_at = |k: usize| get(c, k).is_some_and(is_space);
        let ws_word = |k: usize, w: &str| -> Option<usize> {
            // \s+ then w at skip_ws, returns end of w
            if !ws_at(k) {
                return None;
            }
            let r = ix.skip_ws[k];
            if at_ci(c, r, w) {
                Some(r + w.len())
            } else {
                None
            }
        };
        let mut tails = vec![0u32; n + 1];
        for p in 0..n {
            let mut m = 0u32;
            match fold(c[p]) {
                'r' => {
                    if at_ci(c, p, "rm") {
                        if ws_at(p + 2) {
                            let r = ix.skip_ws[p + 2];
                            if r < n && suf_r[r] && suf_f[r] && suf_p[r] {
                                m |= bit(T_RM);
                            }
                        }
                        if wb_end(c, p + 2) && in_seg(&r_any, p + 2) && in_seg(&f_any, p + 2) {
                            m |= bit(T_XARGS_RM);
                        }
                    }
                    if at_ci(c, p, "reboot") && name_end_ok(c, p + 6) {
                        m |= bit(T_REBOOT);
                    }
                }
                'm' => {
                    if at_ci(c, p, "mkfs") && wb_end(c, p + 4) {
                        m |= bit(T_MKFS);
                    }
                }
                'd' => {
                    if at_ci(c, p, "dd") && wb_end(c, p + 2) {
                        let e = p + 2;
                        if ofdev_next[e] != NONE && ofdev_next[e] < line_end[e] {
                            m |= bit(T_DD);
                        }
                    }
                    if at_ci(c, p, "diskutil") {
                        for w in [
                            "erasedisk",
                            "secureerase",
                            "zerodisk",
                            "erasevolume",
                            "reformat",
                        ] {
                            if let Some(e) = ws_word(p + 8, w) {
                                if wb_end(c, e) {
                                    m |= bit(T_DISKUTIL);
                                }
                            }
                        }
                    }
                }
                'k' => {
                    if at_ci(c, p, "kill") && ws_at(p + 4) {
                        let r = ix.skip_ws[p + 4];
                        if get(c, r) == Some('-') {
                            let sig = r + 1;
                            let after_sig = |len: usize| -> bool {
                                let e = sig + len;
                                if !ws_at(e) {
                                    return false;
                                }
                                let s = ix.skip_ws[e];
                                at_ci(c, s, "-1") && wb_end(c, s + 2)
                            };
                            if (at_ci(c, sig, "1") && after_sig(1))
                                || (at_ci(c, sig, "hup") && after_sig(3))
                            {
                                m |= bit(T_KHUP);
                            }
                            if (at_ci(c, sig, "9") && after_sig(1))
                                || (at_ci(c, sig, "kill") && after_sig(4))
                            {
                                m |= bit(T_KKILL);
                            }
                        }
                    }
                }
                's' => {
                    if at_ci(c, p, "shutdown") && name_end_ok(c, p + 8) {
                        m |= bit(T_SHUTDOWN);
                    }
                    if at_ci(c, p, "systemctl") {
                        for w in ["poweroff", "reboot", "halt", "kexec"] {
                            if let Some(e) = ws_word(p + 9, w) {
                                if wb_end(c, e) {
                                    m |= bit(T_SYSTEMCTL);
                                }
                            }
                        }
                    }
                    if at_ci(c, p, "shred") && wb_end(c, p + 5) && in_seg_ws(&wsdev_next, p + 5) {
                        m |= bit(T_SHRED);
                    }
                    if at_ci(c, p, "sgdisk") && wb_end(c, p + 6) {
                        let e = p + 6;
                        if !in_seg(&listflag_next, e) && in_seg_ws(&wsdev_next, e) {
                            m |= bit(T_PARTITION);
                        }
                    }
                }
                'h' => {
                    if at_ci(c, p, "halt") && name_end_ok(c, p + 4) {
                        m |= bit(T_HALT);
                    }
                }
                'p' => {
                    if at_ci(c, p, "poweroff") && name_end_ok(c, p + 8) {
                        m |= bit(T_POWEROFF);
                    }
                    if at_ci(c, p, "parted") && wb_end(c, p + 6) {
                        let e = p + 6;
                        if !in_seg(&listflag_next, e) && in_seg_ws(&wsdev_next, e) {
                            m |= bit(T_PARTITION);
                        }
                    }
                }
                'i' | 't' => {
                    let s = if at_ci(c, p, "tel") { p + 3 } else { p };
                    if at_ci(c, s, "init") && ws_at(s + 4) {
                        let r = ix.skip_ws[s + 4];
                        if matches!(get(c, r), Some('0' | '6')) && wb_end(c, r + 1) {
                            m |= bit(T_INIT);
                        }
                    }
                    if at_ci(c, p, "tee") && wb_end(c, p + 3) && in_seg_ws(&wsdev_next, p + 3) {
                        m |= bit(T_TEE);
                    }
                }
                'w' => {
                    if at_ci(c, p, "wipefs") && wb_end(c, p + 6) && in_seg_ws(&wsdev_next, p + 6) {
                        m |= bit(T_WIPEFS);
                    }
                }
                'b' => {
                    if at_ci(c, p, "blkdiscard")
                        && wb_end(c, p + 10)
                        && in_seg_ws(&wsdev_next, p + 10)
                    {
                        m |= bit(T_BLKDISCARD);
                    }
                }
                'f' => {
                    if at_ci(c, p, "fdisk") && wb_end(c, p + 5) {
                        let e = p + 5;
                        if !in_seg(&listflag_next, e) && in_seg_ws(&wsdev_next, e) {
                            m |= bit(T_PARTITION);
                        }
                    }
                    if at_ci(c, p, "find") && wb_end(c, p + 4) {
                        let e = p + 4;
                        if in_seg_ws(&wspath_next, e) {
                            if in_seg(&delete_next, e) {
                                m |= bit(T_FIND_DELETE);
                            }
                            if in_seg(&execrm_next, e) && in_seg(&f_any, e) {
                                m |= bit(T_FIND_EXEC);
                            }
                        }
                    }
                }
                'c' => {
                    if at_ci(c, p, "cfdisk") && wb_end(c, p + 6) {
                        let e = p + 6;
                        if !in_seg(&listflag_next, e) && in_seg_ws(&wsdev_next, e) {
                            m |= bit(T_PARTITION);
                        }
                    }
                    if at_ci(c, p, "cryptsetup") && wb_end(c, p + 10) && crypt_ok[p + 10] {
                        m |= bit(T_CRYPTSETUP);
                    }
                }
                'g' => {
                    if at_ci(c, p, "gdisk") && wb_end(c, p + 5) {
                        let e = p + 5;
                        if !in_seg(&listflag_next, e) && in_seg_ws(&wsdev_next, e) {
                            m |= bit(T_PARTITION);
                        }
                    }
                }
                _ => {}
            }
            tails[p] = m;
        }
        let mut slash_or = vec![0u32; n + 1];
        for k in (0..n).rev() {
            slash_or[k] = if ws[k] {
                0
            } else {
                (if c[k] == '/' { tails[k + 1] } else { 0 }) | slash_or[k + 1]
            };
        }
        let mut t = PatTables {
            ix,
            seg_end,
            tails,
            slash_or,
            has_glob,
            xr_ok: vec![false; n + 1],
            letters_end,
            env: vec![0; n + 1],
            flags: vec![0; n + 1],
            ifl: vec![0; n + 1],
            ofdev_last_line,
        };
        // xargs: tokens separated by pure [ \t] runs, then BINPATH rm with -r/-f in segment
        for i in (0..n).rev() {
            if !t.ix.ws[i] {
                continue;
            }
            let r = t.ix.skip_ws[i];
            let pure = t.ix.ts_end[i] >= r;
            t.xr_ok[i] = pure
                && r < n
                && (t.binpath_or(r) & bit(T_XARGS_RM) != 0 || t.xr_ok[t.ix.tok_end[r]]);
        }
        t.compute_states();
        t
    }

    /// OR of the tails at every name position the optional binary path allows from `x`.
    fn binpath_or(&self, x: usize) -> u32 {
        let c = self.ix.c;
        if x >= self.ix.n {
            return 0;
        }
        let mut m = self.tails[x];
        for p in SYS_BIN {
            if at_ci(c, x, p) {
                m |= self.tails[x + p.len()];
            }
        }
        if c[x] == '/' && self.has_glob[x] && x + 2 <= self.ix.n {
            m |= self.slash_or[x + 2];
        }
        m
    }

    fn xargs_at(&self, x: usize) -> bool {
        let c = self.ix.c;
        at_ci(c, x, "xargs") && wb_end(c, x + 5) && self.xr_ok[x + 5]
    }

    fn cmdmask(&self, x: usize) -> u32 {
        if x >= self.ix.n {
            return 0;
        }
        (self.binpath_or(x) & CMD_PATTERN_MASK) | if self.xargs_at(x) { bit(X_XARGS) } else { 0 }
    }

    fn qskip(&self, v: usize) -> usize {
        if matches!(get(self.ix.c, v), Some('\'' | '"')) {
            v + 1
        } else {
            v
        }
    }

    fn rest(&self, x: usize) -> u32 {
        let mut m = self.cmdmask(x);
        if self.ix.is_interp_token(x) {
            m |= self.ifl[self.ix.next(x)];
        }
        m
    }

    fn compute_states(&mut self) {
        let n = self.ix.n;
        let tok_start = |ix: &Idx, i: usize| !ix.ws[i] && (i == 0 || ix.ws[i - 1]);
        // IFL first (depends only on cmdmask at later positions)
        for i in (0..n).rev() {
            if !tok_start(&self.ix, i) || self.ix.c[i] != '-' {
                continue;
            }
            let nx = self.ix.next(i);
            let mut m = self.ifl[nx];
            if self.ix.is_c_token(i, &self.letters_end) {
                m |= self.cmdmask(self.qskip(nx));
            }
            self.ifl[i] = m;
        }
        let needed = needed_positions(&self.ix);
        for i in (0..n).rev() {
            if self.ix.ws[i] || !needed[i] {
                continue;
            }
            let wrap = head_wrap(&self.ix, i, self.rest(i), &self.flags);
            if tok_start(&self.ix, i) {
                self.flags[i] = head_flags(&self.ix, i, wrap, &self.flags);
            }
            self.env[i] = head_env(&self.ix, i, wrap, &self.env);
        }
    }

    /// Priority-first name position reached from head start `x` for tail bit `b`.
    pub(super) fn walk(&self, x: usize, b: u32) -> Option<usize> {
        let want = bit(b);
        let ix = &self.ix;
        let rest_pos = head_walk(ix, x, want, &self.env, &self.flags, |p| {
            self.rest(p) & want != 0
        })?;
        // REST: interpreter first
        let mut pos = rest_pos;
        if ix.is_interp_token(pos) && self.ifl[ix.next(pos)] & want != 0 {
            let mut y = ix.next(pos);
            loop {
                let nx = ix.next(y);
                if self.ifl[nx] & want != 0 {
                    y = nx;
                    continue;
                }
                pos = self.qskip(nx);
                break;
            }
        }
        if b == X_XARGS {
            return Some(pos);
        }
        let c = ix.c;
        for p in SYS_BIN {
            if at_ci(c, pos, p) && self.tails[pos + p.len()] & want != 0 {
                return Some(pos + p.len());
            }
        }
        if get(c, pos) == Some('/') && self.has_glob[pos] {
            let e = ix.tok_end[pos];
            let mut k = e;
            while k > pos + 2 {
                k -= 1;
                if c[k] == '/' && self.tails[k + 1] & want != 0 {
                    return Some(k + 1);
                }
            }
        }
        Some(pos)
    }

    /// Approximate end of the consumed match for tail bit `b` at name position `p`.
    pub(super) fn tail_end(&self, p: usize, b: u32) -> usize {
        let c = self.ix.c;
        let len = |w: &str| p + w.len();
        match b {
            T_RM => self.ix.skip_ws[(p + 2).min(self.ix.n)],
            T_MKFS => len("mkfs"),
            T_DD => {
                let last = self.ofdev_last_line[p];
                if last == NONE {
                    p + 2
                } else {
                    raw_device_at(c, last + 3).unwrap_or(last + 3)
                }
            }
            T_KHUP | T_KKILL | T_INIT | T_SYSTEMCTL | T_DISKUTIL => {
                // command, whitespace, word, whitespace, word: end of the last token we used
                let mut e = self.ix.tok_end[p];
                e = self.ix.tok_end[self.ix.skip_ws[e].min(self.ix.n)];
                if matches!(b, T_KHUP | T_KKILL) {
                    e = self.ix.tok_end[self.ix.skip_ws[e].min(self.ix.n)];
                }
                e
            }
            _ => self.ix.tok_end[p].max(p + 1),
        }
    }
}
