//! The model's HTTP client: one abstraction over the two stacks that reach a model server, the
//! lean lane ([`super::http_lane`], plain `http://` with no proxy) and reqwest (everything else).
//! Every wire (OpenAI chat completions, Anthropic messages, OpenAI responses) posts through
//! [`ModelHttp::post`] and reads the same [`Response`]; `tests/model_http.rs` runs one
//! conformance suite against both clients on the same server.
//!
//! An enum rather than a trait object: the OpenAI path's instruction counts are measured per
//! request and per delta (`bench/`), and a `match` adds neither a dynamic call nor an
//! allocation, where a boxed future per request would.

use std::time::Duration;

use reqwest::header::HeaderMap;

use super::http_lane::{Lane, LaneError, Response};
use super::openai::http::connection_message;
use super::request_body::RequestBody;
use super::LlmError;

/// Which client reaches the model (`OpenAiConfig::http_client`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum HttpClientChoice {
    /// The lean lane when the endpoint allows it (plain `http://`, no proxy variable, no
    /// credentials in the URL), reqwest otherwise.
    #[default]
    Auto,
    /// reqwest always, plain `http://` included: the conformance suite's second client, and a
    /// way to rule the lane out when diagnosing a server.
    Reqwest,
}

/// The chat URL, parsed once. One that does not parse keeps its error where it always was:
/// each request fails with a connection error.
pub(crate) enum Endpoint {
    Parsed(reqwest::Url),
    Unparsed(String),
}

/// How a model request goes out. Each answer, a redirect included, is the answer: neither
/// client follows a redirect (the request carries credentials; `redirect_refused`).
pub(crate) enum ModelHttp {
    /// The lean lane: an agent on it does not pay for a reqwest client (~6 µs and its memory
    /// per agent).
    Lane(Lane),
    /// Built with the backend, so a client that cannot be built fails the agent's creation.
    Reqwest(reqwest::Client, Endpoint),
}

impl ModelHttp {
    /// The client for `url` as `choice` says.
    pub(crate) fn new(
        url: String,
        connect_timeout: Duration,
        choice: HttpClientChoice,
    ) -> Result<ModelHttp, String> {
        let url = match reqwest::Url::parse(&url) {
            Ok(u) => Endpoint::Parsed(u),
            Err(_) => Endpoint::Unparsed(url),
        };
        let lane = match (&url, choice) {
            (Endpoint::Parsed(u), HttpClientChoice::Auto) => Lane::for_url(u, connect_timeout),
            _ => None,
        };
        Ok(match lane {
            Some(lane) => ModelHttp::Lane(lane),
            None => ModelHttp::Reqwest(agent_client(connect_timeout)?, url),
        })
    }

    /// Posts `body` with `headers`; the response whatever its status. A connect timeout is
    /// [`LlmError::timeout`], any other failure a connection error naming its deepest cause.
    pub(crate) async fn post(
        &self,
        headers: &HeaderMap,
        body: RequestBody,
    ) -> Result<Response, LlmError> {
        let (http, url) = match self {
            ModelHttp::Lane(lane) => {
                return match lane.post(headers, body).await {
                    Err(LaneError::ConnectTimeout) => Err(LlmError::timeout()),
                    Err(e) => Err(LlmError::connection(connection_message(&e))),
                    Ok(r) => Ok(Response::Lane(r)),
                }
            }
            ModelHttp::Reqwest(http, url) => (http, url),
        };
        let post = match url {
            Endpoint::Parsed(u) => http.post(u.clone()),
            Endpoint::Unparsed(u) => http.post(u),
        };
        match post
            .headers(headers.clone())
            .body(body.to_bytes())
            .send()
            .await
        {
            Ok(r) => Ok(Response::Reqwest(r)),
            Err(e) if e.is_timeout() => Err(LlmError::timeout()),
            Err(e) => Err(LlmError::connection(connection_message(&e))),
        }
    }
}

/// The agent's own reqwest client: its connection pool closes with the agent (a shared pool
/// kept an idle connection to the server open after `agentao_agent_free`). Building one costs a
/// few microseconds (the webpki roots are static; about 6 µs in a release build on these
/// machines). It follows no redirect: the request carries the conversation and `llm.headers`,
/// which reqwest would have sent to any origin a server named (it strips only `Authorization`),
/// over plain `http` or to a loopback or metadata address as well (`redirect_refused`).
pub(crate) fn agent_client(connect_timeout: Duration) -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .connect_timeout(connect_timeout)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| format!("cannot build the HTTP client: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The conformance suite's second client is reqwest only if the choice is obeyed.
    #[test]
    fn the_choice_picks_the_client() {
        let url = || "http://127.0.0.1:9/v1/chat/completions".to_owned();
        let t = Duration::from_secs(1);
        let forced = ModelHttp::new(url(), t, HttpClientChoice::Reqwest).expect("client");
        assert!(matches!(forced, ModelHttp::Reqwest(..)));
        let proxied = ["HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"]
            .iter()
            .any(|v| std::env::var_os(v).is_some());
        let auto = ModelHttp::new(url(), t, HttpClientChoice::Auto).expect("client");
        assert_eq!(matches!(auto, ModelHttp::Lane(_)), !proxied);
        let tls = ModelHttp::new("https://127.0.0.1:9/x".into(), t, HttpClientChoice::Auto);
        assert!(matches!(tls, Ok(ModelHttp::Reqwest(..))));
    }
}
