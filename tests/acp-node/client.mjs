// Drives agentao-acp with the official ACP TypeScript client SDK (@agentclientprotocol/sdk):
// initialize, two concurrent sessions, a prompt whose tool call needs permission (granted once,
// then rejected), a cancel mid-stream. Every line in both directions goes to a JSONL transcript,
// which the Rust side validates against the reference schema.
//
//   node client.mjs <agentao-acp binary> <work dir> <transcript.jsonl>

import { spawn } from "node:child_process";
import { existsSync, mkdirSync, writeFileSync, appendFileSync } from "node:fs";
import { join } from "node:path";
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk";

const [bin, work, transcriptPath] = process.argv.slice(2);
if (!bin || !work || !transcriptPath) {
  console.error("usage: node client.mjs <agentao-acp> <work dir> <transcript.jsonl>");
  process.exit(2);
}
mkdirSync(work, { recursive: true });
writeFileSync(transcriptPath, "");

const shell = (id, command) => ({
  tool_calls: [{ id, name: "run_shell_command", arguments: { command } }],
});
const script = {
  model: "scripted-demo",
  responses: [
    { text: "Hello from agentao.", chunk_size: 3, delay_ms: 5 },
    shell("call_one", "touch one.txt"),
    { text: "Created one.txt." },
    shell("call_two", "touch two.txt"),
    { text: "Did not create two.txt." },
    { text: "z".repeat(300), chunk_size: 1, delay_ms: 20 },
  ],
};
const scriptPath = join(work, "script.json");
writeFileSync(scriptPath, JSON.stringify(script));

const child = spawn(bin, ["--script", scriptPath, "--sessions-dir", join(work, "sessions")], {
  stdio: ["pipe", "pipe", "inherit"],
});
const log = (dir, chunk) => {
  for (const line of Buffer.from(chunk).toString("utf8").split("\n")) {
    if (line.trim()) appendFileSync(transcriptPath, JSON.stringify({ dir, line }) + "\n");
  }
};
// Tap both directions without changing what the SDK sees.
const [toSdk, toLog] = Readable.toWeb(child.stdout).tee();
(async () => {
  for await (const chunk of toLog) log("server", chunk);
})();
const stdin = Writable.toWeb(child.stdin);
const tapped = new WritableStream({
  async write(chunk) {
    log("client", chunk);
    const w = stdin.getWriter();
    try {
      await w.write(chunk);
    } finally {
      w.releaseLock();
    }
  },
  async close() {
    await stdin.close();
  },
});

const summary = {
  permissionRequests: [],
  updatesBySession: {},
  stopReasons: [],
  cancelMs: null,
  concurrentInterleaved: false,
};
let permissionAnswers = ["allow_once", "reject_once"];

const app = acp
  .client()
  .onRequest("session/request_permission", ({ params }) => {
    const optionId = permissionAnswers.shift() ?? "reject_once";
    summary.permissionRequests.push({
      tool: params.toolCall.title,
      kind: params.toolCall.kind,
      options: params.options.map((o) => o.optionId),
      answered: optionId,
    });
    return { outcome: { outcome: "selected", optionId } };
  });

let checks = 0;
let failures = 0;
function fail(msg) {
  console.error(`FAIL: ${msg}`);
  failures++;
  process.exitCode = 1;
}

function check(cond, msg) {
  if (!cond) fail(msg);
  else checks++;
}

// Reads one prompt turn of a session to its stop, collecting updates.
async function drain(session, onUpdate) {
  const kinds = [];
  let text = "";
  for (;;) {
    const m = await session.nextUpdate();
    if (m.kind === "stop") {
      summary.stopReasons.push(m.stopReason);
      return { kinds, text, stopReason: m.stopReason };
    }
    kinds.push(m.update.sessionUpdate);
    const counts = (summary.updatesBySession[session.sessionId] ??= {});
    counts[m.update.sessionUpdate] = (counts[m.update.sessionUpdate] ?? 0) + 1;
    if (m.update.sessionUpdate === "agent_message_chunk") text += m.update.content.text;
    if (onUpdate) await onUpdate(m.update);
  }
}

const conn = app.connect(acp.ndJsonStream(tapped, toSdk));
const cx = conn.agent;
try {
  const init = await cx.request("initialize", {
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false },
  });
  check(init.protocolVersion === 1, `protocolVersion ${init.protocolVersion}`);
  check(init.agentInfo?.name === "agentao-acp", `agentInfo ${JSON.stringify(init.agentInfo)}`);

  const a = await cx.buildSession(work).start();
  const b = await cx.buildSession(work).start();
  check(a.sessionId !== b.sessionId, "two distinct sessions");
  check(a.modes?.availableModes?.length === 4, "four permission modes advertised");

  // Two concurrent prompts; record the order their chunks arrive in.
  const order = [];
  const [ra, rb] = await Promise.all([
    (async () => {
      const p = a.prompt("hi");
      const r = await drain(a, () => order.push("a"));
      await p;
      return r;
    })(),
    (async () => {
      const p = b.prompt("hi");
      const r = await drain(b, () => order.push("b"));
      await p;
      return r;
    })(),
  ]);
  check(ra.text === "Hello from agentao." && rb.text === "Hello from agentao.", "both sessions streamed the whole text");
  check(ra.stopReason === "end_turn" && rb.stopReason === "end_turn", "both ended end_turn");
  const switches = order.filter((x, i) => i > 0 && x !== order[i - 1]).length;
  summary.concurrentInterleaved = switches > 1;
  check(switches > 1, `the two streams interleave (${switches} switches)`);

  // A tool call that needs permission: granted once.
  let p = a.prompt("create one.txt");
  let r = await drain(a);
  await p;
  check(r.stopReason === "end_turn", `granted: ${r.stopReason}`);
  check(existsSync(join(work, "one.txt")), "one.txt was created after allow_once");
  check(r.kinds.includes("tool_call") && r.kinds.includes("tool_call_update"), `tool call updates: ${r.kinds}`);

  // The same kind of call, rejected.
  p = a.prompt("create two.txt");
  r = await drain(a);
  await p;
  check(r.stopReason === "end_turn", `rejected: ${r.stopReason}`);
  check(!existsSync(join(work, "two.txt")), "two.txt was not created after reject_once");
  check(summary.permissionRequests.length === 2, `two permission requests (${summary.permissionRequests.length})`);

  // Cancel mid-stream.
  let cancelledAt = null;
  p = a.prompt("talk for a while");
  r = await drain(a, async (u) => {
    if (u.sessionUpdate === "agent_message_chunk" && cancelledAt === null) {
      cancelledAt = performance.now();
      await cx.notify("session/cancel", { sessionId: a.sessionId });
    }
  });
  await p;
  summary.cancelMs = +(performance.now() - cancelledAt).toFixed(1);
  check(r.stopReason === "cancelled", `cancel: ${r.stopReason}`);
  check(r.text.length < 300, `the stream stopped early (${r.text.length} of 300 chunks)`);
  a.dispose();
  b.dispose();
} catch (e) {
  fail(`exception: ${e?.stack ?? JSON.stringify(e)}`);
} finally {
  conn.close();
  child.stdin.end();
}
const code = await new Promise((res) => child.on("exit", (c) => res(c)));
check(code === 0, `agentao-acp exit code ${code}`);

console.log("transcript summary:");
console.log(`  sessions: ${Object.keys(summary.updatesBySession).length}`);
for (const [sid, counts] of Object.entries(summary.updatesBySession)) {
  console.log(`  session ${sid.slice(0, 8)}: ${JSON.stringify(counts)}`);
}
for (const pr of summary.permissionRequests) {
  console.log(`  request_permission: ${pr.tool} (${pr.kind}) options ${pr.options.join("/")} -> ${pr.answered}`);
}
console.log(`  stop reasons: ${summary.stopReasons.join(", ")}`);
console.log(`  concurrent streams interleaved: ${summary.concurrentInterleaved}`);
console.log(`  session/cancel -> stopReason cancelled: ${summary.cancelMs} ms`);
console.log(`acp-node: ${checks} passed, ${failures} failed`);
