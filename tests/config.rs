//! The agent config (`AgentConfig::from_json_with_env`): one parse validates every section, and
//! an error names the field path in the same words the layers used when they checked the
//! sections by hand.

use agentao::config::{AgentConfig, Env};
use agentao::permissions::Mode;
use serde_json::{json, Value};

/// No environment fallbacks: every value comes from the document.
struct NoEnv;
impl Env for NoEnv {
    fn var(&self, _: &str) -> Option<String> {
        None
    }
}

fn workspace() -> String {
    std::env::temp_dir().display().to_string()
}

/// A minimal valid config (scripted provider) with `extra`'s members added.
fn doc(extra: Value) -> String {
    let mut v = json!({
        "working_directory": workspace(),
        "llm": {"provider": "scripted", "script": []},
    });
    for (k, x) in extra.as_object().unwrap() {
        v[k] = x.clone();
    }
    v.to_string()
}

fn parse(text: &str) -> Result<AgentConfig, String> {
    AgentConfig::from_json_with_env(text, &NoEnv).map_err(|e| e.0)
}

fn error(extra: Value) -> String {
    match parse(&doc(extra.clone())) {
        Ok(_) => panic!("{extra} was accepted"),
        Err(e) => e,
    }
}

#[test]
fn tool_settings_are_validated_by_the_config_parse() {
    let cases = [
        (json!({"bogus": 1}), "config field `tools.settings.bogus`: unknown setting (known: shell, tool_outputs_dir, web_fetch)"),
        (json!({"shell": 3}), "config field `tools.settings.shell`: must be an object"),
        (json!({"shell": null}), "config field `tools.settings.shell`: must be an object"),
        (json!({"shell": []}), "config field `tools.settings.shell`: must be an object"),
        (json!({"shell": {"timeout_s": -1}}), "config field `tools.settings.shell.timeout_s`: must be a positive number of seconds"),
        (json!({"shell": {"timeout_s": null}}), "config field `tools.settings.shell.timeout_s`: must be a positive number of seconds"),
        (json!({"shell": {"timeout_s": 1e10}}), "config field `tools.settings.shell.timeout_s`: must be a positive number of seconds"),
        (json!({"shell": {"scrub_env": 1}}), "config field `tools.settings.shell.scrub_env`: must be a boolean"),
        (json!({"shell": {"interpreter": "bash"}}), "config field `tools.settings.shell.interpreter`: must be an absolute path"),
        (json!({"shell": {"interpreter": null}}), "config field `tools.settings.shell.interpreter`: must be an absolute path"),
        (json!({"shell": {"x": 1}}), "config field `tools.settings.shell.x`: unknown setting (known: interpreter, scrub_env, timeout_s)"),
        (json!({"web_fetch": []}), "config field `tools.settings.web_fetch`: must be an object"),
        (json!({"web_fetch": {"x": 1}}), "config field `tools.settings.web_fetch.x`: unknown setting (known: allow_private, timeout_s, total_timeout_s)"),
        (json!({"web_fetch": {"allow_private": ["127.0.0.1", "nope"]}}), "config field `tools.settings.web_fetch.allow_private`: 'nope' is not an IP address or CIDR"),
        (json!({"web_fetch": {"allow_private": [1]}}), "config field `tools.settings.web_fetch.allow_private`: must be a list of CIDRs or IP addresses"),
        (json!({"web_fetch": {"allow_private": 3}}), "config field `tools.settings.web_fetch.allow_private`: must be a list of CIDRs or IP addresses"),
        (json!({"web_fetch": {"total_timeout_s": "1"}}), "config field `tools.settings.web_fetch.total_timeout_s`: must be a positive number of seconds"),
        (json!({"tool_outputs_dir": 3}), "config field `tools.settings.tool_outputs_dir`: must be a non-empty path"),
        (json!({"tool_outputs_dir": ""}), "config field `tools.settings.tool_outputs_dir`: must be a non-empty path"),
        (json!({"tool_outputs_dir": null}), "config field `tools.settings.tool_outputs_dir`: must be a non-empty path"),
    ];
    for (settings, want) in cases {
        assert_eq!(error(json!({"tools": {"settings": settings}})), want);
    }
}

#[test]
fn permissions_are_validated_by_the_config_parse() {
    let cases = [
        (json!(3), "config field `permissions`: must be an object"),
        (json!([]), "config field `permissions`: must be an object"),
        (json!({"bogus": 1}), "config field `permissions`: unknown key `bogus` (allowed: mode, rules_file, rules, hardline, web_fetch_domains)"),
        (json!({"mode": "plan"}), "config field `permissions.mode`: 'plan' cannot be set at construction; plan mode is entered through the plan session"),
        (json!({"mode": "root"}), "config field `permissions.mode`: unknown mode 'root' (expected read-only, workspace-write or full-access)"),
        (json!({"mode": 3}), "config field `permissions.mode`: must be a string"),
        (json!({"hardline": "yes"}), "config field `permissions.hardline`: must be a boolean"),
        (json!({"rules_file": 3}), "config field `permissions.rules_file`: must be a string"),
        (json!({"rules": 3}), "config field `permissions.rules`: must be a list of rule objects"),
        (json!({"rules": [{"tool": "x", "action": "allow"}, {"tool": "y", "action": "allow", "foo": 1}]}), "config field `permissions.rules`[1]: unknown key `foo`"),
        (json!({"rules": [{"tool": "x", "action": "deny", "args": {"command": "(?=x)"}}]}), "config field `permissions.rules`[0]: `args.command`: pattern '(?=x)' uses look-around or a back-reference, which this runtime does not support"),
        (json!({"web_fetch_domains": 3}), "config field `permissions.web_fetch_domains`: must be a list of host names"),
        (json!({"web_fetch_domains": ["docs.rs", 3]}), "config field `permissions.web_fetch_domains`[1]: must be a host name such as \"docs.rs\" or \".python.org\""),
        (json!({"web_fetch_domains": ["a b"]}), "config field `permissions.web_fetch_domains`[0]: must be a host name such as \"docs.rs\" or \".python.org\""),
    ];
    for (permissions, want) in cases {
        assert_eq!(error(json!({ "permissions": permissions })), want);
    }
}

#[test]
fn a_section_given_as_a_list_is_refused() {
    // serde reads a struct from a JSON array by position; a config object must be an object.
    let wd = workspace();
    let top = json!([wd, null, null, null, {"provider": "scripted", "script": []}, null, null]);
    assert_eq!(
        parse(&top.to_string()).err().unwrap(),
        "config: must be an object"
    );
    assert_eq!(
        error(json!({"tools": [null]})),
        "config field `tools`: must be an object"
    );
    assert_eq!(
        error(json!({"llm": []})),
        "config field `llm`: must be an object"
    );
    assert_eq!(
        error(json!({"tools": {"settings": []}})),
        "config field `tools.settings`: must be an object"
    );
}

#[test]
fn field_errors_name_the_path_without_a_json_position() {
    // The path names the field; docs/config.md shows this form.
    assert_eq!(
        error(json!({"llm": {"max_tokens": "x"}})),
        "config field `llm.max_tokens`: invalid type: string \"x\", expected u32"
    );
    assert_eq!(
        error(json!({"tools": {"enabled": [1]}})),
        "config field `tools.enabled[0]`: invalid type: integer `1`, expected a string"
    );
    // Unknown keys outside the sections with their own words keep serde's words.
    assert!(error(json!({"bogus": 1})).starts_with(
        "config field `bogus`: unknown field `bogus`, expected one of `working_directory`"
    ));
    assert!(error(json!({"tools": {"bogus": 1}}))
        .starts_with("config field `tools.bogus`: unknown field `bogus`, expected one of"));
    // A document that is not JSON keeps its position: there is no field to name.
    let e = AgentConfig::from_json_with_env("{\"working_directory\": ", &NoEnv).unwrap_err();
    assert!(e.0.contains("line 1 column"), "{}", e.0);
}

#[test]
fn accepted_sections_are_typed() {
    let c = parse(&doc(json!({
        "tools": {"settings": {
            "shell": {"timeout_s": 5, "scrub_env": false, "interpreter": "/bin/sh"},
            "web_fetch": {"allow_private": "10.0.0.0/8 127.0.0.1", "timeout_s": 3, "total_timeout_s": 9},
            "tool_outputs_dir": "out"
        }},
        "permissions": {"mode": "read-only", "hardline": false, "rules": [{"tool": "x", "action": "deny"}],
                        "web_fetch_domains": ["Docs.rs", ".python.org"]}
    })))
    .unwrap();
    let s = &c.tools.settings;
    assert_eq!(s.shell.timeout_s, 5.0);
    assert!(!s.shell.scrub_env);
    assert_eq!(s.shell.interpreter.as_deref(), Some("/bin/sh".as_ref()));
    assert_eq!(s.web_fetch.allow_private.len(), 2);
    assert_eq!(s.web_fetch.timeout_s, Some(3.0));
    assert_eq!(s.web_fetch.total_timeout_s, Some(9.0));
    assert_eq!(s.tool_outputs_dir.as_deref(), Some("out"));
    let p = c.permissions.as_ref().unwrap();
    assert_eq!(p.mode, Some(Mode::ReadOnly));
    assert_eq!(p.hardline, Some(false));
    assert_eq!(p.rules.as_ref().map(Vec::len), Some(1));
    assert_eq!(
        p.web_fetch_domains.as_deref(),
        Some(&["docs.rs".to_owned(), ".python.org".to_owned()][..])
    );

    // Every key may be null: the default.
    let c = parse(&doc(
        json!({"permissions": {"mode": null, "hardline": null, "rules": null,
        "rules_file": null, "web_fetch_domains": null}}),
    ))
    .unwrap();
    let p = c.permissions.unwrap();
    assert_eq!(
        (
            p.mode,
            p.hardline,
            p.rules.is_none(),
            p.rules_file,
            p.web_fetch_domains
        ),
        (None, None, true, None, None)
    );
    assert!(parse(&doc(json!({"permissions": null})))
        .unwrap()
        .permissions
        .is_none());
}

#[test]
fn a_repeated_key_is_refused() {
    // A JSON object with the same key twice: the last one used to win silently inside
    // `permissions` and `tools.settings`.
    let wd = workspace();
    let llm = r#""llm": {"provider": "scripted", "script": []}"#;
    for (section, want) in [
        (
            r#""permissions": {"mode": "full-access", "mode": "read-only"}"#,
            "config field `permissions`: duplicate field `mode`",
        ),
        (
            r#""tools": {"settings": {"shell": {"timeout_s": 1, "timeout_s": 2}}}"#,
            "config field `tools.settings.shell`: duplicate field `timeout_s`",
        ),
    ] {
        let text = format!(r#"{{"working_directory": "{wd}", {llm}, {section}}}"#);
        assert_eq!(parse(&text).err().as_deref(), Some(want), "{section}");
    }
}

/// Text after the document is malformed JSON, as it was before the sections were typed (found by
/// the config fuzz target: an extra closing brace was accepted).
#[test]
fn trailing_characters_after_the_document_are_refused_as_json() {
    let text = format!("{}}}", doc(json!({})));
    let e = AgentConfig::from_json_with_env(&text, &NoEnv).expect_err("trailing brace accepted");
    assert_eq!(e.1, agentao::config::ConfigErrorKind::Json, "{}", e.0);
    assert!(e.0.contains("trailing characters"), "{}", e.0);
}

#[test]
fn a_script_too_big_to_expand_is_refused_not_an_abort() {
    // `repeat` and `repeat_text.count` are expanded when the agent is made: a count no memory
    // holds aborted the process (an allocation failure) instead of failing the config.
    for script in [
        json!({"responses": [{"repeat_text": {"unit": "x", "count": 100_000_000_000u64}}]}),
        json!({"responses": [{"repeat_text": {"unit": "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", "count": 4_000_000}}]}),
        json!({"responses": [{"repeat": 4_000_000_000u64, "text": "x"}]}),
        json!({"responses": [], "exhausted": {"repeat_text": {"unit": "x", "count": 100_000_000_000u64}}}),
    ] {
        let config = json!({
            "working_directory": workspace(),
            "llm": {"provider": "scripted", "script": script},
        });
        let err = agentao::agent::Agent::new(&config.to_string(), None)
            .err()
            .unwrap_or_else(|| panic!("{script} was accepted"))
            .to_string();
        assert!(err.contains("at most"), "{script}: {err}");
    }
    // What the benchmarks and tests use still works.
    let config = json!({
        "working_directory": workspace(),
        "llm": {"provider": "scripted", "script": {"responses": [
            {"repeat": 1000, "text": "step {i}"},
            {"repeat_text": {"unit": "word ", "count": 200_000}},
        ]}},
    });
    assert!(agentao::agent::Agent::new(&config.to_string(), None).is_ok());
}

/// Found by the `config` fuzz target: `…/e /` lost its `/` and kept the space before it, which
/// the next parse trimmed, so the config read back differently from how it was rendered. The
/// URL's end is trimmed of slashes and blanks together, so one parse is the last word.
#[test]
fn a_base_url_ending_in_blanks_and_slashes_reads_back_the_same() {
    for url in [
        "http://127.0.0.1:1/v1 /",
        "http://127.0.0.1:1/v1/ / ",
        "http://127.0.0.1:1/v1//",
    ] {
        let once = parse(&doc(
            json!({"llm": {"provider": "openai", "base_url": url, "api_key": "k", "model": "m"}}),
        ))
        .unwrap();
        let debug = format!("{once:?}");
        assert!(
            debug.contains(r#"base_url: "http://127.0.0.1:1/v1","#),
            "{url:?}: {debug}"
        );
    }
}

/// Found by the `config` fuzz target: `http://` alone was accepted and, its slashes trimmed,
/// became the base URL `http:`. A base URL needs something after its scheme.
#[test]
fn a_base_url_that_is_only_a_scheme_is_refused() {
    for url in ["http://", "https:///", "http:// /"] {
        let e = parse(&doc(
            json!({"llm": {"provider": "openai", "base_url": url, "api_key": "k", "model": "m"}}),
        ))
        .expect_err(url);
        assert!(e.contains("is not an http(s) URL"), "{url:?}: {e}");
    }
}
