"""agentao-acp driven by the official ACP Python SDK (PyPI `agent-client-protocol`), with the
SDK's defaults: `initialize` without client capabilities, `session/new` with `_meta` and
`additionalDirectories`, a prompt, a `session/cancel` carrying `_meta` that must stop the turn,
and `session/list`.

Usage: python client.py AGENTAO_ACP_BINARY WORK_DIR
Prints one line per check and closes with `acp-python: N passed, M failed`.
"""

import asyncio
import json
import os
import sys
import time

import acp
from acp import spawn_agent_process, text_block
from acp.schema import DeniedOutcome, RequestPermissionResponse

# The contract is 100 ms; the bound leaves room for a loaded 2-core machine.
CANCEL_BOUND_S = 0.5


class Client:
    def __init__(self):
        self.streaming = asyncio.Event()
        self.updates = 0

    async def session_update(self, session_id, update, **kwargs):
        self.updates += 1
        if getattr(update, "session_update", None) == "agent_message_chunk":
            self.streaming.set()

    async def request_permission(self, options, session_id, tool_call, **kwargs):
        return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))


async def main(binary, work):
    os.makedirs(work, exist_ok=True)
    extra = os.path.join(work, "extra")
    os.makedirs(extra, exist_ok=True)
    script = os.path.join(work, "script.json")
    with open(script, "w") as f:
        json.dump(
            {
                "responses": [
                    {"text": "hello from agentao"},
                    {"repeat": 3, "text": "x" * 400, "chunk_size": 1, "delay_ms": 20},
                ]
            },
            f,
        )
    passed, failed = 0, 0

    def check(name, ok, detail=""):
        nonlocal passed, failed
        if ok:
            passed += 1
            print(f"ok   {name}")
        else:
            failed += 1
            print(f"FAIL {name}: {detail}")

    client = Client()
    args = ["--script", script, "--sessions-dir", os.path.join(work, "sessions")]
    async with spawn_agent_process(client, binary, *args) as (conn, _proc):
        try:
            init = await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
            check("initialize with the SDK's defaults", init.protocol_version == 1, init)
        except Exception as e:  # noqa: BLE001 - reported as a failed check
            check("initialize with the SDK's defaults", False, repr(e))
            return passed, failed

        try:
            session = await conn.new_session(
                cwd=work, additional_directories=[extra], trace="acp-python"
            )
            sid = session.session_id
            check("session/new with _meta and additionalDirectories", bool(sid), session)
        except Exception as e:  # noqa: BLE001
            check("session/new with _meta and additionalDirectories", False, repr(e))
            return passed, failed

        r = await conn.prompt(session_id=sid, prompt=[text_block("hi")], trace="acp-python")
        check("a prompt ends end_turn", r.stop_reason == "end_turn", r)

        client.streaming.clear()
        task = asyncio.create_task(conn.prompt(session_id=sid, prompt=[text_block("talk")]))
        await asyncio.wait_for(client.streaming.wait(), 30)
        t0 = time.monotonic()
        await conn.cancel(session_id=sid, reason="user", trace="acp-python")
        r = await asyncio.wait_for(task, 30)
        took = time.monotonic() - t0
        print(f"FIGURE acp-python/cancel-with-meta: {took * 1000:.1f} ms to the cancelled response")
        check(
            "a cancel with _meta stops the turn",
            r.stop_reason == "cancelled" and took < CANCEL_BOUND_S,
            f"{r.stop_reason} after {took:.3f} s",
        )

        listed = await conn.list_sessions(trace="acp-python")
        ids = [s.session_id for s in listed.sessions]
        check("session/list names the session", sid in ids, ids)
    return passed, failed


if __name__ == "__main__":
    passed, failed = asyncio.run(main(sys.argv[1], os.path.abspath(sys.argv[2])))
    print(f"acp-python: {passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)
