// The floor for a durable JSON-RPC send: node:http, JSON parsing, the inbound
// message written to LevelDB before the reply is made and the reply written
// after, then a JSON answer; no validation, no protobuf, no history, no task.
// Whatever a durable A2A server does per send costs at least this here.
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Level } from "level";
import { serveControl } from "../lib/child-ipc.mjs";

const dir = mkdtempSync(join(tmpdir(), "parley-bench-floor-"));
const db = new Level(dir, { valueEncoding: "utf8" });
await db.open();
let sequence = 0;

const server = createServer((req, res) => {
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", async () => {
    const raw = Buffer.concat(chunks).toString("utf8");
    const body = JSON.parse(raw);
    const message = body.params?.message ?? {};
    const contextId = message.contextId ?? randomUUID();
    await db.put(`${contextId}:${++sequence}`, JSON.stringify(message));
    const reply = { messageId: randomUUID(), contextId, role: "ROLE_AGENT", parts: message.parts ?? [] };
    await db.put(`${contextId}:${++sequence}`, JSON.stringify(reply));
    const out = JSON.stringify({ jsonrpc: "2.0", id: body.id, result: { message: reply } });
    res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(out) });
    res.end(out);
  });
});
server.keepAliveTimeout = 60_000;
server.listen(0, "127.0.0.1", () => {
  serveControl({
    stop: async () => {
      await db.close();
      rmSync(dir, { recursive: true, force: true });
      setImmediate(() => process.exit(0));
    },
  });
  process.send({ ready: true, jsonRpcUrl: `http://127.0.0.1:${server.address().port}/` });
});
