//! Shared test helpers.

use std::io::Write as _;

use serde_json::Value;

/// Validates host events against the v3 schema the library exports, panicking on the first
/// invalid one, and records how many were checked (`scripts/test.sh` prints the total).
#[allow(dead_code)]
pub fn validate_host_events(events: &[Value]) -> usize {
    let schema: Value = serde_json::from_str(agentao::events::host::HOST_EVENTS_SCHEMA_V3).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    for e in events {
        let errors: Vec<String> = validator.iter_errors(e).map(|x| x.to_string()).collect();
        assert!(
            errors.is_empty(),
            "host event {e} fails the v3 schema: {errors:?}"
        );
    }
    let log = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/target/validated-host-events.log"
    );
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
    {
        let _ = writeln!(f, "{}", events.len());
    }
    events.len()
}
