//! `agentao-acp`: see `agentao-acp --help` and docs/acp.md.

use std::process::ExitCode;

use agentao_acp::options::{self, Command, USAGE};

fn main() -> ExitCode {
    let opts = match options::parse(std::env::args().skip(1)) {
        Ok(Command::Help) => {
            print!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Ok(Command::Version) => {
            println!("agentao-acp {}", env!("CARGO_PKG_VERSION"));
            return ExitCode::SUCCESS;
        }
        Ok(Command::Serve(o)) => o,
        Err(e) => {
            eprintln!("agentao-acp: {e}");
            return ExitCode::from(2);
        }
    };
    // Refuse a bad config at start, not at the first session/new.
    let mut probe = opts.template.clone();
    probe["working_directory"] = serde_json::json!(std::env::temp_dir().display().to_string());
    if let Err(e) = agentao::agent::Agent::new(&probe.to_string(), None) {
        eprintln!("agentao-acp: invalid configuration: {e}");
        return ExitCode::from(2);
    }
    let stdin = std::io::stdin();
    agentao_acp::serve(stdin.lock(), std::io::stdout(), opts);
    // Runtime worker threads may still be parked; the connection is over.
    std::process::exit(0)
}
