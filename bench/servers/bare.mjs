// The ceiling: the least work an HTTP/1.1 JSON-RPC server can do per request
// (read the body, parse it, answer with a JSON object echoing the text). A
// SendStreamingMessage gets the echo's stream as SSE (a task, 8 artifact chunks,
// COMPLETED: the events Parley's echo and the anchor send), after BENCH_BARE_DELAY_MS:
// what any Node server pays per open stream, with nothing of its own held.
import { randomUUID } from "node:crypto";
import { createServer } from "node:http";
import { setTimeout as sleep } from "node:timers/promises";
import { serveControl } from "../lib/child-ipc.mjs";

const CHUNKS = 8;
const delayMs = Number(process.env.BENCH_BARE_DELAY_MS ?? 0);
if (!Number.isInteger(delayMs) || delayMs < 0) {
  throw new RangeError(
    `BENCH_BARE_DELAY_MS must be a whole number of ms, got ${JSON.stringify(process.env.BENCH_BARE_DELAY_MS)}`,
  );
}

const sseHeaders = { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" };

async function stream(res, id, message, text) {
  const now = () => new Date().toISOString();
  const taskId = randomUUID();
  const contextId = message.contextId ?? randomUUID();
  const send = (result) => res.write(`data: ${JSON.stringify({ jsonrpc: "2.0", id, result })}\n\n`);
  res.writeHead(200, sseHeaders);
  send({
    task: {
      id: taskId,
      contextId,
      status: { state: "TASK_STATE_SUBMITTED", timestamp: now() },
      history: [{ ...message, taskId, contextId }],
    },
  });
  if (delayMs > 0) await sleep(delayMs);
  const size = Math.max(1, Math.ceil(text.length / CHUNKS));
  for (let at = 0, i = 0; at < text.length; at += size, i++) {
    send({
      artifactUpdate: {
        taskId,
        contextId,
        append: i > 0,
        lastChunk: at + size >= text.length,
        artifact: { artifactId: "reply", name: "reply", parts: [{ text: text.slice(at, at + size) }] },
      },
    });
  }
  send({ statusUpdate: { taskId, contextId, status: { state: "TASK_STATE_COMPLETED", timestamp: now() } } });
  res.end();
}

const server = createServer((req, res) => {
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    const body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
    const message = body.params?.message ?? {};
    const text = message.parts?.[0]?.text ?? "";
    if (body.method === "SendStreamingMessage") {
      stream(res, body.id, message, text).catch((error) => res.destroy(error));
      return;
    }
    const out = JSON.stringify({
      jsonrpc: "2.0",
      id: body.id,
      result: { message: { role: "ROLE_AGENT", parts: [{ text }] } },
    });
    res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(out) });
    res.end(out);
  });
});
server.keepAliveTimeout = 60_000;
server.listen(0, "127.0.0.1", () => {
  serveControl({ stop: async () => setImmediate(() => process.exit(0)) });
  process.send({ ready: true, jsonRpcUrl: `http://127.0.0.1:${server.address().port}/` });
});
