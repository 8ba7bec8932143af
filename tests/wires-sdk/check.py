"""The wires checked against code nobody here wrote: the official `anthropic` and `openai`
Python SDKs.

1. Streams: `mock-openai` serves each recorded transcript's model script (and one with
   reasoning and parallel calls) on the Anthropic Messages and OpenAI Responses wires; the
   SDKs' own stream readers (`messages.stream(...).get_final_message()`,
   `responses.stream(...).get_final_response()`) consume every answer. An HTTP or in-stream
   error must come out as the SDK's `APIStatusError` or `APIError`, anything else is a failure.
2. Requests: every request body the library sent in `tests/wires.rs` (recorded with
   AGENTAO_WIRE_BODIES) is validated against the SDKs' request types
   (`MessageCreateParamsStreaming`, `ResponseCreateParamsStreaming`) with pydantic, every
   TypedDict of the SDK set to refuse unknown keys.

usage: check.py MOCK_BINARY TRANSCRIPTS_DIR BODIES_DIR
Prints `wires-sdk: N passed, 0 failed` on success.
"""

import glob
import json
import os
import subprocess
import sys
import tempfile
import typing
import typing_extensions

import anthropic
import openai
import pydantic
from pydantic import ConfigDict, TypeAdapter

passed = 0
failed = 0


def ok(what):
    global passed
    passed += 1


def fail(what, why):
    global failed
    failed += 1
    print(f"FAIL {what}: {why}")


class Mock:
    def __init__(self, binary, script):
        self.file = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
        json.dump(script, self.file)
        self.file.close()
        self.proc = subprocess.Popen([binary, "--script", self.file.name],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        self.base = line.strip().split(" ")[-1]

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=10)
        os.unlink(self.file.name)


TOOLS_A = [{"name": "read_file", "description": "Reads a file.",
            "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"}}}}]
TOOLS_R = [{"type": "function", "name": "read_file", "description": "Reads a file.",
            "parameters": {"type": "object", "properties": {"file_path": {"type": "string"}}},
            "strict": False}]


def mock_skip(mock, wire):
    """Consumes one answer of a fresh mock, to reach the next (the mock answers in order)."""
    import urllib.request
    req = urllib.request.Request(mock.base + "/responses", data=b"{}", method="POST")
    try:
        urllib.request.urlopen(req).read()
    except Exception:  # noqa: BLE001 - an error answer is consumed as well
        pass


def consume(binary, name, script):
    n = max(1, len(script.get("responses", [])))
    for wire in ("anthropic", "openai-responses"):
        mock = Mock(binary, script)
        try:
            for i in range(n):
                what = f"{name} #{i + 1} on {wire}"
                try:
                    if wire == "anthropic":
                        c = anthropic.Anthropic(base_url=mock.base[: -len("/v1")], api_key="k",
                                                max_retries=0)
                        with c.messages.stream(model="m", max_tokens=100, tools=TOOLS_A,
                                               messages=[{"role": "user", "content": "hi"}]) as s:
                            msg = s.get_final_message()
                        assert msg.stop_reason in ("end_turn", "tool_use", "max_tokens", "refusal"), msg
                        for b in msg.content:
                            if b.type == "tool_use":
                                assert isinstance(b.input, dict), b
                            if b.type == "thinking":
                                assert b.signature, b
                    else:
                        c = openai.OpenAI(base_url=mock.base, api_key="k", max_retries=0)
                        # The SDK's typed events; its stream helper, which also checks the
                        # events against the items they build, accepts only `completed`.
                        events = list(c.responses.create(model="m", input="hi", tools=TOOLS_R,
                                                         store=False, stream=True))
                        for e in events:
                            assert isinstance(e, pydantic.BaseModel), e
                        last = events[-1].type
                        assert last in ("response.completed", "response.incomplete"), last
                        if last == "response.incomplete":
                            ok(what)
                            continue
                        mock.close()
                        mock = Mock(binary, script)
                        for _ in range(i):
                            mock_skip(mock, wire)
                        with c.with_options(base_url=mock.base).responses.stream(
                                model="m", input="hi", tools=TOOLS_R, store=False) as s:
                            for _ in s:
                                pass
                            r = s.get_final_response()
                        assert r.status == "completed", r.status
                        for item in r.output:
                            if item.type == "function_call":
                                json.loads(item.arguments or "{}")
                    ok(what)
                except (anthropic.APIStatusError, anthropic.APIError,
                        openai.APIStatusError, openai.APIError) as e:
                    # The script's faults: the SDK read them as its own typed errors.
                    faulted = script["responses"][i].get("fault") if script.get("responses") else None
                    if faulted:
                        ok(what)
                    else:
                        fail(what, repr(e))
                except Exception as e:  # noqa: BLE001 - anything else is the mock's fault
                    fail(what, repr(e))
        finally:
            mock.close()


def forbid_extra(module_names):
    """Every TypedDict of the SDKs' type modules refuses unknown keys, and its `Iterable[...]`
    fields are read as lists: pydantic validates an iterable lazily, as it is consumed, and
    its lazy iterator cannot be consumed after validation returns."""
    for mod_name, mod in list(sys.modules.items()):
        if not any(mod_name.startswith(m) for m in module_names):
            continue
        if getattr(mod, "Iterable", None) is not None:
            mod.Iterable = typing.List
        for v in list(vars(mod).values()):
            if isinstance(v, type) and typing_extensions.is_typeddict(v):
                base = dict(getattr(v, "__pydantic_config__", None) or {})
                base.update(extra="forbid", arbitrary_types_allowed=True)
                v.__pydantic_config__ = ConfigDict(**base)


def drain(x):
    """Validates what pydantic validates lazily: an `Iterable[...]` field is validated only as
    it is iterated."""
    if isinstance(x, dict):
        for v in x.values():
            drain(v)
    elif isinstance(x, (list, tuple)):
        for v in x:
            drain(v)
    elif hasattr(x, "__next__") or type(x).__name__ == "ValidatorIterator":
        for v in x:
            drain(v)


def validate(bodies_dir):
    import anthropic.types as at  # noqa: F401
    import anthropic.types.message_create_params as mcp
    import openai.types.responses as rt  # noqa: F401
    import openai.types.responses.response_create_params as rcp
    forbid_extra(["anthropic.types", "openai.types"])
    adapters = {
        "anthropic": TypeAdapter(mcp.MessageCreateParamsStreaming),
        "openai-responses": TypeAdapter(rcp.ResponseCreateParamsStreaming),
    }
    counts = {}
    for wire, adapter in adapters.items():
        path = os.path.join(bodies_dir, f"{wire}.jsonl")
        if not os.path.exists(path):
            fail(f"{wire} bodies", f"{path} missing (run tests/wires.rs with AGENTAO_WIRE_BODIES)")
            continue
        with open(path) as f:
            for n, line in enumerate(f, 1):
                try:
                    body = json.loads(line)
                except json.JSONDecodeError as e:
                    fail(f"{wire} body {n}", f"not one JSON body per line: {e}")
                    continue
                try:
                    drain(adapter.validate_python(body))
                    ok(f"{wire} body {n}")
                    counts[wire] = counts.get(wire, 0) + 1
                except pydantic.ValidationError as e:
                    fail(f"{wire} body {n}", str(e)[:2000])
    for wire, c in counts.items():
        print(f"wires-sdk: {c} {wire} request bodies valid")


def main():
    binary, transcripts, bodies = sys.argv[1:4]
    for path in sorted(glob.glob(os.path.join(transcripts, "*.json"))):
        t = json.load(open(path))
        script = dict(t["model_script"]["llm"])
        script.pop("exhausted", None)
        consume(binary, os.path.basename(path)[:-5], script)
    consume(binary, "reasoning_and_parallel_calls", {"model": "m", "responses": [
        {"reasoning": "Two files.", "text": "Reading both.", "tool_calls": [
            {"id": "call_1", "name": "read_file", "arguments": {"file_path": "a"}, "arg_chunks": 3},
            {"id": "call_2", "name": "read_file", "arguments": {"file_path": "b"}, "arg_chunks": 2}],
         "finish_reason": "tool_calls",
         "usage": {"prompt_tokens": 12, "completion_tokens": 7,
                   "prompt_tokens_details": {"cached_tokens": 4}}},
        {"text": "cut", "finish_reason": "length"}]})
    validate(bodies)
    print(f"wires-sdk: {passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
