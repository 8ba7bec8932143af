#!/usr/bin/env python3
"""Record what the reference runtime (agentao 0.5.17) does at each lifecycle-hook point that
libagentao also supports, by driving its hook layer directly: its hooks parser reads a
Claude Code `hooks` block, its payload adapter builds the event, its dispatcher runs the real
hook script hook.py, and the reference's own helpers turn the result into what the model
reads. No model is involved.

Writes reference.json beside this file. Run it with `tests/conformance/hooks/record.sh`, which
installs agentao==0.5.17 from PyPI into a venv under build/ first.
"""
import dataclasses
import importlib.metadata
import json
import pathlib
import sys
import tempfile

from agentao.plugins.hooks import ClaudeHookPayloadAdapter, ClaudeHooksParser, PluginHookDispatcher
from agentao.runtime import tool_executor
from agentao.runtime.tool_planning import pre_tool_hook_detail, pre_tool_hook_reason

HERE = pathlib.Path(__file__).resolve().parent
HOOK = HERE / "hook.py"
SESSION = "session-under-test"
CALL = "call-under-test"
SHELL_INPUT = {"command": "echo hi"}

# Result fields that carry run-specific paths or timings rather than behaviour.
UNRECORDED_FIELDS = {"attachments", "messages"}


def normalise(value, cwd):
    if isinstance(value, str):
        return value.replace(str(cwd), "<cwd>").replace(SESSION, "<session>").replace(CALL, "<call>")
    if isinstance(value, dict):
        return {k: normalise(v, cwd) for k, v in value.items()}
    if isinstance(value, list):
        return [normalise(v, cwd) for v in value]
    return value


def result_fields(result):
    fields = dataclasses.asdict(result)
    return {k: v for k, v in sorted(fields.items()) if k not in UNRECORDED_FIELDS}


def model_text_of_pre_tool(result, tool):
    """What the reference's tool executor answers the model for a call a hook denied."""
    if result.decision != "deny":
        return None
    detail = pre_tool_hook_detail(pre_tool_hook_reason(result.reason))
    parts = [
        f"Tool execution blocked by a PreToolUse hook: '{tool}'.",
        tool_executor._HOOK_DENY_CLOSE_WITH_REASON if detail else tool_executor._HOOK_DENY_CLOSE_NO_REASON,
    ]
    if detail:
        parts.append(f"Hook reason: {detail}")
    return " ".join(parts)


def run_case(name, event, matcher, mode, dispatch):
    with tempfile.TemporaryDirectory() as tmp:
        cwd = pathlib.Path(tmp).resolve()
        capture = cwd / "stdin.jsonl"
        command = f"python3 '{HOOK}' {mode} '{capture}'"
        group = {"hooks": [{"type": "command", "command": command, "timeout": 10}]}
        if matcher is not None:
            group["matcher"] = matcher
        rules, warnings = ClaudeHooksParser().parse_dict({"hooks": {event: [group]}}, plugin_name="recorder")
        if warnings:
            raise SystemExit(f"{name}: the reference refused the hooks block: {warnings}")
        adapter = ClaudeHookPayloadAdapter()
        dispatcher = PluginHookDispatcher(cwd=cwd)
        record = dispatch(adapter, dispatcher, rules, cwd)
        stdin = [json.loads(line) for line in capture.read_text().splitlines()] if capture.exists() else []
        record = {"event": event, "matcher": matcher, "mode": mode, **record,
                  "stdin": [normalise(s, cwd) for s in stdin]}
        return name, normalise(record, cwd)


def pre_tool(adapter, dispatcher, rules, cwd):
    payload = adapter.build_pre_tool_use(tool_name="run_shell_command", tool_input=dict(SHELL_INPUT),
                                         session_id=SESSION, tool_use_id=CALL, cwd=cwd)
    result = dispatcher.dispatch_pre_tool_use_decision(payload=payload, rules=rules)
    return {
        "result": result_fields(result),
        # The reference's tool runner: a deny / ask carries this as the permission reason.
        "permission_reason": pre_tool_hook_reason(result.reason) if result.decision else None,
        "model_text": model_text_of_pre_tool(result, "run_shell_command"),
        # tool_runner.py emits this payload for a PreToolUse dispatch.
        "plugin_hook_fired": {"hook_name": "PreToolUse", "tool": "run_shell_command",
                              "outcome": result.decision or "allow",
                              "matched_rule_count": result.matched_rule_count,
                              "added_context_count": len(result.additional_contexts)},
    }


def post_tool(adapter, dispatcher, rules, cwd):
    payload = adapter.build_post_tool_use(tool_name="run_shell_command", tool_input=dict(SHELL_INPUT),
                                          tool_output="hi\n", session_id=SESSION, tool_use_id=CALL,
                                          duration_ms=1, cwd=cwd)
    result = dispatcher.dispatch_post_tool_use(payload=payload, rules=rules)
    contexts = tool_executor._hook_contexts_of(result)
    return {
        "result": result_fields(result),
        "model_contexts": contexts,
        # tool_result_formatter.py: each context rides after the result in this frame.
        "result_suffix": "\n\n" + "\n".join(f"<system-reminder>\n{c}\n</system-reminder>" for c in contexts)
        if contexts else "",
    }


def post_tool_failure(adapter, dispatcher, rules, cwd):
    payload = adapter.build_post_tool_use_failure(tool_name="read_file", tool_input={"file_path": "missing.txt"},
                                                  error="file not found", session_id=SESSION, tool_use_id=CALL,
                                                  duration_ms=1, cwd=cwd)
    result = dispatcher.dispatch_post_tool_use_failure(payload=payload, rules=rules)
    contexts = tool_executor._hook_contexts_of(result)
    return {
        "result": result_fields(result),
        "model_contexts": contexts,
        "result_suffix": "\n\n" + "\n".join(f"<system-reminder>\n{c}\n</system-reminder>" for c in contexts)
        if contexts else "",
    }


def prompt(adapter, dispatcher, rules, cwd):
    payload = adapter.build_user_prompt_submit(user_message="go", session_id=SESSION, cwd=cwd)
    result = dispatcher.dispatch_user_prompt_submit(payload=payload, rules=rules)
    # chat_loop/_hook_dispatch.py turns the result into these.
    if result.blocking_error:
        early, outcome = f"[Blocked by hook] {result.blocking_error}", "block"
    elif result.prevent_continuation:
        early, outcome = f"[Hook stopped] {result.stop_reason or 'Hook prevented continuation'}", "stop"
    else:
        early, outcome = None, "modify" if result.additional_contexts else "allow"
    message = "go"
    if early is None and result.additional_contexts:
        extra = "\n".join(f"<user-prompt-submit-hook>\n{c}\n</user-prompt-submit-hook>"
                          for c in result.additional_contexts)
        message = extra + "\n" + message
    return {
        "result": result_fields(result),
        "turn_text": early,
        "user_message": None if early else message,
        "plugin_hook_fired": {"hook_name": "UserPromptSubmit", "rule_count": len(rules), "outcome": outcome,
                              "blocking_error": result.blocking_error or None,
                              "stop_reason": result.stop_reason or None,
                              "added_context_count": len(result.additional_contexts or [])},
    }


def stop(adapter, dispatcher, rules, cwd):
    payload = adapter.build_stop(session_id=SESSION, cwd=cwd, last_assistant_message="done",
                                 stop_hook_active=False, turn_end_reason="final_response",
                                 permission_mode="workspace-write")
    result = dispatcher.dispatch_stop(payload=payload, rules=rules)
    return {"result": result_fields(result)}


class LifecycleAgent:
    """The attributes the reference's `fire_session_start` reads of an agent, and the history
    it writes context into."""

    def __init__(self, rules, cwd):
        self._plugin_hook_rules = rules
        self.working_directory = cwd
        self.messages = []

    def add_message(self, role, content):
        self.messages.append({"role": role, "content": content})


def session_start(adapter, dispatcher, rules, cwd):
    # The reference's own entry point (its CLI, `agentao run` and ACP call it), which builds
    # the payload itself: it passes no model name.
    from agentao.plugins.hooks.lifecycle import fire_session_start
    agent = LifecycleAgent(rules, cwd)
    notices = fire_session_start(agent, SESSION, source="startup")
    return {"history_added": agent.messages, "user_notices": notices}


def pre_compact(adapter, dispatcher, rules, cwd):
    payload = adapter.build_pre_compact(session_id=SESSION, cwd=cwd, trigger="manual",
                                        compaction_type="full", reason="manual",
                                        custom_instructions="", permission_mode="workspace-write")
    result = dispatcher.dispatch_pre_compact(payload=payload, rules=rules)
    return {"result": result_fields(result)}


CASES = [
    ("pre_tool_allow", "PreToolUse", "Bash", "pre-allow", pre_tool),
    ("pre_tool_deny", "PreToolUse", "Bash", "pre-deny", pre_tool),
    ("pre_tool_deny_without_reason", "PreToolUse", "Bash", "pre-deny-bare", pre_tool),
    ("pre_tool_ask", "PreToolUse", "Bash", "pre-ask", pre_tool),
    ("pre_tool_updated_input", "PreToolUse", "Bash", "pre-rewrite", pre_tool),
    ("pre_tool_exit_2", "PreToolUse", "Bash", "exit-2", pre_tool),
    ("post_tool_context", "PostToolUse", "Bash", "post-context", post_tool),
    ("post_tool_failure_context", "PostToolUseFailure", "Read", "failure-context", post_tool_failure),
    ("prompt_context", "UserPromptSubmit", None, "prompt-context", prompt),
    ("prompt_block", "UserPromptSubmit", None, "prompt-block", prompt),
    ("stop_block", "Stop", None, "stop-block", stop),
    ("session_start_context", "SessionStart", "startup", "session-context", session_start),
    ("pre_compact_observe", "PreCompact", "manual", "observe", pre_compact),
]


def main():
    out = {
        "reference": f"agentao {importlib.metadata.version('agentao')}",
        "recorded_by": "tests/conformance/hooks/record.py",
        "normalised": {"<cwd>": "the hook's working directory", "<session>": "the session id",
                       "<call>": "the tool call id"},
        "cases": dict(run_case(*case) for case in CASES),
    }
    target = HERE / "reference.json"
    target.write_text(json.dumps(out, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
    print(f"wrote {target}")


if __name__ == "__main__":
    sys.exit(main())
