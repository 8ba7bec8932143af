//! Tool-argument repair (`llm::tool_call::parse_arguments`) and tool-name repair
//! (`turn::plan::repair_name`) on whatever a model sends.
//!
//! Asserts: no panic; a valid JSON object is taken as it is (a repair never rewrites valid
//! input); what the repair returns is stable (its canonical JSON parses back to the same map);
//! a repaired name is one of the offered names, and an offered name maps to itself.
#![no_main]

use agentao::llm::tool_call::parse_arguments;
use agentao::turn::plan::repair_name;
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

/// Equal, floats within an ulp or two: serde_json's default float parser is not exact (found by
/// this target: `7.777777777777777e+52` reads back one ulp lower), which is harmless here.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) if x.is_f64() || y.is_f64() => {
            let (x, y) = (
                x.as_f64().unwrap_or(f64::NAN),
                y.as_f64().unwrap_or(f64::NAN),
            );
            x == y || (x - y).abs() <= 4.0 * f64::EPSILON * x.abs().max(y.abs())
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

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
        let again = parse_arguments(&canonical).expect("canonical JSON parses");
        assert!(
            same(&Value::Object(again), &Value::Object(m.clone())),
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
