//! A test ACP client: spawns the real `agentao-acp` binary, speaks JSON-RPC over its pipes, and
//! validates every message the server sends against the reference schema.

#![allow(dead_code)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

pub mod http;
pub mod schema;
pub use schema::Schemas;

pub const TIMEOUT: Duration = Duration::from_secs(30);

pub struct Client {
    pub child: Child,
    stdin: Option<ChildStdin>,
    rx: Receiver<(Instant, Value)>,
    next_id: u64,
    methods: HashMap<u64, String>,
    pub schemas: Schemas,
    /// Messages validated against the schema so far.
    pub validated: usize,
    /// Every message received, in order.
    pub log: Vec<Value>,
}

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_agentao-acp")
}

impl Client {
    pub fn spawn(args: &[&str]) -> Client {
        Client::spawn_env(args, &[])
    }

    /// As [`Client::spawn`], with extra environment variables for the server.
    pub fn spawn_env(args: &[&str], env: &[(&str, &str)]) -> Client {
        let mut child = Command::new(bin())
            .args(args)
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("agentao-acp starts");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let v: Value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("server wrote a non-JSON line {line:?}: {e}"));
                if tx.send((Instant::now(), v)).is_err() {
                    break;
                }
            }
        });
        Client {
            stdin: child.stdin.take(),
            child,
            rx,
            next_id: 0,
            methods: HashMap::new(),
            schemas: Schemas::load(),
            validated: 0,
            log: Vec::new(),
        }
    }

    /// A server over the scripted provider with `script`, keeping sessions in `dir`.
    pub fn scripted(dir: &Path, script: &Value, extra: &[&str]) -> Client {
        let path = dir.join("script.json");
        std::fs::write(&path, script.to_string()).unwrap();
        let sessions = dir.join("sessions");
        let mut args = vec![
            "--script",
            path.to_str().unwrap(),
            "--sessions-dir",
            sessions.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        Client::spawn(&args)
    }

    pub fn send_raw(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    pub fn request(&mut self, method: &str, params: Value) -> u64 {
        self.next_id += 1;
        let id = self.next_id;
        self.methods.insert(id, method.to_owned());
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send_raw(&msg.to_string());
        id
    }

    pub fn notify(&mut self, method: &str, params: Value) {
        let msg = json!({"jsonrpc": "2.0", "method": method, "params": params});
        self.send_raw(&msg.to_string());
    }

    pub fn answer(&mut self, id: &Value, result: Value) {
        let msg = json!({"jsonrpc": "2.0", "id": id, "result": result});
        self.send_raw(&msg.to_string());
    }

    /// The next message, validated; `None` on timeout or when the server's output ended.
    pub fn recv_timed(&mut self, timeout: Duration) -> Option<(Instant, Value)> {
        match self.rx.recv_timeout(timeout) {
            Ok((t, v)) => {
                self.validate(&v);
                self.log.push(v.clone());
                Some((t, v))
            }
            Err(RecvTimeoutError::Timeout) | Err(RecvTimeoutError::Disconnected) => None,
        }
    }

    pub fn recv(&mut self) -> Value {
        self.recv_timed(TIMEOUT)
            .expect("a message from the server")
            .1
    }

    /// Whether the server's output has ended (it exited or closed stdout) within `timeout`.
    pub fn output_ended(&mut self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok((_, v)) => {
                    self.validate(&v);
                    self.log.push(v);
                }
                Err(RecvTimeoutError::Disconnected) => return true,
                Err(RecvTimeoutError::Timeout) => return false,
            }
        }
    }

    fn validate(&mut self, v: &Value) {
        self.schemas.check_server_message(v, &self.methods);
        self.validated += 1;
    }

    /// Reads until the response to `id`, handing every other message to `on_other`.
    pub fn until_response(
        &mut self,
        id: u64,
        mut on_other: impl FnMut(&mut Client, Value),
    ) -> Value {
        loop {
            let v = self.recv();
            if v.get("method").is_none() && v["id"] == json!(id) {
                return v;
            }
            on_other(self, v);
        }
    }

    pub fn initialize(&mut self) -> Value {
        let id = self.request(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": false}}}),
        );
        let r = self.until_response(id, |_, v| panic!("unexpected {v}"));
        r["result"].clone()
    }

    pub fn new_session(&mut self, cwd: &Path) -> String {
        let id = self.request(
            "session/new",
            json!({"cwd": cwd.to_str().unwrap(), "mcpServers": []}),
        );
        let r = self.until_response(id, |_, v| panic!("unexpected {v}"));
        r["result"]["sessionId"]
            .as_str()
            .expect("a session id")
            .to_owned()
    }

    pub fn prompt(&mut self, session: &str, text: &str) -> u64 {
        self.request(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]}),
        )
    }
}

impl Client {
    /// The server's resident memory now, in bytes (Linux `/proc`).
    pub fn rss_bytes(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .expect("/proc/<pid>/status");
        let kb: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmRSS");
        kb * 1024
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        self.stdin = None;
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `sessionUpdate` kinds of the session/update notifications in `log`.
pub fn update_kinds(log: &[Value]) -> Vec<String> {
    log.iter()
        .filter(|v| v["method"] == "session/update")
        .map(|v| {
            v["params"]["update"]["sessionUpdate"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect()
}
