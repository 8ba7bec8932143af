//! run_shell_command: formatting, limits, process-group hygiene, cancellation, containment.

mod tools_support;

use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::json;
use tools_support::Env;

fn sh(env: &Env, command: &str) -> String {
    env.call("run_shell_command", json!({"command": command}))
}

/// Running and not a zombie (`kill -0` alone also succeeds for an unreaped zombie).
fn alive(pid: u32) -> bool {
    let ok = std::process::Command::new("kill")
        .args(["-0", &pid.to_string()])
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        return false;
    }
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let state = stat
        .rsplit(')')
        .next()
        .unwrap_or("")
        .trim_start()
        .chars()
        .next();
    !matches!(state, Some('Z') | Some('X') | None)
}

fn wait_gone(pids: &[u32]) -> bool {
    let deadline = Instant::now() + Duration::from_secs(2);
    while Instant::now() < deadline {
        if pids.iter().all(|p| !alive(*p)) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

fn pids_in(out: &str) -> Vec<u32> {
    out.split(|c: char| !c.is_ascii_digit())
        .filter_map(|t| t.parse().ok())
        .filter(|p| *p > 1)
        .collect()
}

#[test]
fn result_layout() {
    let env = Env::new();
    assert_eq!(
        sh(&env, "echo out; echo err >&2; exit 3"),
        "STDOUT:\nout\n\n\nSTDERR:\nerr\n\n\nExit code: 3"
    );
    assert_eq!(sh(&env, "true"), "Command completed with no output.");
    assert_eq!(sh(&env, "kill -TERM $$"), "Signal: 15");
    assert_eq!(
        sh(&env, "printf 'a\\0b'"),
        "STDOUT:\n[binary output — 3 bytes not shown]"
    );
    assert_eq!(
        sh(
            &env,
            "printf '10%%\\r50%%\\r100%%\\r\\n\\033[31mred\\033[0m\\n'"
        ),
        "STDOUT:\n100%\nred\n"
    );
    assert_eq!(
        sh(&env, "pwd"),
        format!("STDOUT:\n{}\n", env.root.display())
    );
    std::fs::create_dir(env.path("sub")).unwrap();
    assert_eq!(
        env.call(
            "run_shell_command",
            json!({"command": "pwd", "working_directory": "sub"})
        ),
        format!("STDOUT:\n{}/sub\n", env.root.display())
    );
    // Output is streamed to the host as it arrives.
    let seen = Mutex::new(String::new());
    let out = env
        .try_call_with_output(
            "run_shell_command",
            json!({"command": "echo one; echo two >&2"}),
            &|c| seen.lock().unwrap().push_str(c),
        )
        .unwrap();
    assert_eq!(out, "STDOUT:\none\n\n\nSTDERR:\ntwo\n");
    let seen = seen.into_inner().unwrap();
    assert!(seen.contains("one\n") && seen.contains("two\n"), "{seen:?}");
}

#[test]
fn working_directory_containment() {
    let env = Env::new();
    let root = env.root.display().to_string();
    let parent = env.root.parent().unwrap().display().to_string();
    assert_eq!(
        env.call("run_shell_command", json!({"command": "pwd", "working_directory": ".."})),
        format!("Error: PathPolicy: refused '..' — resolves to '{parent}', outside project_root '{root}'")
    );
    assert_eq!(
        env.call(
            "run_shell_command",
            json!({"command": "pwd", "working_directory": "nope"})
        ),
        "Error: working_directory 'nope' does not exist or is not a directory."
    );
    std::os::unix::fs::symlink("/", env.path("rootlink")).unwrap();
    assert!(env
        .call(
            "run_shell_command",
            json!({"command": "pwd", "working_directory": "rootlink"})
        )
        .starts_with("Error: PathPolicy: refused 'rootlink' — resolves to '/'"));
    assert_eq!(
        env.call(
            "run_shell_command",
            json!({"command": "pwd", "working_directory": "a\u{0}b"})
        ),
        "Error: working_directory 'a\u{0}b' cannot be used: embedded null byte."
    );
}

#[test]
fn inactivity_timeout_kills_the_group() {
    let env = Env::new();
    let t = Instant::now();
    let out = env.call(
        "run_shell_command",
        json!({"command": "echo started; echo $$ > pid.txt; sleep 30 & echo $! >> pid.txt; wait", "timeout": 1}),
    );
    let took = t.elapsed();
    assert_eq!(
        out,
        "Command timed out after 1s of inactivity.\nCommand: echo started; echo $$ > pid.txt; sleep 30 & echo $! >> pid.txt; wait\n\nPartial output before timeout:\nSTDOUT... placeholder"
            .replace("STDOUT... placeholder", "started\n")
    );
    assert!(took < Duration::from_secs(5), "{took:?}");
    let pids = pids_in(&std::fs::read_to_string(env.path("pid.txt")).unwrap());
    assert_eq!(pids.len(), 2);
    assert!(wait_gone(&pids), "processes left behind: {pids:?}");
}

#[test]
fn children_that_outlive_the_command_are_killed() {
    let env = Env::new();
    let t = Instant::now();
    let out = sh(
        &env,
        "sleep 300 & echo $!; (sleep 300; echo late) & echo $!",
    );
    assert!(t.elapsed() < Duration::from_secs(5));
    let pids = pids_in(&out);
    assert_eq!(pids.len(), 2, "{out}");
    assert!(wait_gone(&pids), "children left behind: {pids:?}");
}

#[test]
fn cancel_kills_within_a_second() {
    let env = Env::new();
    let (out, latency) = std::thread::scope(|s| {
        let h = s.spawn(|| {
            let out = sh(
                &env,
                "echo $$ > pid.txt; sleep 300 & echo $! >> pid.txt; echo working; wait",
            );
            (out, Instant::now())
        });
        let deadline = Instant::now() + Duration::from_secs(5);
        while std::fs::read_to_string(env.path("pid.txt"))
            .map(|s| s.lines().count())
            .unwrap_or(0)
            < 2
        {
            assert!(Instant::now() < deadline, "command did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        std::thread::sleep(Duration::from_millis(100));
        let cancelled_at = Instant::now();
        env.cancel.cancel("user-cancel");
        let (out, done) = h.join().unwrap();
        (out, done - cancelled_at)
    });
    assert!(latency < Duration::from_secs(1), "{latency:?}");
    assert!(
        out.starts_with("[Operation Cancelled] user-cancel\nCommand: echo $$ > pid.txt;"),
        "{out}"
    );
    assert!(
        out.ends_with("\n\nOutput before it was cancelled:\nworking\n"),
        "{out}"
    );
    let pids = pids_in(&std::fs::read_to_string(env.path("pid.txt")).unwrap());
    assert!(wait_gone(&pids), "processes left behind: {pids:?}");
}

#[test]
fn hundred_megabytes_of_output_is_bounded() {
    let env = Env::new();
    let t = Instant::now();
    let out = sh(
        &env,
        "head -c 100000000 /dev/zero | tr '\\0' 'a'; echo; echo tail-marker",
    );
    assert!(t.elapsed() < Duration::from_secs(20), "{:?}", t.elapsed());
    assert!(out.chars().count() <= 40_000, "{}", out.chars().count());
    assert!(out.starts_with("STDOUT:\naaaa"));
    assert!(
        out.contains("bytes of output not kept, and "),
        "{}",
        &out[7_000..8_200]
    );
    assert!(out.ends_with("a\ntail-marker\n"));
}

#[test]
fn closed_stdout_and_long_commands() {
    let env = Env::new();
    assert_eq!(
        sh(&env, "exec 1>&-; sleep 0.3; echo err >&2"),
        "STDERR:\nerr\n"
    );
    let long = format!("true {}", "x".repeat(3_000));
    assert_eq!(sh(&env, &long), "Command completed with no output.");
    let out = env.call(
        "run_shell_command",
        json!({"command": format!("sleep 5 # {}", "y".repeat(2_500)), "timeout": 0.3}),
    );
    assert!(
        out.starts_with("Command timed out after 0s of inactivity.\nCommand: sleep 5 # yyy"),
        "{}",
        &out[..80]
    );
    assert!(
        out.ends_with(" [... 510 more chars of the command not shown]"),
        "{}",
        &out[out.len() - 80..]
    );
}

#[test]
fn background_mode_returns_at_once() {
    let env = Env::new();
    let t = Instant::now();
    let out = env.call(
        "run_shell_command",
        json!({"command": "sleep 30", "is_background": true}),
    );
    assert!(t.elapsed() < Duration::from_secs(2));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "Background process started.");
    let pid: u32 = lines[1].strip_prefix("PID: ").unwrap().parse().unwrap();
    assert_eq!(lines[2], format!("PGID: {pid}"));
    assert_eq!(lines[3], "Command: sleep 30");
    assert_eq!(
        lines[4],
        format!("Working directory: {}", env.root.display())
    );
    assert_eq!(lines[5], format!("To stop: kill -- -{pid}"));
    assert!(alive(pid));
    std::process::Command::new("kill")
        .args(["-KILL", "--", &format!("-{pid}")])
        .status()
        .unwrap();
    assert!(wait_gone(&[pid]));
}

#[test]
fn provider_credentials_are_scrubbed() {
    let env = Env::new();
    std::env::set_var("OPENAI_API_KEY", "sk-test-scrub-me-0123456789");
    std::env::set_var("AGENTAO_TEST_ALIAS", "alias-credential-value-42");
    std::env::set_var("AGENTAO_TEST_KEEP", "kept");
    agentao::tools::note_credential_value("alias-credential-value-42");
    let out = sh(
        &env,
        "echo \"[${OPENAI_API_KEY}][${AGENTAO_TEST_ALIAS}][${AGENTAO_TEST_KEEP}]\"",
    );
    assert_eq!(out, "STDOUT:\n[][][kept]\n");
    let open = Env::with_config(tools_support::settings(
        json!({"shell": {"scrub_env": false}}),
    ));
    assert_eq!(
        sh(&open, "echo $OPENAI_API_KEY"),
        "STDOUT:\nsk-test-scrub-me-0123456789\n"
    );
}
