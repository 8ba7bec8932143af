#!/usr/bin/env python3
"""Writes the committed seed corpora (fuzz/corpus/<target>/) from the conformance vectors
(tests/conformance/permissions/*.jsonl) and the test vectors of the unit tests and docs.
Run once when the vectors change: python3 fuzz/make_corpus.py [path/to/conformance]"""
import hashlib, json, os, sys

HERE = os.path.dirname(os.path.abspath(__file__))
CONFORMANCE = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "tests", "conformance")
PERM = os.path.join(CONFORMANCE, "permissions")
OUT = os.path.join(HERE, "corpus")


def write(target, seeds):
    # Adds what is missing and removes nothing: seeds added by hand (regressions, seeds from a
    # fuzzing run) stay. A seed that should go is deleted by hand.
    d = os.path.join(OUT, target)
    os.makedirs(d, exist_ok=True)
    seen = set()
    for s in seeds:
        b = s if isinstance(s, bytes) else s.encode()
        h = hashlib.sha1(b).hexdigest()
        if h in seen:
            continue
        seen.add(h)
        with open(os.path.join(d, h), "wb") as f:
            f.write(b)


def jsonl(name):
    with open(os.path.join(PERM, name), encoding="utf-8") as f:
        return [json.loads(l) for l in f if l.strip()]


# hardline: every conformance command (refused and allowed), then our own vectors (the
# respellings the floor refuses beyond the reference, and the benign commands it must let
# through), capped at 8 KiB each.
with open(os.path.join(HERE, "..", "tests", "vectors", "hardline-ours.jsonl"), encoding="utf-8") as f:
    ours = [json.loads(l)["command"] for l in f if l.strip()]
write("hardline", [c for c in [r["command"] for r in jsonl("hardline.jsonl")] + ours if len(c) <= 8192])

# rules: one decision per (group, mode, outcome), as the target reads it.
picked, keys = [], set()
for r in jsonl("decisions.jsonl"):
    k = (r.get("group"), r["mode"], r["outcome"])
    if k in keys:
        continue
    keys.add(k)
    picked.append(json.dumps({"mode": r["mode"], "tool": r["tool"], "args": r["args"],
                              "user_rules": r["user_rules"]}))
picked += ["rm -rf\nrm -rf /", "read_file\nread_file", "(?i)^git\\s+(status|log)$\ngit status",
           "[a-z]{2,}\\Z\nabc", "a{,3}$\naaa\n", "\\s+\n\x1c", "(?=x)\nx", "[]]\n]"]
write("rules", picked)

# sse: 4 cut bytes, then a wire.
wires = [
    b"data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\ndata: [DONE]\n\n",
    b"data: a\r\n\r\ndata:b\n\ndata: c\r\rdata: d",
    b": keep-alive\n\nevent: x\nid: 3\ndata: 1\ndata: 2\n\n: OPENROUTER PROCESSING\n\n",
    b"data: {\"x\":1}\r\n\r\ndata: [DONE]\r\n\r\n",
    b"data\n\ndata:\n\ndata:  two spaces\n\nretry: 10\n\n",
    b"data: a\r",
    b"data: one\x00data: two\x00\x00three\nfour",
]
write("sse", [bytes([1, 3, 7, 16]) + w for w in wires] + [bytes([5, 5, 5, 5]) + wires[0]])

# chunk_decoder: mode 0 = raw lines; mode 1 = round trip of cut deltas.
raw_lines = [
    '{"choices":[{"index":0,"delta":{"role":"assistant","content":null}}],"usage":null}',
    '{"choices":[{"delta":{"content":"Hi \\"there\\"","reasoning_content":"think"}}]}',
    '{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"read_file","arguments":""}}]}}]}',
    '{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\\"a\\":1}"}}]}}]}',
    '{"choices":[{"delta":{"tool_calls":[{"index":1,"id":"c2","function":{"name":"x","arguments":{"k":2}}}]}}]}',
    '{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}',
    '{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":2},"completion_tokens_details":{"reasoning_tokens":1}}}',
    '{"choices":null,"usage":null}',
    '{"id":"x","object":"chat.completion.chunk","model":"m"}',
    '{"choices":[{"message":{"content":"whole","tool_calls":[{"id":"w","function":{"name":"glob","arguments":"{}"}}]},"finish_reason":"stop"}]}',
    '{"choices":[{"delta":{"reasoning":"r","content":"c"}}]}',
    "{not json",
    '{"error":{"message":"overloaded","type":"server_error","code":"server_error"}}',
    '{"object":"error","message":"bad things","code":400}',
    "[DONE]",
]
decoder = [b"\x00" + "\n".join(raw_lines).encode()]
decoder += [b"\x00data: " + l.encode() for l in raw_lines]
decoder += [b"\x01\x00Hello\x01think\x02{\"a\":\x06 1}\x03stop", b"\x01\x02{\"x\"\x0a:1}\x00text"]
write("chunk_decoder", decoder)

# anthropic_decoder, responses_decoder: the streams of the wires' unit tests (corpus() in
# src/llm/{anthropic,responses}/tests.rs), one event a line, whole and one seed per event.
anthropic_lines = [
    '{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":[],"stop_reason":null,"usage":{"input_tokens":5,"cache_read_input_tokens":2,"output_tokens":1}}}',
    '{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}',
    '{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hm\\n"}}',
    '{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"SIG"}}',
    '{"type":"content_block_stop","index":0}',
    '{"type":"ping"}',
    '{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}',
    '{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Hi \\"x\\""}}',
    '{"type":"content_block_stop","index":1}',
    '{"type":"content_block_start","index":2,"content_block":{"type":"redacted_thinking","data":"xyz"}}',
    '{"type":"content_block_stop","index":2}',
    '{"type":"content_block_start","index":3,"content_block":{"type":"tool_use","id":"toolu_1","name":"f","input":{}}}',
    '{"type":"content_block_delta","index":3,"delta":{"type":"input_json_delta","partial_json":"{\\"a\\":"}}',
    '{"type":"content_block_delta","index":3,"delta":{"type":"input_json_delta","partial_json":"1}"}}',
    '{"type":"content_block_stop","index":3}',
    '{"type":"content_block_start","index":4,"content_block":{"type":"tool_use","id":"toolu_2","name":"g","input":{"k":[1,2]}}}',
    '{"type":"content_block_stop","index":4}',
    '{"type":"future_event","x":[1,{"y":null}]}',
    '{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":9}}',
    '{"type":"message_stop"}',
]
anthropic_error = '{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}'
write("anthropic_decoder", ["\n".join(anthropic_lines), "\n".join(anthropic_lines[:-1])]
      + ["data: " + l for l in anthropic_lines + [anthropic_error]])
responses_lines = [
    '{"type":"response.created","sequence_number":0,"response":{"id":"r","model":"o4","output":[]}}',
    '{"type":"response.output_item.added","output_index":0,"item":{"type":"reasoning","id":"rs_0","summary":[]}}',
    '{"type":"response.reasoning_summary_part.added","item_id":"rs_0","output_index":0,"summary_index":0,"part":{"type":"summary_text","text":""}}',
    '{"type":"response.reasoning_summary_text.delta","item_id":"rs_0","output_index":0,"summary_index":0,"delta":"think"}',
    '{"type":"response.output_item.done","output_index":0,"item":{"type":"reasoning","id":"rs_0","summary":[{"type":"summary_text","text":"think"}],"encrypted_content":"E"}}',
    '{"type":"response.output_item.added","output_index":1,"item":{"type":"message","id":"msg_1","role":"assistant","content":[]}}',
    '{"type":"response.output_text.delta","item_id":"msg_1","output_index":1,"content_index":0,"delta":"Hi\\n\\"x\\"","logprobs":[],"sequence_number":7}',
    '{"type":"response.refusal.delta","output_index":1,"delta":"no"}',
    '{"type":"response.output_text.done","item_id":"msg_1","output_index":1,"content_index":0,"text":"Hi","logprobs":[]}',
    '{"type":"response.output_item.added","output_index":2,"item":{"type":"function_call","id":"fc_2","call_id":"call_2","name":"f","arguments":""}}',
    '{"type":"response.function_call_arguments.delta","item_id":"fc_2","output_index":2,"delta":"{\\"a\\":"}',
    '{"type":"response.function_call_arguments.delta","item_id":"fc_2","output_index":2,"delta":"1}"}',
    '{"type":"response.function_call_arguments.done","item_id":"fc_2","output_index":2,"arguments":"{\\"a\\":1}"}',
    '{"type":"response.reasoning_text.delta","output_index":3,"delta":"r"}',
    '{"type":"response.completed","response":{"model":"o4","output":[{"type":"function_call","id":"fc_4","call_id":"call_4","name":"g","arguments":"{}"}],"usage":{"input_tokens":3,"output_tokens":4,"output_tokens_details":{"reasoning_tokens":1}}}}',
]
responses_other = [
    '{"type":"response.incomplete","response":{"incomplete_details":{"reason":"max_output_tokens"}}}',
    '{"type":"response.failed","response":{"error":{"code":"server_error","message":"boom"}}}',
    '{"type":"error","code":"rate_limit_exceeded","message":"slow down"}',
]
write("responses_decoder", ["\n".join(responses_lines), "\n".join(responses_lines[:-1])]
      + ["data: " + l for l in responses_lines + responses_other])

# tool_args: the repairs of llm/tool_call.rs and turn/plan.rs tests, and names.
write("tool_args", [
    "", "null", "none", "```json\n{\"a\":1}\n```", "\"{\\\"a\\\":1}\"", "{\"a\":\"x\ny\"}",
    "{\"a\":[1,2,],}", "{'a': True, 'b': None, 'c': 'it\\'s'}", "[1]", "{\"a\": ",
    "{\"file_path\": \"src/main.rs\", \"offset\": 10, \"limit\": -0.5e3}",
    "{\"command\": \"ls -la\", \"working_directory\": \"x\", \"timeout\": 30}",
    "ReadFileTool", "read-file", " READ_FILE ", "writeFile", "launch_rockets", "read",
    "run_shell_command_tool\n{}", "{\"a\": {\"b\": [1, {\"c\": null}]}}",
])

# config: the shapes of docs/config.md, README.md and config.rs's tests.
script = {"responses": [
    {"reasoning": "…", "text": "Hello", "chunk_size": 2},
    {"tool_calls": [{"id": "call_1", "name": "read_file", "arguments": {"file_path": "a.txt"}, "arg_chunks": 3}]},
    {"repeat": 3, "text": "step {i}"},
    {"fault": {"type": "http_error", "status": 500, "headers": {"Retry-After": "0"}}},
    {"chunks": ["a", "b"], "delay_ms": 50, "finish_reason": None, "usage": {"prompt_tokens": 5}}],
    "exhausted": {"text": "(script exhausted)"}}
configs = [
    {"working_directory": ".", "llm": {"provider": "scripted", "script": {"responses": [{"text": "Hello from the agent."}]}}},
    {"working_directory": "/tmp", "llm": {"provider": "scripted", "script": script}},
    {"working_directory": "/tmp", "max_iterations": 7, "system_prompt": "Be brief.", "reply_timeout_ms": 500,
     "llm": {"provider": "openai", "base_url": "http://127.0.0.1:1/v1/", "api_key": "sk-test", "model": "m",
             "temperature": 0.2, "max_tokens": 42, "headers": {"X-Trace": "1"}, "extra_body": {"top_p": 1},
             "connect_timeout_ms": 100, "read_timeout_ms": 3000, "max_attempts": 2,
             "retry_backoff_base_ms": 1, "retry_backoff_cap_ms": 2},
     "tools": {"disabled": ["web_fetch"], "allow_reads_outside_workspace": False, "settings": {"run_shell_command": {"timeout": 5}}},
     "permissions": {"mode": "workspace-write", "hardline": True,
                     "rules": [{"tool": "run_shell_command", "args": {"command": "^git "}, "action": "allow"},
                               {"tool": "web_fetch", "domain": {"allowlist": [".github.com"]}, "action": "allow"}]}},
    {"working_directory": "/tmp", "llm": {"max_tokens": "x"}},
    {"working_directory": "/tmp", "bogus": 1},
    {},
    {"working_directory": "/tmp", "llm": {"provider": "scripted", "script": {"responses": []}},
     "tools": {"enabled": ["read_file", "glob"]}, "permissions": {"mode": "read-only", "rules_file": "permissions.json"}},
]
write("config", [json.dumps(c, ensure_ascii=False) for c in configs])

# path_policy: path_policy.rs's tests and typical tool arguments.
write("path_policy", [
    "a/b.txt", "../x", "/etc/passwd", "out/x", "out/../y", "leaf", "in/z", "sub", "..",
    "src/main.rs", "./dir/../file", "~", "~/x", "link_in/f", "link_out/secret", "dir/sub/up2",
    "loop/x", "up/ws/file", "slash/etc", "dir/back_out",
])

# url_policy: 20 address bytes, then a URL (url_policy.rs's tests).
urls = ["ftp://x.com/", "http://u:p@x.com/", "http://localhost:8/", "http://db.internal/",
        "http://intranet/", "http://127.0.0.1:9/", "http://2130706433/", "http://[::1]/",
        "https://example.com/a", "http://[64:ff9b::a9fe:a9fe]/", "http://0x7f.1/",
        "HTTPS://EXAMPLE.COM.:443/x?y#z", "http://[::ffff:169.254.169.254]/"]
addrs = [bytes([127, 0, 0, 1]) + bytes(15) + b"\x01", bytes([169, 254, 169, 254]) + bytes(16),
         bytes([8, 8, 8, 8]) + bytes([0x20, 0x02, 0x7f, 0, 0, 1]) + bytes(10)]
write("url_policy", urls + [a + u.encode() for a in addrs for u in urls[:4]] + addrs)
