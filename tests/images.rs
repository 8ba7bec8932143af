//! Images with a message: sent as data-URL parts, kept in history, refused when bad, and
//! removed (one retry) when the model does not take images.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use agentao::agent::{Agent, AgentError, TurnOptions};
use agentao::llm::image::ImageInput;
use agentao::turn::TurnStatus;
use mock_openai::{MockServer, SessionModel};
use serde_json::{json, Value};

#[derive(Default)]
struct Recorder {
    removed: Mutex<Vec<Value>>,
}

impl agentao::events::transport::Transport for Recorder {
    fn emit(&self, event: &str) {
        if event.contains("\"type\":\"images_removed\"") {
            self.removed
                .lock()
                .unwrap()
                .push(serde_json::from_str(event).unwrap());
        }
    }
}

fn png() -> ImageInput {
    ImageInput {
        mime_type: "image/png".into(),
        data: vec![0x89, b'P', b'N', b'G', 1, 2, 3],
    }
}

fn setup(model: SessionModel) -> (Agent, Arc<Recorder>, MockServer, tempfile::TempDir) {
    let mock = MockServer::builder()
        .record_bodies(true)
        .start_session(SessionModel {
            tool: "no_such_tool".into(),
            ..model
        })
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = json!({"working_directory": dir.path(),
        "llm": {"provider": "openai", "base_url": mock.base_url(), "api_key": "t", "model": "m",
                "retry_backoff_base_ms": 1, "retry_backoff_cap_ms": 5}});
    let rec = Arc::new(Recorder::default());
    let agent = Agent::new(&config.to_string(), Some(rec.clone())).unwrap();
    (agent, rec, mock, dir)
}

fn with_images(images: Vec<ImageInput>) -> TurnOptions {
    TurnOptions {
        images,
        ..TurnOptions::default()
    }
}

#[test]
fn an_image_is_sent_as_a_data_url_part_and_round_trips_through_history() {
    let (agent, _rec, mock, _dir) = setup(SessionModel::default());
    let o = agent
        .run_blocking("what is in it", with_images(vec![png()]))
        .unwrap();
    assert_eq!(o.status, TurnStatus::Ok);
    let first = &mock.requests()[0];
    let user = &first["messages"][1];
    assert_eq!(user["role"], "user");
    assert!(user["content"][0]["text"]
        .as_str()
        .unwrap()
        .ends_with("what is in it"));
    assert_eq!(
        user["content"][1],
        json!({"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORwECAw=="}})
    );
    let h = agent.history_json();
    let parsed: Vec<Value> = serde_json::from_str(&h).unwrap();
    assert_eq!(parsed[0], *user);
    agent.set_history_json(&h).unwrap();
    assert_eq!(agent.history_json(), h);
}

#[test]
fn a_model_that_refuses_images_gets_them_replaced_and_one_retry() {
    let (agent, rec, mock, _dir) = setup(SessionModel {
        reject_images: true,
        ..SessionModel::default()
    });
    // An image from an earlier turn, and one with this turn's message.
    let earlier = json!([
        {"role": "user", "content": [{"type": "text", "text": "before"},
            {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,AAAA"}}]},
        {"role": "assistant", "content": "seen"}
    ]);
    agent.set_history_json(&earlier.to_string()).unwrap();
    let o = agent
        .run_blocking("and this one", with_images(vec![png()]))
        .unwrap();
    assert_eq!(o.status, TurnStatus::Ok, "{}", o.text);
    assert_eq!(
        mock.session_stats().image_rejections.load(Ordering::SeqCst),
        1
    );
    let removed = rec.removed.lock().unwrap().clone();
    assert_eq!(removed.len(), 1);
    assert_eq!(
        removed[0]["data"],
        json!({"reason": "provider_rejected", "images_removed": 2, "message_indices": [0, 2]})
    );
    let h: Vec<Value> = serde_json::from_str(&agent.history_json()).unwrap();
    assert_eq!(
        h[0]["content"],
        "before\n[An image was removed from this message: the model does not accept image input.]"
    );
    let now = h[2]["content"].as_str().unwrap();
    assert!(
        now.ends_with("and this one\n<attachment uri=\"inline:image-0\" mimetype=\"image/png\"/>"),
        "{now}"
    );
    // The retry carried no image.
    let retry = mock.raw_requests()[1].clone();
    assert!(!String::from_utf8_lossy(&retry).contains("image_url"));
}

#[test]
fn bad_images_are_refused_before_anything_is_sent() {
    let (agent, _rec, mock, _dir) = setup(SessionModel::default());
    let bad = [
        (
            vec![ImageInput {
                mime_type: "image/png".into(),
                data: vec![],
            }],
            "images[0]: the image is empty",
        ),
        (
            vec![ImageInput {
                mime_type: "text/html".into(),
                data: vec![1],
            }],
            "images[0]: MIME type 'text/html' is not accepted",
        ),
        (
            vec![
                png(),
                ImageInput {
                    mime_type: "image/png".into(),
                    data: vec![0; 50 * 1024 * 1024],
                },
            ],
            "images[1]: 52428800 bytes, over the limit",
        ),
        (vec![png(); 17], "images: 17 images, at most 16"),
    ];
    for (images, want) in bad {
        match agent.run_blocking("look", with_images(images)) {
            Err((AgentError::InvalidArgument(m), None)) => assert!(m.starts_with(want), "{m}"),
            other => panic!("{:?}", other.map(|o| o.text)),
        }
    }
    assert_eq!(mock.request_count(), 0);
    assert_eq!(agent.history_json(), "[]");
}
