//! Generated variants of every dangerous hardline row — wrappers
//! (including `doas`), quoting, spacing, env prefixes (quoted values), binary path spellings
//! and nested shells (`-c --`, `-o opt -c`, pipes into a shell, here-strings, substitutions) —
//! must all be refused with the row's description, and the same commands as literals (quoted
//! arguments, here-doc bodies) must all pass. Prints the count per row.
//!
//! The classes of respellings found later are generated the same way: here-strings and process
//! substitutions feeding a shell or `source` (`bash<<<'…'`, `cat<<<'…'|sh`, `. <(echo …)`),
//! `eval` of a literal or of a substitution whose output is visible, a `-c` body that is a
//! `printf` substitution, `~` / `$HOME` as a recursive-delete operand without `-f`, `find -exec
//! rm` / `-ok rm` / `-exec unlink` on a system path, and redirections onto raw devices however
//! spelled; and, as literals, here-strings and process substitutions read as data.

use std::collections::BTreeSet;

use agentao::permissions::hardline_verdict;

const ENV: &[&str] = &["", "FOO=1 ", "FOO=\"a b\" ", "A='x y' B=2 ", "LC_ALL=C "];
const WRAPPERS: &[&str] = &[
    "",
    "sudo ",
    "sudo -u root ",
    "doas ",
    "doas -u root ",
    "pkexec ",
    "env ",
    "command ",
    "exec ",
    "nohup ",
    "timeout 5 ",
    "nice -n 5 ",
];
const PATHS: &[&str] = &[
    "",
    "/bin/",
    "/usr/bin/",
    "/bin//",
    "//usr//bin/",
    "../../bin/",
    "/usr/local/sbin/",
];
const SPACES: &[&str] = &[" ", "  ", "\t"];
/// `{}` is the command; `Q` marks the quoting the form needs (`'` or `"`), if any.
const SHELLS: &[(&str, Option<char>)] = &[
    ("{}", None),
    ("bash -c '{}'", Some('\'')),
    ("sh -c \"{}\"", Some('"')),
    ("bash -c -- '{}'", Some('\'')),
    ("bash -o errexit -c '{}'", Some('\'')),
    ("bash -eo pipefail -c '{}'", Some('\'')),
    ("printf '%s' '{}' | bash", Some('\'')),
    ("echo '{}' | sh", Some('\'')),
    ("bash <<< '{}'", Some('\'')),
    ("true; {}", None),
    ("true && {}", None),
    ("echo ok\n{}", None),
    ("x=$({})", None),
    ("bash<<<'{}'", Some('\'')),
    ("cat<<<'{}'|sh", Some('\'')),
    ("cat <<< '{}' | bash -s", Some('\'')),
    ("sh < <(echo '{}')", Some('\'')),
    ("bash <(printf '%s\\n' '{}')", Some('\'')),
    (". /dev/stdin <<< '{}'", Some('\'')),
    ("bash -c \"$(printf '%s' '{}')\"", Some('\'')),
    ("eval '{}'", Some('\'')),
    ("eval \"{}\"", Some('"')),
    ("eval \"$(printf '%s' '{}')\"", Some('\'')),
    (". <(echo '{}')", Some('\'')),
    ("source <(printf '%s\\n' '{}')", Some('\'')),
];

/// (row description, command name, arguments).
const ROWS: &[(&str, &str, &str)] = &[
    (RM, "rm", "-rf /"),
    (RM, "rm", "-fr /etc"),
    (RM, "rm", "-r -f ~"),
    (RM, "rm", "--recursive --force /home"),
    (RM, "rm", "--rec --for /usr"),
    (RM, "rm", "-Rf /boot"),
    ("filesystem creation (mkfs)", "mkfs.ext4", "/dev/sda1"),
    ("filesystem creation (mkfs)", "mkfs", "-t ext4 /dev/sdb"),
    (
        "dd write to raw block device",
        "dd",
        "if=/dev/zero of=/dev/sda bs=1M",
    ),
    ("shutdown", "shutdown", "-h now"),
    ("reboot", "reboot", ""),
    ("halt", "halt", ""),
    ("poweroff", "poweroff", ""),
    ("init runlevel 0/6", "init", "0"),
    ("systemctl power transition", "systemctl", "poweroff"),
    ("kill -KILL broadcast", "kill", "-9 -1"),
    ("shred raw block device", "shred", "-n 1 /dev/sda"),
    ("wipefs raw block device", "wipefs", "-a /dev/nvme0n1"),
    ("find -delete on root/system path", "find", "/ -delete"),
    (RM, "rm", "-r ~"),
    (RM, "rm", "-R $HOME"),
    (RM, "rm", "--recursive ~/"),
    (FIND_EXEC, "find", "/etc -exec rm {} +"),
    (FIND_EXEC, "find", "/usr -ok rm {} +"),
    (FIND_EXEC, "find", "~ -exec unlink {} +"),
    (DEVICE, "echo", "x >| /dev/sda"),
    (DEVICE, "cat", "img 1>/dev/nvme0n1"),
    (DEVICE, "echo", "x > /dev//sdb"),
];
const FIND_EXEC: &str = "find -exec rm on root/system path";
const DEVICE: &str = "redirect output to raw block device";
const RM: &str = "recursive delete of root / system directory / home";

/// At most this many variants per row (a deterministic stride through the full product).
const PER_ROW: usize = 2500;

fn fits(cmd: &str, quote: Option<char>) -> bool {
    match quote {
        Some('\'') => !cmd.contains('\''),
        Some('"') => !cmd.contains(['"', '$', '`', '\\']),
        _ => true,
    }
}

/// Every spelling of one simple command (env × wrapper × path × spacing).
fn simple_commands(name: &str, args: &str) -> Vec<String> {
    let mut out = Vec::new();
    for env in ENV {
        for wrap in WRAPPERS {
            for path in PATHS {
                for sp in SPACES {
                    let body = if args.is_empty() {
                        format!("{path}{name}")
                    } else {
                        format!("{path}{name} {args}")
                    };
                    let cmd = format!("{env}{wrap}{body}").replace(' ', sp);
                    out.push(cmd);
                }
            }
        }
    }
    out
}

fn wrapped(simple: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for s in simple {
        for (form, quote) in SHELLS {
            if fits(s, *quote) {
                out.push(form.replace("{}", s));
            }
        }
    }
    out
}

/// A deterministic sample of at most `n` items, spread over the whole list.
fn sample(all: Vec<String>, n: usize) -> Vec<String> {
    if all.len() <= n {
        return all;
    }
    let step = all.len() as f64 / n as f64;
    (0..n)
        .map(|i| all[(i as f64 * step) as usize].clone())
        .collect()
}

fn fork_bombs() -> Vec<String> {
    let names = [":", "f", "bomb", "_x", "a1", "fork", "zz"];
    let forms = [
        "{n}(){ {n}|{n}& };{n}",
        "{n}() { {n} | {n} & }; {n}",
        "{n} ( ) {\n {n} | {n} &\n}\n{n}",
        "function {n} { {n}|{n} & }; {n}",
        "function {n}() { {n} & {n} & }; {n}",
        "{n}(){ {n}|{n}&};{n}",
    ];
    let mut simple = Vec::new();
    for n in names {
        for f in forms {
            for sp in SPACES {
                for pre in ["", "true; ", "cd /tmp && "] {
                    simple.push(format!("{pre}{}", f.replace("{n}", n).replace(' ', sp)));
                }
            }
        }
    }
    let mut out = Vec::new();
    for s in &simple {
        for (form, quote) in SHELLS {
            if fits(s, *quote) && !form.starts_with("x=$(") {
                out.push(form.replace("{}", s));
            }
        }
    }
    out
}

#[test]
fn generated_variants_of_every_dangerous_row_are_refused() {
    let mut per_row: Vec<(&str, usize)> = Vec::new();
    let mut failures: Vec<String> = Vec::new();
    let mut descriptions: BTreeSet<&str> = BTreeSet::new();
    for (desc, _, _) in ROWS {
        descriptions.insert(desc);
    }
    for desc in &descriptions {
        let mut variants: Vec<String> = Vec::new();
        for (d, name, args) in ROWS.iter().filter(|r| r.0 == *desc) {
            let _ = d;
            variants.extend(wrapped(&simple_commands(name, args)));
        }
        let variants = sample(variants, PER_ROW);
        for v in &variants {
            let got = hardline_verdict(v);
            // The reference's table names `$(/bin/systemctl poweroff)` by its `poweroff` row.
            let also = (*desc == "systemctl power transition").then_some("poweroff");
            if got.as_deref() != Some(*desc) && (got.is_none() || got.as_deref() != also) {
                failures.push(format!("{desc}: {v:?} got {got:?}"));
            }
        }
        per_row.push((desc, variants.len()));
    }
    let bombs = sample(fork_bombs(), PER_ROW);
    for v in &bombs {
        if hardline_verdict(v).as_deref() != Some("fork bomb") {
            failures.push(format!("fork bomb: {v:?}"));
        }
    }
    per_row.push(("fork bomb", bombs.len()));
    for (desc, n) in &per_row {
        eprintln!("generated variants refused: {n:>5}  {desc}");
    }
    let total: usize = per_row.iter().map(|r| r.1).sum();
    eprintln!("generated variants refused: {total:>5}  (all rows)");
    assert!(
        failures.is_empty(),
        "{} of {total} variants passed the floor, e.g.:\n{}",
        failures.len(),
        failures
            .iter()
            .take(40)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(per_row.iter().all(|r| r.1 >= 1000), "{per_row:?}");
}

#[test]
fn the_same_commands_as_literals_pass() {
    let mut n = 0;
    let mut failures = Vec::new();
    for (_, name, args) in ROWS {
        let simple = sample(simple_commands(name, args), 60);
        for s in simple.iter().filter(|s| !s.contains('\'')) {
            for (form, quote) in [
                ("echo '{}'", None),
                ("grep -n '{}' notes.txt", None),
                ("git commit -m '{}'", None),
                ("cat <<'EOF'\n{}\nEOF", None),
                ("printf '%s' '{}' > notes.txt", None),
                ("cat <<< '{}'", None),
                ("grep -c x <<< '{}'", None),
                ("diff <(echo '{}') notes.txt", None),
                ("git commit -m \"$(printf '%s' '{}')\"", None),
                ("eval \"echo '{}'\"", Some('"')),
            ] {
                if !fits(s, quote) {
                    continue;
                }
                let cmd = form.replace("{}", s);
                n += 1;
                if let Some(d) = hardline_verdict(&cmd) {
                    failures.push(format!("{cmd:?}: {d}"));
                }
            }
        }
    }
    eprintln!("generated literal forms allowed: {n}");
    assert!(n > 1000, "{n}");
    assert!(
        failures.is_empty(),
        "{} literal forms refused:\n{}",
        failures.len(),
        failures
            .iter()
            .take(40)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
}
