//! The store, its tools and the notice injection, driven with synthetic child runs (futures
//! that settle as told), so every state is reached on purpose.

mod notices;
mod persist;
mod store;

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::record::TaskStatus;
use super::store::CancelResult;
use super::store::{LaunchError, MAX_IN_FLIGHT};
use super::tools::{CancelBackgroundAgent, CheckBackgroundAgent};
use super::*;
use crate::cancel::CancelToken;
use crate::tools::{HostRequests, Tool, ToolContext, ToolServices, ToolsConfig};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn store(rt: &tokio::runtime::Runtime) -> Arc<BackgroundStore> {
    BackgroundStore::new(rt.handle().clone(), None)
}

fn completed(text: &str) -> RunReport {
    RunReport::bare(Settled::Completed {
        result: text.to_owned(),
    })
}

/// A run that ends when told to (`Some(report)`), or reports cancelled when its token is.
fn gated(
    rx: tokio::sync::oneshot::Receiver<RunReport>,
) -> impl FnOnce(
    &str,
    CancelToken,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = RunReport> + Send>> {
    move |_, token| {
        Box::pin(async move {
            tokio::select! {
                r = rx => r.unwrap_or_else(|_| RunReport::bare(Settled::Cancelled { result: None })),
                _ = token.cancelled() => RunReport::bare(Settled::Cancelled {
                    result: Some(format!("[Cancelled: {}]", token.reason())),
                }),
            }
        })
    }
}

fn settle_wait(s: &Arc<BackgroundStore>, id: &str) -> TaskStatus {
    let view = s
        .wait(id, Duration::from_secs(10), &CancelToken::new())
        .expect("known id");
    view.rec.status
}

struct NoHost;
impl HostRequests for NoHost {
    fn ask_user(&self, _q: &str, _h: &Value) -> Result<String, String> {
        Err("no host".into())
    }
}

/// Runs a tool as the executor would; returns its text and the streamed output.
fn run_tool(tool: &dyn Tool, args: Value, cancel: &CancelToken) -> (String, Vec<String>) {
    let out = Mutex::new(Vec::new());
    let output = |s: &str| out.lock().unwrap().push(s.to_owned());
    let services = ToolServices::default();
    let settings = ToolsConfig::default();
    let ctx = ToolContext {
        workspace: Path::new("/"),
        call_id: "c1",
        cancel,
        output: &output,
        host: &NoHost,
        settings: &settings,
        services: &services,
        approval: crate::tools::Approval::Other,
    };
    let Value::Object(args) = args else {
        panic!("args object")
    };
    let text = tool.execute(&args, &ctx).unwrap();
    let streamed = out.lock().unwrap().clone();
    (text, streamed)
}
