//! `hyper-floor`: the persistent child of `bench/bench.c` (see the crate's `lib.rs` and
//! `command.rs`). EOF on stdin exits.

use std::io::{BufRead, Write};
use std::time::{Duration, Instant};

use hyper_floor::client::{Connection, Keep};
use hyper_floor::command::{Command, DecodedText, ExpectedText, Measured};
use hyper_floor::requests::RequestBodies;
use hyper_floor::sse_lines::DataLineCounter;
use hyper_floor::sse_text::DeltaTextDecoder;
use nix::time::{clock_gettime, ClockId};

fn cpu_now() -> Duration {
    clock_gettime(ClockId::CLOCK_PROCESS_CPUTIME_ID)
        .map(Duration::from)
        .unwrap_or_default()
}

/// Replays `bodies` `times` times on `conn`, checking `text` in each replay's last response.
async fn replay(
    conn: &mut Connection,
    bodies: &[bytes::Bytes],
    times: u32,
    text: &ExpectedText,
    counter: &mut DataLineCounter,
) -> Result<(), String> {
    let mut last = Vec::new();
    for _ in 0..times {
        for (i, body) in bodies.iter().enumerate() {
            let keep = match text {
                ExpectedText::Contains(_) if i + 1 == bodies.len() => {
                    last.clear();
                    Keep::Body(&mut last)
                }
                _ => Keep::Nothing,
            };
            conn.exchange(body.clone(), counter, keep).await?;
        }
        if let ExpectedText::Contains(t) = text {
            if memchr::memmem::find(&last, t.as_bytes()).is_none() {
                return Err(format!("the last response lacks {t:?}"));
            }
        }
    }
    Ok(())
}

/// Replays `bodies` `times` times on a new connection, decoding every delta's text.
async fn execute_text(
    addr: std::net::SocketAddr,
    file: &std::path::Path,
    times: u32,
) -> Result<Measured, String> {
    let bodies = RequestBodies::read(file)?.0;
    let mut decoder = DeltaTextDecoder::default();
    let (cpu0, wall0) = (cpu_now(), Instant::now());
    let mut conn = Connection::open(addr).await?;
    for _ in 0..times {
        for body in &bodies {
            conn.exchange_text(body.clone(), &mut decoder).await?;
        }
    }
    let (wall, cpu) = (wall0.elapsed(), cpu_now().saturating_sub(cpu0));
    Ok(Measured {
        wall_ns: wall.as_nanos() as u64,
        lines: decoder.lines(),
        cpu_ns: cpu.as_nanos() as u64,
        decoded: Some(DecodedText::of(decoder.deltas(), decoder.text())),
    })
}

/// `connections` connections at once, each replaying `file`'s bodies once; every one must end.
async fn execute_many(
    addr: std::net::SocketAddr,
    file: &std::path::Path,
    connections: u32,
) -> Result<Measured, String> {
    let bodies = std::rc::Rc::new(RequestBodies::read(file)?.0);
    let (cpu0, wall0) = (cpu_now(), Instant::now());
    let local = tokio::task::LocalSet::new();
    let lines = local
        .run_until(async {
            let tasks: Vec<_> = (0..connections)
                .map(|_| {
                    let bodies = bodies.clone();
                    tokio::task::spawn_local(async move {
                        let mut counter = DataLineCounter::default();
                        let mut conn = Connection::open(addr).await?;
                        for body in bodies.iter() {
                            conn.exchange(body.clone(), &mut counter, Keep::Nothing)
                                .await?;
                        }
                        Ok::<u64, String>(counter.lines())
                    })
                })
                .collect();
            let mut lines = 0;
            for t in tasks {
                lines += t.await.map_err(|e| format!("task: {e}"))??;
            }
            Ok::<u64, String>(lines)
        })
        .await?;
    let (wall, cpu) = (wall0.elapsed(), cpu_now().saturating_sub(cpu0));
    Ok(Measured {
        wall_ns: wall.as_nanos() as u64,
        lines,
        cpu_ns: cpu.as_nanos() as u64,
        decoded: None,
    })
}

async fn execute(command: Command) -> Result<Measured, String> {
    let (addr, file, times, text, fresh) = match command {
        Command::Text { addr, file, times } => return execute_text(addr, &file, times).await,
        Command::Many {
            addr,
            file,
            connections,
        } => return execute_many(addr, &file, connections).await,
        Command::Run {
            addr,
            file,
            times,
            text,
        } => (addr, file, times, text, false),
        Command::Fresh { addr, file, text } => (addr, file, 1, text, true),
    };
    let mut bodies = RequestBodies::read(&file)?.0;
    if fresh {
        bodies.truncate(1);
    }
    let mut counter = DataLineCounter::default();
    let (cpu0, wall0) = (cpu_now(), Instant::now());
    let mut conn = Connection::open(addr).await?;
    replay(&mut conn, &bodies, times, &text, &mut counter).await?;
    let (wall, cpu) = (wall0.elapsed(), cpu_now().saturating_sub(cpu0));
    Ok(Measured {
        wall_ns: wall.as_nanos() as u64,
        lines: counter.lines(),
        cpu_ns: cpu.as_nanos() as u64,
        decoded: None,
    })
}

fn main() {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            println!("err runtime: {e}");
            return;
        }
    };
    let stdin = std::io::stdin();
    let mut stdout = std::io::stdout();
    for line in stdin.lock().lines() {
        let Ok(line) = line else { break };
        let answer = match Command::parse(&line) {
            Ok(command) => match runtime.block_on(execute(command)) {
                Ok(m) => m.to_string(),
                Err(e) => format!("err {e}"),
            },
            Err(e) => format!("err {e}"),
        };
        if writeln!(stdout, "{answer}")
            .and_then(|()| stdout.flush())
            .is_err()
        {
            break;
        }
    }
}
