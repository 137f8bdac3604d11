// The ceiling: the least work an HTTP/1.1 JSON-RPC server can do per request
// (read the body, parse it, answer with a JSON object echoing the text).
import { createServer } from "node:http";
import { serveControl } from "../lib/child-ipc.mjs";

const server = createServer((req, res) => {
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    const body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
    const text = body.params?.message?.parts?.[0]?.text ?? "";
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
