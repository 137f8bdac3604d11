// The framework floor for the Connect/gRPC rows: connect-node on an h2c server
// with the A2A service, whose SendMessage answers a Message echoing the text and
// does nothing else (no engine, no store, no interceptors). Whatever Parley's
// gRPC rows cost above this is Parley's own work; this row is what the chosen
// stack (@connectrpc/connect-node on node:http2) costs before any of it.
import { randomUUID } from "node:crypto";
import { createServer } from "node:http2";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { A2AService, Role } from "@parley/proto";
import { serveControl } from "../lib/child-ipc.mjs";

const handler = connectNodeAdapter({
  routes(router) {
    router.service(A2AService, {
      async sendMessage(req) {
        const text = req.message?.parts.map((p) => (p.content.case === "text" ? p.content.value : "")).join("\n");
        return {
          payload: {
            case: "message",
            value: {
              messageId: randomUUID(),
              contextId: req.message?.contextId ?? "",
              role: Role.AGENT,
              parts: [{ content: { case: "text", value: text ?? "" } }],
            },
          },
        };
      },
    });
  },
});
const server = createServer(handler);
server.listen(0, "127.0.0.1", () => {
  serveControl({ stop: async () => setImmediate(() => process.exit(0)) });
  process.send({ ready: true, grpcUrl: `http://127.0.0.1:${server.address().port}` });
});
