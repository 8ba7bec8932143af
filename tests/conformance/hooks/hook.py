"""One small hook script for every recorded point, shared by the reference recorder
(record.py) and our side (tests/hooks_reference.rs).

Usage: python3 hook.py MODE CAPTURE_FILE
It appends the JSON it read on stdin as one line to CAPTURE_FILE, then answers as MODE says.
"""
import json
import sys

mode, capture = sys.argv[1], sys.argv[2]
received = json.load(sys.stdin)
with open(capture, "a", encoding="utf-8") as f:
    f.write(json.dumps(received, sort_keys=True) + "\n")


def pre_tool(decision, reason, **extra):
    out = {"hookEventName": "PreToolUse", "permissionDecision": decision,
           "permissionDecisionReason": reason}
    out.update(extra)
    print(json.dumps({"hookSpecificOutput": out}))


if mode == "pre-allow":
    pre_tool("allow", "allowed by the reference hook")
elif mode == "pre-deny":
    pre_tool("deny", "use the read tool instead")
elif mode == "pre-deny-bare":
    print(json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse",
                                             "permissionDecision": "deny"}}))
elif mode == "pre-ask":
    pre_tool("ask", "a human should look at this")
elif mode == "pre-rewrite":
    pre_tool("allow", "rewritten", updatedInput={"command": "echo rewritten"})
elif mode == "exit-2":
    sys.stderr.write("blocked by exit 2\n")
    sys.exit(2)
elif mode == "post-context":
    print(json.dumps({"hookSpecificOutput": {"hookEventName": "PostToolUse",
                                             "additionalContext": "lint passed"}}))
elif mode == "failure-context":
    print(json.dumps({"hookSpecificOutput": {"hookEventName": "PostToolUseFailure",
                                             "additionalContext": "the file name was wrong"}}))
elif mode == "prompt-context":
    print(json.dumps({"hookSpecificOutput": {"hookEventName": "UserPromptSubmit",
                                             "additionalContext": "the build is green"}}))
elif mode == "prompt-block":
    print(json.dumps({"decision": "block", "reason": "prompt refused by policy"}))
elif mode == "stop-block":
    # Sends the agent back once: a second stop (stop_hook_active) is let through.
    if not received.get("stop_hook_active"):
        print(json.dumps({"decision": "block", "reason": "run the tests first"}))
elif mode == "session-context":
    print(json.dumps({"hookSpecificOutput": {"hookEventName": "SessionStart",
                                             "additionalContext": "the project uses tabs"}}))
elif mode == "observe":
    pass
else:
    sys.stderr.write(f"unknown mode {mode}\n")
    sys.exit(1)
