//! Tool-argument repair (`turn::planning::parse_arguments`) and tool-name repair
//! (`turn::planning::repair_name`) on whatever a model sends.
//!
//! Asserts: no panic; a valid JSON object is taken as it is (a repair never rewrites valid
//! input); what the repair returns is stable (its canonical JSON parses back to the same map);
//! a repaired name is one of the offered names, and an offered name maps to itself.
#![no_main]

use agentao::turn::planning::{parse_arguments, repair_name};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

const OFFERED: &[&str] = &[
    "read_file",
    "write_file",
    "replace",
    "list_directory",
    "glob",
    "search_file_content",
    "run_shell_command",
    "web_fetch",
    "save_memory",
    "ask_user",
    "todo_write",
];

fuzz_target!(|data: &[u8]| {
    let Ok(raw) = std::str::from_utf8(data) else {
        return;
    };
    let parsed = parse_arguments(raw);
    if let Ok(Value::Object(m)) = serde_json::from_str::<Value>(raw) {
        assert_eq!(parsed.as_ref(), Ok(&m), "a valid object was rewritten");
    }
    if let Ok(m) = &parsed {
        let canonical = serde_json::to_string(m).expect("a map serializes");
        assert_eq!(
            parse_arguments(&canonical).as_ref(),
            Ok(m),
            "not stable: {canonical}"
        );
    }

    let name = raw.lines().next().unwrap_or("");
    if let Some(hit) = repair_name(name, OFFERED.iter().copied()) {
        assert!(
            OFFERED.contains(&hit.as_str()),
            "{name:?} repaired to {hit:?}"
        );
    }
    if raw.is_empty() {
        // Once per run (libFuzzer starts with the empty input).
        for o in OFFERED {
            assert_eq!(repair_name(o, OFFERED.iter().copied()).as_deref(), Some(*o));
        }
    }
});
