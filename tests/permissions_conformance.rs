//! Conformance: every recorded vector of the reference permission layer.

use serde_json::Value;

const DIR: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../shared/conformance/permissions/"
);

fn load(name: &str) -> Vec<Value> {
    let path = format!("{DIR}{name}");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("conformance file {path} missing: {e}"));
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).expect("vector is JSON"))
        .collect()
}

#[test]
fn hardline_vectors() {
    let vectors = load("hardline.jsonl");
    let mut failures = Vec::new();
    for v in &vectors {
        let cmd = v["command"].as_str().expect("command");
        let want = v["description"].as_str();
        let got = agentao::permissions::hardline_verdict(cmd);
        if got.as_deref() != want {
            failures.push(format!("{cmd:?}: want {want:?}, got {got:?}"));
        }
    }
    eprintln!(
        "hardline: {} / {} passed",
        vectors.len() - failures.len(),
        vectors.len()
    );
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
