//! A throwaway PostgreSQL server for the tests, through `scripts/postgres.sh` (one per data
//! directory under `build/`, started on first use and left running for the next test binary).

use std::path::PathBuf;
use std::process::Command;

fn script(dir: &str, action: &str) -> std::process::Output {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    Command::new(root.join("scripts/postgres.sh"))
        .arg(action)
        .env("AGENTAO_PG_DIR", root.join("build").join(dir))
        .output()
        .expect("scripts/postgres.sh runs")
}

/// The URL of the server in `build/<dir>`, started if needed; `None` (after saying why) when
/// PostgreSQL cannot run here. With `AGENTAO_PG_REQUIRED=1` that is a failure instead.
pub fn server(dir: &str) -> Option<String> {
    let out = script(dir, "start");
    let stdout = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    if out.status.code() == Some(3) {
        assert!(
            std::env::var_os("AGENTAO_PG_REQUIRED").is_none(),
            "PostgreSQL is required: {stdout}"
        );
        eprintln!("SKIPPED: PostgreSQL {stdout}");
        return None;
    }
    assert!(
        out.status.success(),
        "scripts/postgres.sh start: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(stdout.lines().last().unwrap_or_default().to_owned())
}

/// Stops the server in `build/<dir>` (fast shutdown: clients are disconnected).
#[allow(dead_code)] // not every test binary that includes this module stops a server
pub fn stop(dir: &str) {
    let out = script(dir, "stop");
    assert!(out.status.success(), "scripts/postgres.sh stop");
}
