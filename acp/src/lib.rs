//! `agentao-acp`: the agentao agent behind the Agent Client Protocol on stdio.
//!
//! Built on the library's public Rust API only: [`agentao::agent::Agent`]'s entry points and
//! the [`agentao::events::transport::Transport`] trait.
//!
//! | module | owns |
//! |---|---|
//! | [`server`] | the method dispatcher, sessions by id, prompt turns, shutdown |
//! | [`session`] | one session: its agent, mode, model knobs, history file |
//! | [`transport`] | events → `session/update`; permission and `ask_user` round trips |
//! | [`protocol`] | the ACP payloads, typed after the reference's schema |
//! | [`rpc`] | JSON-RPC framing, the ordered outbox, requests awaiting the client |
//! | [`options`] | command line and config file |

pub mod options;
pub mod protocol;
pub mod rpc;
pub mod server;
pub mod session;
pub mod transport;

use std::io::{BufRead, Write};
use std::time::Duration;

/// How long shutdown waits for cancelled prompts to finish.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Serves one connection until `input` ends; everything queued is written before it returns.
pub fn serve(input: impl BufRead, output: impl Write + Send + 'static, opts: options::Options) {
    let (out, writer) = rpc::Outbox::start(output);
    let server = server::Server::new(opts, out);
    server.run(input, SHUTDOWN_GRACE);
    let out = server.outbox().clone();
    drop(server);
    out.close();
    let _ = writer.join();
}
