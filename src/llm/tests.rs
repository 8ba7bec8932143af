//! Unit tests of the LLM layer: text digests, scripted streams, and reading buffered events.

use serde_json::json;

use super::*;

/// The digests are the SHA-256 prefixes of the text (the prompt; the JSON list of tool
/// names) whichever way they are found: computed, from the memo, or from the client's
/// last list; a different list (even with the same names) is looked up, not mistaken.
#[test]
fn digests_are_the_texts_whichever_way_found() {
    let client = LlmClient::new(&LlmConfig::Scripted(json!({"responses": []}))).unwrap();
    for prompt in ["", "You are \"x\"\n😀", "You are \"x\"\n😀"] {
        assert_eq!(
            &*client.prompt_digest(prompt),
            fingerprint::hex16(prompt.as_bytes())
        );
    }
    let names = ["glob", "read_file", "write\"file"];
    let expected = fingerprint::hex16(serde_json::to_string(&names).unwrap().as_bytes());
    let list = Arc::new(vec![json!(1), json!(2), json!(3)]);
    let same_names = Arc::new((*list).clone());
    let fewer = Arc::new(vec![json!(1)]);
    for (schemas, names) in [
        (&list, &names[..]),
        (&list, &names[..]),
        (&fewer, &names[..1]),
        (&list, &names[..]),
        (&same_names, &names[..]),
    ] {
        let got = client.tools_digest(schemas, names.iter().copied());
        let want = if names.len() == 3 {
            expected.clone()
        } else {
            fingerprint::hex16(serde_json::to_string(names).unwrap().as_bytes())
        };
        assert_eq!(&*got, want);
    }
}

/// What a driver of the call saw: the pieces, how it ended, and the response.
#[derive(Debug, PartialEq)]
struct Seen {
    pieces: Vec<String>,
    end: String,
    cancelled: bool,
    response: String,
}

/// Drives one call on a fresh client of `script`. `ready(i)`: whether step `i` goes through
/// [`LlmCall::next_ready`] first (else `next` alone, as before it existed); the token is
/// cancelled right after piece number `cancel_after`, as a host callback would.
async fn drive(script: &Value, ready: impl Fn(usize) -> bool, cancel_after: usize) -> Seen {
    let client = LlmClient::new(&LlmConfig::Scripted(script.clone())).unwrap();
    let cancel = CancelToken::new();
    let history = [Message::User("hi".into())];
    let req = ChatRequest {
        system: "s",
        history: &history,
        history_version: MessagesVersion::unknown(),
        transcript_version: MessagesVersion::unknown(),
        transcript: &[],
        tail: None,
        tools: &Arc::default(),
    };
    let mut call = client.start(&req, &cancel);
    let mut pieces = Vec::new();
    let end = loop {
        let step = pieces.len();
        let next = match ready(step).then(|| call.next_ready()).flatten() {
            Some(next) => next,
            None => call.next().await,
        };
        match next {
            Ok(Some(p)) => pieces.push(format!("{p:?}")),
            Ok(None) => break "end".to_owned(),
            Err(e) => break format!("{}: {} ({})", e.class, e.message, e.streamed),
        }
        if pieces.len() == cancel_after {
            cancel.cancel("host");
        }
    };
    let cancelled = call.was_cancelled();
    let r = call.finish();
    let response = format!(
        "{:?} {:?} {:?} {:?} {:?} {:?}",
        r.content, r.reasoning, r.tool_calls, r.finish_reason, r.usage, r.model
    );
    Seen {
        pieces,
        end,
        cancelled,
        response,
    }
}

fn scripts() -> Vec<Value> {
    let tool =
        json!({"id": "c1", "name": "read_file", "arguments": ["{\"file_path\"", ": \"a\"}"]});
    [
        json!([{"text": "abcdefghijklmnopqrstuvwxyz", "chunk_size": 1}]),
        json!([{"reasoning": "think hard", "reasoning_chunk_size": 3, "text": "answer here", "chunk_size": 2,
                "usage": {"prompt_tokens": 3, "completion_tokens": 4}}]),
        json!([{"text": "calling", "chunk_size": 3, "tool_calls": [tool]}]),
        json!([{"text": "abcdef", "chunk_size": 1, "fault": {"type": "drop", "after_events": 3}}]),
        json!([{"text": "x", "fault": {"type": "drop", "after_events": 0}}, {"text": "second try", "chunk_size": 2}]),
        json!([{"fault": {"type": "http_error", "status": 503, "message": "busy"}}, {"text": "ok then", "chunk_size": 1}]),
        json!([{"text": "abcd", "chunk_size": 1, "fault": {"type": "in_stream_error", "after_events": 2, "message": "boom", "code": "server_error"}}]),
        json!([{"text": "", "finish_reason": "length"}]),
    ]
    .into_iter()
    .map(|r| json!({"responses": r}))
    .collect()
}

/// The turn reads buffered pieces through `next_ready` and waits in `next`: any mix of the
/// two gives the pieces, the end and the response that `next` alone gives, and a cancel
/// after any piece stops the pieces after it as it did (breaking the token check between
/// buffered pieces fails it).
#[tokio::test]
async fn next_ready_gives_what_next_gives() {
    for script in scripts() {
        let pieces = drive(&script, |_| false, 0).await.pieces.len();
        for cancel_after in 0..=pieces {
            let before = drive(&script, |_| false, cancel_after).await;
            if cancel_after > 0 {
                assert_eq!(before.pieces.len(), cancel_after, "{script}");
            }
            for every in 1..=pieces + 1 {
                for ready in [
                    &(|i: usize| !i.is_multiple_of(every)) as &dyn Fn(usize) -> bool,
                    &|i: usize| i.is_multiple_of(every),
                ] {
                    let now = drive(&script, ready, cancel_after).await;
                    assert_eq!(
                        now, before,
                        "{script} cancel after {cancel_after}, every {every}"
                    );
                }
            }
        }
    }
}

/// `next_ready` gives at most `READY_RUN` pieces in a row, then leaves the step (and its
/// budget charge) to `next`.
#[tokio::test]
async fn a_long_buffered_run_goes_back_to_next() {
    let text = "x".repeat(3 * READY_RUN as usize);
    let script = json!({"responses": [{"text": text, "chunk_size": 1}]});
    let client = LlmClient::new(&LlmConfig::Scripted(script)).unwrap();
    let history = [Message::User("hi".into())];
    let req = ChatRequest {
        system: "s",
        history: &history,
        history_version: MessagesVersion::unknown(),
        transcript_version: MessagesVersion::unknown(),
        transcript: &[],
        tail: None,
        tools: &Arc::default(),
    };
    let mut call = client.start(&req, &CancelToken::new());
    assert!(matches!(
        call.next().await,
        Ok(Some(Piece::Text(StreamedText { text: "x", .. })))
    ));
    for _ in 0..READY_RUN {
        assert!(matches!(
            call.next_ready(),
            Some(Ok(Some(Piece::Text(StreamedText { text: "x", .. }))))
        ));
    }
    assert!(call.next_ready().is_none());
    assert!(matches!(
        call.next().await,
        Ok(Some(Piece::Text(StreamedText { text: "x", .. })))
    ));
    assert!(matches!(
        call.next_ready(),
        Some(Ok(Some(Piece::Text(StreamedText { text: "x", .. }))))
    ));
}
