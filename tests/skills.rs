//! Skills (spec §8.3, §1.15; docs/skills.md) through the Rust API: discovery in each location,
//! front matter variants, bounds and hostile files (the host's report says what was skipped and
//! why), the catalogue in the system prompt the model receives, `activate_skill`'s result, an
//! unknown skill, and what a sub-agent sees. The model is the loopback mock, so the request
//! bodies are the ones on the wire.

use std::path::Path;

use agentao::agent::{Agent, TurnOptions};
use mock_openai::MockServer;
use serde_json::{json, Value};

mod common;

/// A skill directory `<root>/<dir>/SKILL.md` holding `text`.
fn write_skill(root: &Path, dir: &str, text: impl AsRef<[u8]>) {
    let d = root.join(dir);
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join("SKILL.md"), text).unwrap();
}

fn skill_md(name: &str, description: &str, body: &str) -> String {
    format!("---\nname: {name}\ndescription: {description}\n---\n{body}")
}

struct Run {
    agent: Agent,
    host: std::sync::Arc<common::RecordingHost>,
    server: MockServer,
    dir: tempfile::TempDir,
    _home: tempfile::TempDir,
}

/// An agent on the mock with `responses`, a workspace, a user skill directory of its own
/// (never the real home), and `skills` merged into the section.
fn setup_with(
    responses: Value,
    skills: Value,
    extra: Value,
    seed: impl FnOnce(&Path, &Path),
) -> Run {
    let server = MockServer::start(json!({ "responses": responses })).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    seed(dir.path(), home.path());
    let mut section = json!({"user_directory": home.path()});
    for (k, v) in skills.as_object().unwrap() {
        section[k] = v.clone();
    }
    let mut config = json!({"working_directory": dir.path(),
        "llm": {"provider": "openai", "base_url": server.base_url(), "api_key": "k", "model": "m"},
        "skills": section});
    for (k, v) in extra.as_object().unwrap() {
        config[k] = v.clone();
    }
    let host = std::sync::Arc::new(common::RecordingHost {
        deny: true,
        ..Default::default()
    });
    let agent = Agent::new(&config.to_string(), Some(host.clone())).unwrap();
    Run {
        agent,
        host,
        server,
        dir,
        _home: home,
    }
}

fn setup(responses: Value, seed: impl FnOnce(&Path, &Path)) -> Run {
    setup_with(responses, json!({}), json!({}), seed)
}

fn report(run: &Run) -> Value {
    serde_json::from_str(&run.agent.skills_json()).unwrap()
}

fn names(report: &Value) -> Vec<String> {
    report["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap().to_owned())
        .collect()
}

/// The skipped entries' kinds, by file name (the skill's directory).
fn skipped(report: &Value) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = report["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let path = s["path"].as_str().unwrap_or("");
            let dir = Path::new(path)
                .parent()
                .and_then(|p| p.file_name())
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            (dir, s["kind"].as_str().unwrap().to_owned())
        })
        .collect();
    out.sort();
    out
}

fn system_prompt(request: &Value) -> &str {
    assert_eq!(request["messages"][0]["role"], "system");
    request["messages"][0]["content"].as_str().unwrap()
}

fn tool_names(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .map(|t| {
            t.iter()
                .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

fn activate(id: &str, name: &str, task: &str) -> Value {
    json!({"tool_calls": [{"id": id, "name": "activate_skill",
        "arguments": {"skill_name": name, "task_description": task}}]})
}

fn chat(run: &Run, message: &str) {
    run.agent
        .run_blocking(message, TurnOptions::default())
        .unwrap();
}

#[test]
fn every_location_is_read_and_a_later_one_wins_a_name() {
    let extra_dir = tempfile::tempdir().unwrap();
    write_skill(
        extra_dir.path(),
        "ops",
        skill_md("ops", "From the host's directory.", "ops body"),
    );
    write_skill(
        extra_dir.path(),
        "shared",
        skill_md("shared", "From the host's directory.", "x"),
    );
    let run = setup_with(
        json!([{"text": "ok"}]),
        json!({"directories": [extra_dir.path()],
            "inline": [{"name": "inline-one", "description": "From the config.",
                "instructions": "# Inline\nDo it inline."}]}),
        json!({}),
        |ws, home| {
            write_skill(
                home,
                "user-skill",
                skill_md("user-skill", "From home.", "u"),
            );
            write_skill(home, "shared", skill_md("shared", "From home.", "x"));
            let dot = ws.join(".agentao/skills");
            write_skill(
                &dot,
                "ws-skill",
                skill_md("ws-skill", "From .agentao.", "w"),
            );
            write_skill(&dot, "shared", skill_md("shared", "From .agentao.", "x"));
            let repo = ws.join("skills");
            write_skill(
                &repo,
                "repo-skill",
                skill_md("repo-skill", "From skills/.", "r"),
            );
            write_skill(&repo, "shared", skill_md("shared", "From skills/.", "x"));
            // Not skills: a file beside them, a directory without SKILL.md, a hidden one.
            std::fs::write(repo.join("README.md"), "no").unwrap();
            std::fs::create_dir_all(repo.join("empty")).unwrap();
            write_skill(&repo, ".hidden", skill_md("hidden", "Hidden.", "h"));
        },
    );
    let r = report(&run);
    assert_eq!(r["enabled"], true);
    assert_eq!(
        names(&r),
        [
            "inline-one",
            "ops",
            "repo-skill",
            "shared",
            "user-skill",
            "ws-skill"
        ]
    );
    let by_name = |n: &str| {
        r["skills"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == n)
            .unwrap()
            .clone()
    };
    assert_eq!(
        by_name("shared")["description"],
        "From the host's directory."
    );
    assert_eq!(by_name("shared")["origin"], "configured");
    assert_eq!(by_name("user-skill")["origin"], "user");
    assert_eq!(by_name("ws-skill")["origin"], "workspace");
    assert_eq!(by_name("repo-skill")["origin"], "repository");
    assert_eq!(by_name("inline-one")["origin"], "inline");
    assert_eq!(by_name("inline-one")["path"], Value::Null);
    // Three earlier `shared` were replaced, each reported.
    let shadowed = r["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["kind"] == "shadowed")
        .count();
    assert_eq!(shadowed, 3, "{r}");

    chat(&run, "Hi.");
    // The block ends the prompt, without a newline of its own.
    let prompt = format!("{}\n", system_prompt(&run.server.requests()[0]));
    assert!(prompt.contains("=== Available Skills ==="), "{prompt}");
    for line in [
        "- inline-one: From the config.\n",
        "- ops: From the host's directory.\n",
        "- shared: From the host's directory.\n",
        "- user-skill: From home.\n",
        "- ws-skill: From .agentao.\n",
    ] {
        assert!(prompt.contains(line), "{line:?} in {prompt}");
    }
    assert!(prompt.contains("- repo-skill: From skills/.\n"));
    assert!(
        !prompt.contains("- shared: From skills/.") && !prompt.contains("- shared: From home.")
    );
    assert!(!prompt.contains("Hidden."));
}

#[test]
fn the_catalogue_and_the_tool_reach_the_model_and_activation_loads_the_instructions() {
    let run = setup(
        json!([activate("c1", "pdf", "fill the form"), {"text": "Filled."}]),
        |ws, _| {
            write_skill(
                &ws.join("skills"),
                "pdf",
                skill_md(
                    "pdf",
                    "Fill and read PDF forms.",
                    "# PDF Forms\n\nRun scripts/fill.py with the field values.\n",
                ),
            );
            write_skill(
                &ws.join("skills"),
                "bare",
                "# Bare\nNo front matter at all.\n",
            );
        },
    );
    chat(&run, "Fill it.");
    let requests = run.server.requests();
    assert_eq!(requests.len(), 2);
    let prompt = system_prompt(&requests[0]);
    // The catalogue comes after our own prompt, one line per described skill.
    assert!(prompt.starts_with("You are an agent embedded in a host application."));
    let at = prompt.find("\n\n=== Available Skills ===\n").unwrap();
    assert!(
        prompt[at..].ends_with("\n- pdf: Fill and read PDF forms."),
        "{prompt}"
    );
    // A skill without a description is activatable but not listed.
    assert!(!prompt.contains("- bare"));
    // The tool: the reference's schema, its names as an enum.
    let tool = requests[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "activate_skill")
        .expect("activate_skill offered")
        .clone();
    assert_eq!(
        tool["function"]["parameters"],
        json!({"type": "object", "properties": {
            "skill_name": {"type": "string", "enum": ["bare", "pdf"],
                "description": "Name of the skill to activate"},
            "task_description": {"type": "string",
                "description": "The task that you will do with this skill."}},
            "required": ["skill_name", "task_description"]})
    );
    // The prompt is the same on the next request (cache-stable).
    assert_eq!(system_prompt(&requests[1]), prompt);

    let results = common::tool_results(&run.agent);
    let result = &results[0];
    let skill_dir = std::fs::canonicalize(run.dir.path().join("skills/pdf")).unwrap();
    let expected_head = format!(
        "\nSkill Activated: pdf\nTitle: PDF Forms\nDescription: Fill and read PDF forms....\n\
         Task: fill the form\nDocumentation: {}\nSkill directory: {}\n",
        skill_dir.join("SKILL.md").display(),
        skill_dir.display()
    );
    assert!(result.starts_with(&expected_head), "{result}");
    assert!(
        result.contains("=== Skill Instructions ===\n# PDF Forms\n\nRun scripts/fill.py"),
        "{result}"
    );
    assert!(result.ends_with("The skill is now active. Follow its instructions for this task."));
    // The model's next request carries it as the tool's result.
    let tool_msg = requests[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap();
    assert_eq!(tool_msg["content"].as_str().unwrap(), result);
}

#[test]
fn an_unknown_skill_names_the_available_ones() {
    let run = setup(
        json!([activate("c1", "nope", "x"), {"text": "ok"}]),
        |ws, _| {
            write_skill(&ws.join("skills"), "b", skill_md("b", "B.", "b"));
            write_skill(&ws.join("skills"), "a", skill_md("a", "A.", "a"));
        },
    );
    chat(&run, "Go.");
    assert_eq!(
        common::tool_results(&run.agent),
        ["Error: Unknown skill 'nope'. Available skills: a, b"]
    );
}

#[test]
fn an_inline_skill_activates_without_a_file() {
    let run = setup_with(
        json!([activate("c1", "release", "cut 1.2"), {"text": "ok"}]),
        json!({"discover": false, "inline": [{"name": "release", "description": "Cut a release.",
            "when_to_use": "the user asks for a release",
            "instructions": "# Release\nTag, build, publish."}]}),
        json!({}),
        |_, _| {},
    );
    chat(&run, "Release.");
    let prompt = system_prompt(&run.server.requests()[0]).to_owned();
    assert!(
        prompt.contains("- release: Cut a release.\n  Use when: the user asks for a release"),
        "{prompt}"
    );
    let result = &common::tool_results(&run.agent)[0];
    assert!(
        result.starts_with(
            "\nSkill Activated: release\nTitle: Release\nDescription: Cut a release....\n\
             Task: cut 1.2\nDocumentation: N/A\n\n=== Skill Instructions ===\n# Release\nTag, build, publish."
        ),
        "{result}"
    );
}

#[test]
fn front_matter_as_users_write_it_is_accepted() {
    let run = setup(json!([{"text": "ok"}]), |ws, _| {
        let s = ws.join("skills");
        write_skill(
            &s,
            "folded",
            "---\nname: folded\ndescription: >\n  Spans two\n  lines.\nlicense: Apache-2.0\n\
             allowed-tools: [Read, Grep]\nmetadata:\n  author: someone\n  version: \"1.0\"\n---\nbody",
        );
        write_skill(
            &s,
            "crlf",
            "\u{feff}---\r\nname: \"crlf\"\r\ndescription: 'Windows file.'\r\n---\r\nbody\r\n",
        );
        // No `name`: the directory names it.
        write_skill(
            &s,
            "dir-named",
            "---\ndescription: Named by its folder.\n---\nb",
        );
        write_skill(
            &s,
            "multi",
            "---\nname: multi\ndescription: |\n  Line one.\n  Line two.\nwhen-to-use: When asked.\n---\nb",
        );
    });
    let r = report(&run);
    assert_eq!(names(&r), ["crlf", "dir-named", "folded", "multi"], "{r}");
    assert_eq!(r["skipped"], json!([]));
    chat(&run, "Hi.");
    let prompt = format!("{}\n", system_prompt(&run.server.requests()[0]));
    for line in [
        "- folded: Spans two lines.\n",
        "- crlf: Windows file.\n",
        "- dir-named: Named by its folder.\n",
        // A description's line breaks cannot start lines of their own.
        "- multi: Line one. Line two.\n  Use when: When asked.",
    ] {
        assert!(prompt.contains(line), "{line:?} in {prompt}");
    }
}

#[test]
fn hostile_and_oversized_files_are_skipped_with_the_reason() {
    let outside = tempfile::tempdir().unwrap();
    write_skill(outside.path(), "evil", skill_md("evil", "Outside.", "x"));
    let outside_path = outside.path().to_path_buf();
    let run = setup(json!([{"text": "ok"}]), move |ws, _| {
        let s = ws.join("skills");
        write_skill(&s, "good", skill_md("good", "Fine.", "x"));
        write_skill(
            &s,
            "huge",
            skill_md("huge", "Too big.", &"x".repeat(256 * 1024)),
        );
        write_skill(
            &s,
            "latin1",
            b"---\nname: latin1\ndescription: caf\xe9\n---\n",
        );
        write_skill(&s, "unclosed", "---\nname: unclosed\ndescription: x\n");
        write_skill(&s, "badyaml", "---\nname: \"open\ndescription: x\n---\n");
        write_skill(&s, "listname", "---\nname: [a, b]\n---\n");
        write_skill(&s, "longname", skill_md(&"n".repeat(65), "Long.", "x"));
        // A billion-laughs front matter: aliases are refused, never expanded.
        let mut bomb = String::from("---\na0: &a0 [x, x, x, x, x, x, x, x, x]\n");
        for i in 1..9 {
            let refs = vec![format!("*a{}", i - 1); 9].join(", ");
            bomb.push_str(&format!("a{i}: &a{i} [{refs}]\n"));
        }
        bomb.push_str("name: bomb\ndescription: boom\n---\n");
        write_skill(&s, "bomb", bomb);
        // A link out of the workspace, at the skill's directory and at its file.
        std::os::unix::fs::symlink(outside_path.join("evil"), s.join("linked-dir")).unwrap();
        std::fs::create_dir_all(s.join("linked-file")).unwrap();
        std::os::unix::fs::symlink(
            outside_path.join("evil/SKILL.md"),
            s.join("linked-file/SKILL.md"),
        )
        .unwrap();
    });
    let r = report(&run);
    assert_eq!(names(&r), ["good"], "{r}");
    assert_eq!(
        skipped(&r),
        [
            ("badyaml".to_owned(), "front_matter".to_owned()),
            ("bomb".to_owned(), "front_matter".to_owned()),
            ("huge".to_owned(), "too_large".to_owned()),
            ("latin1".to_owned(), "not_utf8".to_owned()),
            ("linked-dir".to_owned(), "outside_location".to_owned()),
            ("linked-file".to_owned(), "outside_location".to_owned()),
            ("listname".to_owned(), "front_matter".to_owned()),
            ("longname".to_owned(), "name".to_owned()),
            ("unclosed".to_owned(), "front_matter".to_owned()),
        ]
    );
    let reasons = r["skipped"].to_string();
    assert!(reasons.contains("alias"), "{reasons}");
    assert!(reasons.contains("not closed"), "{reasons}");
    chat(&run, "Hi.");
    let prompt = system_prompt(&run.server.requests()[0]).to_owned();
    assert!(!prompt.contains("Outside.") && !prompt.contains("boom"));
}

#[test]
fn the_number_of_skills_and_the_catalogue_are_bounded() {
    let run = setup(json!([{"text": "ok"}]), |ws, _| {
        let s = ws.join("skills");
        for i in 0..140 {
            let name = format!("skill-{i:03}");
            write_skill(&s, &name, skill_md(&name, &"d".repeat(900), "x"));
        }
    });
    let r = report(&run);
    assert_eq!(names(&r).len(), 128);
    let over = r["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["kind"] == "over_limit")
        .count();
    assert_eq!(over, 12);
    assert!(r["prompt_chars"].as_u64().unwrap() <= 16 * 1024, "{r}");
    chat(&run, "Hi.");
    let request = &run.server.requests()[0];
    let prompt = system_prompt(request);
    assert!(
        prompt.contains("more skills are not listed here; activate_skill accepts every name"),
        "{prompt}"
    );
    // Every name is still in the tool's enum.
    let tool = request["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "activate_skill")
        .unwrap();
    let e = &tool["function"]["parameters"]["properties"]["skill_name"]["enum"];
    assert_eq!(e.as_array().unwrap().len(), 128);
}

#[test]
fn without_skills_nothing_is_read_or_offered() {
    for section in [None, Some(json!({"enabled": false})), Some(json!({}))] {
        let server = MockServer::start(json!({"responses": [{"text": "ok"}]})).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let home = tempfile::tempdir().unwrap();
        write_skill(&dir.path().join("skills"), "x", skill_md("x", "X.", "x"));
        let mut config = json!({"working_directory": dir.path(),
            "llm": {"provider": "openai", "base_url": server.base_url(), "api_key": "k",
                "model": "m"}});
        if let Some(mut s) = section.clone() {
            s["user_directory"] = json!(home.path());
            // `{}` discovers, but this workspace's only skill is the one above: take it away.
            if s.get("enabled").is_none() {
                std::fs::remove_dir_all(dir.path().join("skills")).unwrap();
            }
            config["skills"] = s;
        }
        let agent = Agent::new(&config.to_string(), None).unwrap();
        agent.run_blocking("Hi.", TurnOptions::default()).unwrap();
        let request = &server.requests()[0];
        assert!(
            !tool_names(request).iter().any(|n| n == "activate_skill"),
            "{section:?}"
        );
        assert!(!system_prompt(request).contains("Available Skills"));
        let r: Value = serde_json::from_str(&agent.skills_json()).unwrap();
        assert_eq!(r["skills"], json!([]), "{section:?}");
        assert_eq!(
            r["enabled"],
            section.is_some_and(|s| s.get("enabled").is_none())
        );
    }
}

#[test]
fn a_disabled_tool_hides_the_catalogue_too() {
    let run = setup_with(
        json!([{"text": "ok"}]),
        json!({}),
        json!({"tools": {"disabled": ["activate_skill"]}}),
        |ws, _| write_skill(&ws.join("skills"), "x", skill_md("x", "X.", "x")),
    );
    chat(&run, "Hi.");
    let request = &run.server.requests()[0];
    assert!(!tool_names(request).iter().any(|n| n == "activate_skill"));
    assert!(!system_prompt(request).contains("Available Skills"));
}

#[test]
fn bad_skills_config_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    for (skills, words) in [
        (json!([]), "config field `skills`: must be an object"),
        (json!({"bogus": 1}), "unknown field `bogus`"),
        (
            json!({"inline": [{"name": "", "instructions": "x"}]}),
            "config field `skills.inline[0]`: `name` must not be empty",
        ),
        (
            json!({"inline": [{"name": "a\nb", "instructions": "x"}]}),
            "control characters",
        ),
        (
            json!({"inline": [{"name": "a"}]}),
            "missing field `instructions`",
        ),
        (
            json!({"inline": [{"name": "a", "instructions": "x".repeat(256 * 1024 + 1)}]}),
            "longer than 262144 bytes",
        ),
        (
            json!({"directories": [""]}),
            "config field `skills.directories[0]`: must not be empty",
        ),
    ] {
        let config = json!({"working_directory": dir.path(),
            "llm": {"provider": "scripted", "script": {"responses": []}}, "skills": skills});
        let err = Agent::new(&config.to_string(), None)
            .err()
            .expect("refused");
        assert!(err.to_string().contains(words), "{skills}: {err}");
    }
}

#[test]
fn a_file_that_changed_after_discovery_is_read_with_the_same_bounds() {
    let run = setup(
        json!([activate("c1", "grow", "t"), activate("c2", "swap", "t"), {"text": "ok"}]),
        |ws, _| {
            let s = ws.join("skills");
            write_skill(&s, "grow", skill_md("grow", "Grows.", "x"));
            write_skill(&s, "swap", skill_md("swap", "Swapped.", "x"));
        },
    );
    // Found before the turn; then one file grows past the bound, one becomes a link out.
    assert_eq!(names(&report(&run)), ["grow", "swap"]);
    let s = run.dir.path().join("skills");
    std::fs::write(
        s.join("grow/SKILL.md"),
        skill_md("grow", "Grows.", &"y".repeat(300 * 1024)),
    )
    .unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(
        outside.path().join("SKILL.md"),
        skill_md("swap", "S.", "stolen"),
    )
    .unwrap();
    std::fs::remove_file(s.join("swap/SKILL.md")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("SKILL.md"), s.join("swap/SKILL.md")).unwrap();
    chat(&run, "Go.");
    let results = common::tool_results(&run.agent);
    assert!(
        results[0].starts_with("Error activating skill: the file has 307"),
        "{}",
        results[0]
    );
    assert!(
        results[1].starts_with("Error activating skill: ")
            && results[1].contains("now resolves to"),
        "{}",
        results[1]
    );
    assert!(!results[1].contains("stolen"));
}

#[test]
fn a_sub_agent_sees_the_parents_skills_when_its_tools_allow() {
    let run = setup_with(
        json!([
            {"tool_calls": [{"id": "s1", "name": "agent_helper", "arguments": {"task": "use a skill"}}]},
            activate("k1", "pdf", "child task"),
            {"text": "child done"},
            {"tool_calls": [{"id": "s2", "name": "agent_reader", "arguments": {"task": "read"}}]},
            {"text": "reader done"},
            {"text": "all done"}
        ]),
        json!({}),
        json!({"subagents": {"definitions": [
            {"name": "helper", "description": "helps"},
            {"name": "reader", "description": "reads", "tools": ["read_file"]}]}}),
        |ws, _| {
            write_skill(
                &ws.join("skills"),
                "pdf",
                skill_md("pdf", "PDF forms.", "# PDF\nchild instructions"),
            )
        },
    );
    chat(&run, "Delegate.");
    let requests = run.server.requests();
    assert_eq!(requests.len(), 6, "{requests:#?}");
    // The helper (every parent tool) is offered the skill and shown the catalogue.
    let helper = &requests[1];
    assert!(tool_names(helper).iter().any(|n| n == "activate_skill"));
    assert!(system_prompt(helper).contains("- pdf: PDF forms."));
    // Its activation ran in the child: the instructions are in the child's next request.
    let child_tool = requests[2]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap();
    assert!(child_tool["content"]
        .as_str()
        .unwrap()
        .contains("\nSkill Activated: pdf\n"));
    assert!(child_tool["content"]
        .as_str()
        .unwrap()
        .contains("child instructions"));
    // The reader's tools leave the skill out, and its prompt has no catalogue.
    let reader = &requests[4];
    assert!(!tool_names(reader).iter().any(|n| n == "activate_skill"));
    assert!(!system_prompt(reader).contains("Available Skills"));
}

#[test]
fn activation_is_read_only_and_never_asks() {
    for mode in ["read-only", "workspace-write"] {
        let run = setup_with(
            json!([activate("c1", "pdf", "t"), {"text": "ok"}]),
            json!({}),
            json!({"permissions": {"mode": mode}}),
            |ws, _| write_skill(&ws.join("skills"), "pdf", skill_md("pdf", "P.", "body")),
        );
        chat(&run, "Go.");
        let result = &common::tool_results(&run.agent)[0];
        assert!(
            result.starts_with("\nSkill Activated: pdf\n"),
            "{mode}: {result}"
        );
        // The host denies every confirmation: none was asked.
        assert!(run.host.confirms.lock().unwrap().is_empty(), "{mode}");
    }
}

#[test]
fn the_context_estimate_counts_the_catalogue() {
    let estimate = |extra: Value| {
        let run = setup_with(json!([{"text": "ok"}]), json!({}), extra, |ws, _| {
            write_skill(
                &ws.join("skills"),
                "big",
                skill_md("big", &"word ".repeat(200), "x"),
            )
        });
        chat(&run, "Hi.");
        let usage: Value = serde_json::from_str(&run.agent.context_usage_json()).unwrap();
        usage["estimated_tokens"].as_u64().unwrap()
    };
    let with = estimate(json!({}));
    let without = estimate(json!({"tools": {"disabled": ["activate_skill"]}}));
    // 200 words of description (~1,000 characters, ~250 tokens) and the catalogue's framing.
    assert!(with > without + 250, "{with} vs {without}");
}
