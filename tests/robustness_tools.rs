//! The "Tools" rows of the fault matrix (docs/reliability.md): output flood, never-ending
//! command, huge command, giant file, concurrent edit, SIGKILL mid-write. Each test prints the
//! figures the matrix quotes (`cargo test --test robustness_tools -- --nocapture`); the long
//! variants run with `AGENTAO_HEAVY=1`.
//!
//! Memory is measured on this process (`/proc/self/status`), so the tests of this file take
//! one lock and run one at a time.

mod common;
mod tools_support;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use agentao::agent::{Agent, TurnOptions, TurnResult};
use agentao::events::transport::Transport;
use agentao::turn::TurnStatus;
use serde_json::{json, Value};

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn heavy() -> bool {
    std::env::var("AGENTAO_HEAVY").is_ok_and(|v| v == "1")
}

fn status_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/self/status"))
}

/// Peak resident memory since [`PeakRss::start`], in MiB above the RSS at that moment.
struct PeakRss {
    base_kib: u64,
}

impl PeakRss {
    fn start() -> Self {
        // Resets VmHWM to the current RSS (Linux ≥ 4.0).
        std::fs::write("/proc/self/clear_refs", "5").expect("reset the peak RSS");
        PeakRss {
            base_kib: status_kib("VmRSS:"),
        }
    }

    fn growth_mib(&self) -> f64 {
        status_kib("VmHWM:").saturating_sub(self.base_kib) as f64 / 1024.0
    }
}

/// A host that allows every call and counts the streamed output; `emit_delay` makes it slow.
#[derive(Default)]
struct CountingHost {
    emit_delay: Option<Duration>,
    output_events: AtomicU64,
    output_bytes: AtomicU64,
}

impl Transport for CountingHost {
    fn emit(&self, event: &str) {
        let bytes = event.as_bytes();
        if bytes.starts_with(br#"{"type":"tool_output""#) {
            self.output_events.fetch_add(1, Ordering::Relaxed);
            self.output_bytes
                .fetch_add(bytes.len() as u64, Ordering::Relaxed);
        }
        if let Some(d) = self.emit_delay {
            std::thread::sleep(d);
        }
    }
}

fn agent_with(host: Arc<CountingHost>, dir: &std::path::Path, calls: Value, extra: Value) -> Agent {
    let mut config = json!({
        "working_directory": dir,
        "llm": {"provider": "scripted", "script": {"responses": [{"tool_calls": calls}]}},
    });
    if let Value::Object(extra) = extra {
        for (k, v) in extra {
            config[k] = v;
        }
    }
    Agent::new(&config.to_string(), Some(host)).unwrap()
}

fn shell_call(command: &str) -> Value {
    json!([{"id": "c1", "name": "run_shell_command", "arguments": json!({"command": command}).to_string()}])
}

/// What one cancelled turn measured.
struct Cancelled {
    peak_mib: f64,
    cancel_to_done: Duration,
    result: TurnResult,
}

/// Starts a turn, cancels it after `run_for`, and measures the peak RSS growth over the whole
/// turn and the time from the cancel to the completion.
fn cancel_after(agent: &Agent, run_for: Duration) -> Cancelled {
    let peak = PeakRss::start();
    let (token, rx) = common::start_cancellable(agent, "go");
    std::thread::sleep(run_for);
    let fired = Instant::now();
    token.cancel("fault-test");
    let (done_at, result) = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("the turn did not complete within 30 s of the cancel");
    Cancelled {
        peak_mib: peak.growth_mib(),
        cancel_to_done: done_at.saturating_duration_since(fired),
        result,
    }
}

fn assert_cancelled(c: &Cancelled) -> String {
    let o = c.result.as_ref().expect("the turn failed");
    assert_eq!(o.status, TurnStatus::Cancelled);
    o.text.clone()
}

/// How long a cancelled turn may take to complete here: the promised 100 ms plus killing the
/// process group, with a margin for a loaded 2-core machine.
const CANCEL_BOUND: Duration = Duration::from_millis(1000);
/// How much a flooding tool may grow this process: the tool's own buffers (1 MiB per stream),
/// the streamed-output budget, and the allocator's slack.
const FLOOD_MEMORY_BOUND_MIB: f64 = 64.0;

fn flood(name: &str, host: CountingHost, command: &str, extra: Value) {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let host = Arc::new(host);
    let agent = agent_with(host.clone(), dir.path(), shell_call(command), extra);
    let run_for = Duration::from_secs(if heavy() { 10 } else { 2 });
    let c = cancel_after(&agent, run_for);
    let text = assert_cancelled(&c);
    println!(
        "FIGURE tools/{name}: peak RSS growth {:.1} MiB over {:?}, cancel->completion {} ms, \
         {} tool_output events ({} bytes) reached the host",
        c.peak_mib,
        run_for,
        c.cancel_to_done.as_millis(),
        host.output_events.load(Ordering::Relaxed),
        host.output_bytes.load(Ordering::Relaxed),
    );
    assert!(text.starts_with("[Cancelled: fault-test]"), "{text}");
    assert!(
        c.peak_mib < FLOOD_MEMORY_BOUND_MIB,
        "{name}: RSS grew {:.1} MiB",
        c.peak_mib
    );
    assert!(
        c.cancel_to_done < CANCEL_BOUND,
        "{name}: cancel took {:?}",
        c.cancel_to_done
    );
    assert!(host.output_events.load(Ordering::Relaxed) > 0);
}

#[test]
fn output_flood_with_a_fast_host() {
    flood("flood-yes", CountingHost::default(), "yes", json!({}));
}

#[test]
fn output_flood_with_a_slow_host() {
    let host = CountingHost {
        emit_delay: Some(Duration::from_millis(1)),
        ..Default::default()
    };
    flood("flood-yes-slow-emit", host, "yes", json!({}));
}

#[test]
fn auto_allowed_recursive_grep_ends_promptly_after_cancel() {
    flood(
        "flood-grep",
        CountingHost::default(),
        "grep -r . /usr /var /etc",
        json!({"permissions": {"mode": "full-access"}}),
    );
}

#[test]
fn never_ending_command_ends_promptly_after_cancel() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let host = Arc::new(CountingHost::default());
    // A busy loop, and a child that left the process group still holding the output pipe.
    let agent = agent_with(
        host,
        dir.path(),
        shell_call("(setsid sleep 30 &); while :; do :; done"),
        json!({}),
    );
    let c = cancel_after(&agent, Duration::from_millis(500));
    let text = assert_cancelled(&c);
    println!(
        "FIGURE tools/never-ending: peak RSS growth {:.1} MiB, cancel->completion {} ms",
        c.peak_mib,
        c.cancel_to_done.as_millis()
    );
    assert!(text.starts_with("[Cancelled: fault-test]"), "{text}");
    assert!(c.cancel_to_done < CANCEL_BOUND, "{:?}", c.cancel_to_done);
}

/// A text file of one line of `len` bytes (`é` then ASCII, so a char count differs from the
/// byte count), written in pieces.
fn one_line_file(path: &std::path::Path, len: u64) {
    use std::io::Write as _;
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    f.write_all("é".as_bytes()).unwrap();
    let block = vec![b'a'; 1 << 20];
    let mut left = len - 2;
    while left > 0 {
        let n = left.min(block.len() as u64) as usize;
        f.write_all(&block[..n]).unwrap();
        left -= n as u64;
    }
    f.flush().unwrap();
}

#[test]
fn giant_single_line_file_is_read_in_bounded_pieces() {
    let _serial = serial();
    let env = tools_support::Env::new();
    let len: u64 = if heavy() { 1 << 30 } else { 256 << 20 };
    one_line_file(&env.path("line.txt"), len);
    let peak = PeakRss::start();
    let t0 = Instant::now();
    let out = env.call("read_file", serde_json::json!({"file_path": "line.txt"}));
    let elapsed = t0.elapsed();
    let grew = peak.growth_mib();
    println!(
        "FIGURE tools/giant-line: a {} MiB single-line file, peak RSS growth {grew:.1} MiB, read in {} ms",
        len >> 20,
        elapsed.as_millis()
    );
    let chars = len - 1;
    let expected = format!(
        "File: line.txt (1 lines)\nShowing lines 1-1\n     1\té{}[+{} chars]\n[1 line(s) truncated to 2000 chars per line]",
        "a".repeat(1999),
        chars - 2000
    );
    assert_eq!(out, expected);
    assert!(grew < 32.0, "reading grew RSS by {grew:.1} MiB");
}

/// The contents of the copies edits kept because another write landed in the file they replaced.
fn conflict_copies(env: &tools_support::Env) -> Vec<String> {
    std::fs::read_dir(&env.root)
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .contains(".agentao-conflict-")
        })
        .map(|e| std::fs::read_to_string(e.path()).unwrap())
        .collect()
}

#[test]
fn concurrent_append_during_replace_is_never_lost_silently() {
    let _serial = serial();
    let env = tools_support::Env::new();
    // Enough content that each edit takes a while to read and write.
    let body: String = (0..5_000).map(|i| format!("filler line {i}\n")).collect();
    env.write("log.txt", format!("version: 0\n{body}"));
    let appends = if heavy() { 1000 } else { 200 };
    let mut appender = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "i=0; while [ $i -lt {appends} ]; do i=$((i+1)); echo \"appended $i\" >> log.txt; sleep 0.01; done"
        ))
        .current_dir(&env.root)
        .spawn()
        .unwrap();
    let (mut edits, mut refused, mut raced) = (0u32, 0u32, 0u32);
    let mut version = 0u64;
    while appender.try_wait().unwrap().is_none() {
        let out = env.call(
            "replace",
            serde_json::json!({"file_path": "log.txt", "old_text": format!("version: {version}\n"), "new_text": format!("version: {}\n", version + 1)}),
        );
        if out.starts_with("Replaced 1 occurrence") {
            version += 1;
            edits += 1;
        } else if out.contains("was not applied") {
            refused += 1;
        } else if out.contains("That copy is saved as") {
            version += 1;
            raced += 1;
        } else {
            panic!("unexpected result: {out}");
        }
    }
    let text = std::fs::read_to_string(env.path("log.txt")).unwrap();
    let kept = conflict_copies(&env);
    assert_eq!(kept.len(), raced as usize);
    let missing = |i: &u32| !text.contains(&format!("appended {i}\n"));
    let in_final = (1..=appends).filter(|i| !missing(i)).count();
    let lost = (1..=appends)
        .filter(|i| missing(i) && !kept.iter().any(|k| k.contains(&format!("appended {i}\n"))))
        .count();
    println!(
        "FIGURE tools/concurrent-edit: {edits} edits applied, {refused} refused as changed since the read, \
         {raced} reported a write racing the rename (its copy kept); {in_final} of {appends} \
         appended lines in the file, {lost} lost"
    );
    assert!(text.starts_with(&format!("version: {version}\n{body}")));
    assert!(edits > 0, "no edit went through");
    // A write in the moment between the last check and the rename lands in the replaced copy,
    // which is kept and reported.
    assert_eq!(lost, 0, "appended lines lost");
}

/// The window `concurrent_append_during_replace_is_never_lost_silently` met once in a loaded
/// run (1 of 200 lines lost): a writer that opened the file before the edit's rename and
/// writes after the edit's last look at the replaced file. Here the writer is held between
/// its `open` and its `write` on purpose, for 300 ms.
#[test]
fn a_writer_holding_the_file_open_across_the_rename_is_not_lost() {
    use std::io::{BufRead as _, Write as _};
    let _serial = serial();
    let env = tools_support::Env::new();
    env.write("log.txt", "version: 0\nline\n");
    let mut writer = std::process::Command::new("sh")
        .arg("-c")
        .arg("exec 3>>log.txt; echo opened; read go; echo 'late line' >&3")
        .current_dir(&env.root)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut opened = String::new();
    std::io::BufReader::new(writer.stdout.take().unwrap())
        .read_line(&mut opened)
        .unwrap();
    assert_eq!(opened, "opened\n");
    let mut go = writer.stdin.take().unwrap();
    let release = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        go.write_all(b"go\n").unwrap();
    });
    let out = env.call(
        "replace",
        json!({"file_path": "log.txt", "old_text": "version: 0\n", "new_text": "version: 1\n"}),
    );
    release.join().unwrap();
    assert!(writer.wait().unwrap().success());
    let text = std::fs::read_to_string(env.path("log.txt")).unwrap();
    assert!(text.starts_with("version: 1\n"), "{text}");
    let kept = conflict_copies(&env);
    assert!(
        text.contains("late line") || kept.iter().any(|k| k.contains("late line")),
        "the late line is lost: result {out:?}, file {text:?}, kept copies {kept:?}"
    );
    if !text.contains("late line") {
        assert!(out.contains("That copy is saved as"), "{out}");
    }
}

/// Not a test of its own: the child process of `sigkill_mid_write_keeps_the_original`, which
/// re-runs this binary with `AGENTAO_FAULT_WRITE_CHILD` set to the file to overwrite.
#[test]
fn child_process_for_the_sigkill_test() {
    let Ok(path) = std::env::var("AGENTAO_FAULT_WRITE_CHILD") else {
        return;
    };
    let size: usize = std::env::var("AGENTAO_FAULT_WRITE_SIZE")
        .unwrap()
        .parse()
        .unwrap();
    use agentao::tools::FileSystem as _;
    let data = vec![b'x'; size];
    agentao::tools::LocalFileSystem
        .write_bytes(std::path::Path::new(&path), &data, false)
        .unwrap();
}

fn temp_files(dir: &std::path::Path) -> Vec<(String, u64)> {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            (name.starts_with(".agentao-write-") && name.ends_with(".tmp"))
                .then(|| (name, e.metadata().map(|m| m.len()).unwrap_or(0)))
        })
        .collect()
}

#[test]
fn sigkill_mid_write_keeps_the_original_and_the_next_write_cleans_up() {
    let _serial = serial();
    let env = tools_support::Env::new();
    let target = env.write("big.txt", "original\n");
    let size: usize = if heavy() { 300 << 20 } else { 128 << 20 };
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_process_for_the_sigkill_test",
            "--test-threads=1",
        ])
        .env("AGENTAO_FAULT_WRITE_CHILD", &target)
        .env("AGENTAO_FAULT_WRITE_SIZE", size.to_string())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Kill it once its temporary file has data in it.
    let deadline = Instant::now() + Duration::from_secs(60);
    let staged = loop {
        let found = temp_files(&env.root);
        if let Some((_, len)) = found.iter().find(|(_, len)| *len > 0) {
            break *len;
        }
        assert!(
            child.try_wait().unwrap().is_none(),
            "the child finished before it could be killed mid-write"
        );
        assert!(Instant::now() < deadline, "the child never started writing");
        std::thread::sleep(Duration::from_micros(200));
    };
    child.kill().unwrap();
    child.wait().unwrap();
    let left = temp_files(&env.root);
    println!(
        "FIGURE tools/sigkill-mid-write: killed with {} MiB staged of {} MiB; left {:?}",
        staged >> 20,
        size >> 20,
        left
    );
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "original\n");
    assert_eq!(left.len(), 1, "the kill left no temporary file: {left:?}");
    // The next write in that directory removes what a dead writer left.
    assert_eq!(
        env.call(
            "write_file",
            serde_json::json!({"file_path": "other.txt", "content": "x"})
        ),
        "Successfully wrote to other.txt"
    );
    assert_eq!(temp_files(&env.root), vec![]);
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "original\n");
}

/// A one-line chat on an agent of its own, timed.
fn one_line_chat(dir: &std::path::Path) -> Duration {
    let config = json!({
        "working_directory": dir,
        "llm": {"provider": "scripted", "script": {"responses": [{"text": "hello"}]}},
    });
    let agent = Agent::new(&config.to_string(), None).unwrap();
    let t0 = Instant::now();
    let o = agent.run_blocking("hi", TurnOptions::default()).unwrap();
    assert_eq!(o.text, "hello");
    t0.elapsed()
}

/// An agent whose model asks to run `command`, under a permission engine (so planning scans
/// it).
fn shell_agent(dir: &std::path::Path, command: &str) -> Agent {
    let config = json!({
        "working_directory": dir,
        "permissions": {"mode": "full-access"},
        "llm": {"provider": "scripted", "script": {"responses": [
            {"tool_calls": shell_call(command)}, {"text": "done"}]}},
    });
    Agent::new(&config.to_string(), None).unwrap()
}

fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[test]
fn huge_commands_do_not_hold_up_other_agents() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let idle = one_line_chat(dir.path());
    // Two agents planning a 4 MB (heavy: 20 MB) command each, on a runtime with as many
    // workers as cores. Recording such a call in history and sending it back to the model is
    // linear work that stays on the turn's worker (about 0.1 s per MB in a debug build).
    let mib = if heavy() { 5 } else { 1 };
    let huge = format!("echo {}", "a b ".repeat(mib << 20));
    let bytes = huge.len();
    let agents: Vec<Agent> = (0..2).map(|_| shell_agent(dir.path(), &huge)).collect();
    let t0 = Instant::now();
    let turns: Vec<_> = agents
        .iter()
        .map(|a| common::start_cancellable(a, "go"))
        .collect();
    std::thread::sleep(Duration::from_millis(50));
    let busy = one_line_chat(dir.path());
    // The first is cancelled, the second runs to its end.
    let fired = Instant::now();
    turns[0].0.cancel("fault-test");
    let mut ended = Vec::new();
    for (agent, (_token, rx)) in agents.iter().zip(&turns) {
        let (done_at, result) = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("the turn did not end");
        let o = result.as_ref().unwrap();
        ended.push((o.status, done_at.duration_since(t0)));
        if o.status == TurnStatus::Cancelled {
            let took = done_at.saturating_duration_since(fired);
            println!(
                "FIGURE tools/huge-command-cancel: cancel->completion {} ms",
                took.as_millis()
            );
            assert!(took < CANCEL_BOUND, "cancel took {took:?}");
            continue;
        }
        let results = common::tool_results(agent);
        assert_eq!(results.len(), 1);
        assert!(
            results[0].starts_with(&format!("Error: the command is {} bytes", thousands(bytes))),
            "{}",
            &results[0][..results[0].len().min(300)]
        );
    }
    println!(
        "FIGURE tools/huge-command: a one-line chat took {} ms alone and {} ms while two agents \
         planned {bytes}-byte commands; those turns ended (status, after) {:?}",
        idle.as_millis(),
        busy.as_millis(),
        ended
    );
    // The defect this guards against held the chat for 20 s (0.1.0, issue 10): the planner
    // scanned the whole command on the worker. What stays on the workers now (recording the
    // call, about 0.1 s per MB in a debug build) took the chat 245 ms here, and 1,076 ms beside
    // Miri and a release build on 2 cores (2026-12-07); the bound is for the defect, not a speed.
    assert!(busy < Duration::from_secs(5), "the chat took {busy:?}");
}

#[test]
fn planning_a_long_command_is_cancellable() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    // Under the size bound, but slow to scan: the turn must stop waiting for it on cancel.
    let long = format!("echo {}", "a b ".repeat(30_000));
    let mut worst = Duration::ZERO;
    let mut cancelled_while_planning = 0;
    for _ in 0..3 {
        let agent = shell_agent(dir.path(), &long);
        let (token, rx) = common::start_cancellable(&agent, "go");
        std::thread::sleep(Duration::from_millis(20));
        let fired = Instant::now();
        token.cancel("fault-test");
        let (done_at, result) = rx.recv_timeout(Duration::from_secs(60)).unwrap();
        let took = done_at.saturating_duration_since(fired);
        worst = worst.max(took);
        let o = result.unwrap();
        if o.status == TurnStatus::Cancelled
            && common::tool_results(&agent)
                .iter()
                .all(|r| !r.starts_with("STDOUT"))
        {
            cancelled_while_planning += 1;
        }
    }
    println!(
        "FIGURE tools/long-command-cancel: a 120 KB command, cancel->completion at most {} ms \
         ({cancelled_while_planning} of 3 cancelled before running)",
        worst.as_millis()
    );
    assert!(worst < CANCEL_BOUND, "cancel took {worst:?}");
}
