//! `mock-openai (--script FILE [--prerender] | --prerendered FILE... | --session WINDOW)
//!  [--port-file FILE] [--requests-out FILE] [--raw-requests-out FILE] [--no-stdin]`
//!
//! Serves the script on `127.0.0.1:0`, prints `listening on http://127.0.0.1:PORT/v1` on stdout,
//! and runs until stdin closes (unless `--no-stdin`), SIGTERM or SIGINT. On exit the received
//! request bodies go to `--requests-out` as JSON lines, and to `--raw-requests-out` byte for
//! byte, one body a line (the benchmark's raw client replays them to measure the floor).
//!
//! For benchmarks the server can answer from bytes rendered in advance, doing next to no work
//! per request: `--prerendered FILE` (repeatable) serves complete SSE bodies, and
//! `--script FILE --prerender` renders each response of the script once, on each of the three
//! wires (`/chat/completions`, `/messages`, `/responses`). With several bodies a
//! request carrying `k` tool results gets body `k` (see `MockBuilder::start_prerendered_many`).
//! `--session WINDOW` serves the session model (`SessionModel`, its defaults but the window in
//! tokens) on the chat wire: a session of any length against a small window, for the
//! long-session benchmark. `GET /v1/_stats` answers `{"busy_nanos": N, "requests": N}`.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use mock_openai::MockServer;

const USAGE: &str = "usage: mock-openai (--script FILE [--prerender] | --prerendered FILE... \
     | --session WINDOW) [--port-file FILE] [--requests-out FILE] [--raw-requests-out FILE] [--no-stdin]";

struct Args {
    script: Option<PathBuf>,
    prerender: bool,
    prerendered: Vec<PathBuf>,
    session: Option<u64>,
    port_file: Option<PathBuf>,
    requests_out: Option<PathBuf>,
    raw_requests_out: Option<PathBuf>,
    watch_stdin: bool,
}

fn parse_args() -> Result<Args, String> {
    let mut script = None;
    let mut prerender = false;
    let mut prerendered = Vec::new();
    let mut session = None;
    let mut port_file = None;
    let mut requests_out = None;
    let mut raw_requests_out = None;
    let mut watch_stdin = true;
    let mut it = std::env::args_os().skip(1);
    while let Some(a) = it.next() {
        let a = a.to_string_lossy().into_owned();
        let mut value = |name: &str| {
            it.next()
                .map(PathBuf::from)
                .ok_or_else(|| format!("{name} needs a value"))
        };
        match a.as_str() {
            "--script" => script = Some(value("--script")?),
            "--port-file" => port_file = Some(value("--port-file")?),
            "--requests-out" => requests_out = Some(value("--requests-out")?),
            "--raw-requests-out" => raw_requests_out = Some(value("--raw-requests-out")?),
            "--prerender" => prerender = true,
            "--prerendered" => prerendered.push(value("--prerendered")?),
            "--session" => {
                let w = value("--session")?;
                let w = w.to_string_lossy();
                session = Some(
                    w.parse::<u64>()
                        .ok()
                        .filter(|&w| w > 0)
                        .ok_or_else(|| format!("--session: `{w}` is not a window in tokens"))?,
                );
            }
            "--no-stdin" => watch_stdin = false,
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    let sources = usize::from(script.is_some())
        + usize::from(!prerendered.is_empty())
        + usize::from(session.is_some());
    if sources != 1 {
        return Err("give one of --script, --prerendered or --session".into());
    }
    if prerender && script.is_none() {
        return Err("--prerender needs --script".into());
    }
    Ok(Args {
        script,
        prerender,
        prerendered,
        session,
        port_file,
        requests_out,
        raw_requests_out,
        watch_stdin,
    })
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            if !e.is_empty() {
                eprintln!("mock-openai: {e}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mock-openai: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: Args) -> Result<(), String> {
    let record = args.requests_out.is_some() || args.raw_requests_out.is_some();
    let server =
        match (&args.script, args.session) {
            (None, Some(window)) => MockServer::builder().record_bodies(record).start_session(
                mock_openai::SessionModel {
                    window,
                    ..mock_openai::SessionModel::default()
                },
            ),
            (Some(path), _) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
                let script: serde_json::Value = serde_json::from_str(&text)
                    .map_err(|e| format!("{}: not JSON: {e}", path.display()))?;
                if args.prerender {
                    let at = |e: String| format!("{}: {e}", path.display());
                    let typed = |wire| mock_openai::render_wire_sse_all(wire, script.clone());
                    let anthropic = typed(mock_openai::Wire::Anthropic).map_err(at)?;
                    let responses = typed(mock_openai::Wire::Responses).map_err(at)?;
                    let chat = mock_openai::render_sse_all(script).map_err(at)?;
                    MockServer::builder()
                        .record_bodies(record)
                        .start_prerendered_wires(chat, anthropic, responses)
                } else {
                    MockServer::start(script)
                }
            }
            (None, None) => {
                let bodies = args
                    .prerendered
                    .iter()
                    .map(|p| {
                        std::fs::read(p)
                            .map(bytes::Bytes::from)
                            .map_err(|e| format!("cannot read {}: {e}", p.display()))
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                MockServer::builder()
                    .record_bodies(record)
                    .start_prerendered_many(bodies)
            }
        }
        .map_err(|e| e.to_string())?;
    if let Some(p) = &args.port_file {
        // Before the listen line: a caller that has read the line may read the file at once.
        // Write then rename, so a reader never sees a half-written port.
        let tmp = p.with_extension("tmp");
        std::fs::write(&tmp, format!("{}\n", server.port()))
            .and_then(|()| std::fs::rename(&tmp, p))
            .map_err(|e| format!("cannot write {}: {e}", p.display()))?;
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    // Signal handlers go in before the listen line: a caller may send SIGTERM as soon as it
    // has read it.
    let signals = rt.block_on(async {
        use tokio::signal::unix::{signal, SignalKind};
        Ok::<_, String>((
            signal(SignalKind::terminate()).map_err(|e| e.to_string())?,
            signal(SignalKind::interrupt()).map_err(|e| e.to_string())?,
        ))
    })?;
    {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "listening on {}", server.base_url());
        let _ = out.flush();
    }
    rt.block_on(wait_for_exit(args.watch_stdin, signals))?;

    if let Some(p) = &args.requests_out {
        server
            .write_requests_jsonl(p)
            .map_err(|e| format!("cannot write {}: {e}", p.display()))?;
    }
    if let Some(p) = &args.raw_requests_out {
        let mut out = Vec::new();
        for body in server.raw_requests() {
            out.extend_from_slice(&body);
            out.push(b'\n');
        }
        std::fs::write(p, out).map_err(|e| format!("cannot write {}: {e}", p.display()))?;
    }
    drop(server);
    Ok(())
}

async fn wait_for_exit(
    watch_stdin: bool,
    (mut term, mut int): (tokio::signal::unix::Signal, tokio::signal::unix::Signal),
) -> Result<(), String> {
    let (tx, stdin_closed) = tokio::sync::oneshot::channel::<()>();
    // Without --no-stdin a thread reads stdin to its end; with it, the sender is held so the
    // receiver never resolves.
    let _held = if watch_stdin {
        std::thread::spawn(move || {
            let mut sink = [0u8; 4096];
            let mut stdin = std::io::stdin().lock();
            while matches!(stdin.read(&mut sink), Ok(n) if n > 0) {}
            let _ = tx.send(());
        });
        None
    } else {
        Some(tx)
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
        _ = stdin_closed => {}
    }
    Ok(())
}
