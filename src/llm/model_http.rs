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

use reqwest::header::{HeaderMap, HeaderName, HeaderValue, ACCEPT, CONTENT_TYPE};

use super::config::OpenAiConfig;
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
    Reqwest(reqwest::Client, Endpoint, HeaderMap),
}

impl ModelHttp {
    /// The client for `path` under `c.base_url`, as `c.http_client` says, sending `wire_headers`
    /// (the wire's authentication and version) and then the content type, `llm.headers` and
    /// the accepted type with every request. The set is built once here: a request only
    /// copies it.
    pub(crate) fn new(
        c: &OpenAiConfig,
        path: &str,
        wire_headers: HeaderMap,
    ) -> Result<ModelHttp, String> {
        let headers = request_headers(wire_headers, c)?;
        Self::with_headers(
            format!("{}{path}", c.base_url),
            headers,
            c.connect_timeout,
            c.http_client,
        )
    }

    fn with_headers(
        url: String,
        headers: HeaderMap,
        connect_timeout: Duration,
        choice: HttpClientChoice,
    ) -> Result<ModelHttp, String> {
        let url = match reqwest::Url::parse(&url) {
            Ok(u) => Endpoint::Parsed(u),
            Err(_) => Endpoint::Unparsed(url),
        };
        let lane = match (&url, choice) {
            (Endpoint::Parsed(u), HttpClientChoice::Auto) => {
                Lane::for_url(u, connect_timeout, &headers)
            }
            _ => None,
        };
        Ok(match lane {
            Some(lane) => ModelHttp::Lane(lane),
            None => ModelHttp::Reqwest(agent_client(connect_timeout)?, url, headers),
        })
    }

    /// Posts `body` with the headers; the response whatever its status. A connect timeout is
    /// [`LlmError::timeout`], any other failure a connection error naming its deepest cause.
    pub(crate) async fn post(&self, body: RequestBody) -> Result<Response, LlmError> {
        let (http, url, headers) = match self {
            ModelHttp::Lane(lane) => {
                return match lane.post(body).await {
                    Err(LaneError::ConnectTimeout) => Err(LlmError::timeout()),
                    Err(e) => Err(LlmError::connection(connection_message(&e))),
                    Ok(r) => Ok(Response::Lane(r)),
                }
            }
            ModelHttp::Reqwest(http, url, headers) => (http, url, headers),
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

/// A model request's headers: the wire's own, `Content-Type: application/json`, `llm.headers`
/// (each replacing one of the same name), `Accept: text/event-stream`.
fn request_headers(mut headers: HeaderMap, c: &OpenAiConfig) -> Result<HeaderMap, String> {
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    for (k, v) in &c.headers {
        let name = HeaderName::from_bytes(k.as_bytes())
            .map_err(|_| format!("config field `llm.headers.{k}`: bad header name"))?;
        let value = HeaderValue::from_str(v)
            .map_err(|_| format!("config field `llm.headers.{k}`: bad header value"))?;
        headers.insert(name, value);
    }
    headers.insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
    Ok(headers)
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
        let client =
            |url: String, choice| ModelHttp::with_headers(url, HeaderMap::new(), t, choice);
        let forced = client(url(), HttpClientChoice::Reqwest).expect("client");
        assert!(matches!(forced, ModelHttp::Reqwest(..)));
        let proxied = ["HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"]
            .iter()
            .any(|v| std::env::var_os(v).is_some());
        let auto = client(url(), HttpClientChoice::Auto).expect("client");
        assert_eq!(matches!(auto, ModelHttp::Lane(_)), !proxied);
        let tls = client("https://127.0.0.1:9/x".into(), HttpClientChoice::Auto);
        assert!(matches!(tls, Ok(ModelHttp::Reqwest(..))));
    }
}
