//! An OpenAI-compatible server on this machine (llama.cpp, Ollama, vLLM on loopback) needs no
//! API key: the config accepts a loopback `base_url` without one, and the request then carries
//! no Authorization header. Any other host still requires the key.

use std::sync::Arc;

use agentao::config::{AgentConfig, Env, LlmConfig};
use serde_json::json;

/// No environment fallbacks (a developer's OPENAI_API_KEY must not make the test pass).
struct NoEnv;
impl Env for NoEnv {
    fn var(&self, _: &str) -> Option<String> {
        None
    }
}

fn parse(base_url: &str, api_key: Option<&str>) -> Result<AgentConfig, String> {
    let mut llm = json!({"provider": "openai", "base_url": base_url, "model": "m"});
    if let Some(k) = api_key {
        llm["api_key"] = json!(k);
    }
    let doc = json!({"working_directory": std::env::temp_dir(), "llm": llm}).to_string();
    AgentConfig::from_json_with_env(&doc, &NoEnv).map_err(|e| e.0)
}

fn key_of(c: &AgentConfig) -> String {
    match &c.llm {
        LlmConfig::OpenAi(o) => o.api_key.clone(),
        other => panic!("not openai: {other:?}"),
    }
}

#[test]
fn a_loopback_base_url_needs_no_key() {
    for url in [
        "http://127.0.0.1:8080/v1",
        "http://127.1.2.3/v1",
        "http://localhost:11434/v1",
        "http://LOCALHOST./v1",
        "http://llama.localhost:8080/v1",
        "http://[::1]:8000/v1",
        "https://127.0.0.1/v1",
    ] {
        let c = parse(url, None).unwrap_or_else(|e| panic!("{url}: {e}"));
        assert_eq!(key_of(&c), "", "{url}");
    }
}

#[test]
fn any_other_host_still_requires_the_key() {
    for url in [
        "https://api.openai.com/v1",
        "http://10.0.0.5:8080/v1",
        "http://localhost.example.com/v1",
        "http://127.0.0.1.example.com/v1",
        "http://[::2]/v1",
        "http://0.0.0.0:8080/v1",
    ] {
        let e = parse(url, None).expect_err(url);
        assert!(
            e.contains("config field `llm.api_key`: required (or set OPENAI_API_KEY)")
                && e.contains("only a loopback base_url may omit it"),
            "{url}: {e}"
        );
    }
    // A key given for a loopback server is kept and sent.
    let c = parse("http://127.0.0.1:1/v1", Some("sk-local")).unwrap();
    assert_eq!(key_of(&c), "sk-local");
}

/// Serves one whole-JSON completion and returns the request head it read.
async fn one_exchange(api_key: Option<&str>) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = tokio::spawn(async move {
        let (mut sock, _) = listener.accept().await.unwrap();
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = sock.read(&mut chunk).await.unwrap();
            assert!(n > 0, "the client closed before its request head ended");
            buf.extend_from_slice(&chunk[..n]);
        }
        let body = r#"{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"local answer"},"finish_reason":"stop"}]}"#;
        let resp = format!("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}", body.len());
        sock.write_all(resp.as_bytes()).await.unwrap();
        let end = buf.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
        String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase()
    });
    let config = parse(&format!("http://127.0.0.1:{port}/v1"), api_key).unwrap();
    let client = agentao::llm::LlmClient::new(&config.llm).unwrap();
    let req = agentao::llm::ChatRequest {
        system: "s",
        history: &[],
        history_version: agentao::llm::MessagesVersion::unknown(),
        transcript_version: agentao::llm::MessagesVersion::unknown(),
        transcript: &[],
        tail: None,
        tools: &Arc::default(),
    };
    let mut call = client.start(&req, &agentao::cancel::CancelToken::new());
    let mut text = String::new();
    while let Some(p) = call.next().await.unwrap() {
        if let agentao::llm::Piece::Text(t) = p {
            text.push_str(t.text);
        }
    }
    assert_eq!(text, "local answer");
    server.await.unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn without_a_key_no_authorization_header_is_sent() {
    let head = one_exchange(None).await;
    assert!(head.starts_with("post /v1/chat/completions"), "{head}");
    assert!(!head.contains("authorization"), "{head}");
}

#[tokio::test(flavor = "multi_thread")]
async fn with_a_key_the_bearer_header_is_sent() {
    let head = one_exchange(Some("sk-local")).await;
    assert!(
        head.contains("\r\nauthorization: bearer sk-local"),
        "{head}"
    );
}
