import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { fromJson, type JsonValue, toJson } from "@bufbuild/protobuf";
import { ConnectError, createClient, type Transport } from "@connectrpc/connect";
import { A2AService, SendMessageRequestSchema, SendMessageResponseSchema, StreamResponseSchema } from "@parley/proto";

/**
 * A minimal A2A 1.0 JSON-RPC endpoint in front of a real Parley (through its
 * in-process transport), so JSON-RPC targets are exercised over real HTTP and
 * SSE without depending on apps/bridge.
 */
export async function startJsonRpcFront(upstream: Transport): Promise<{ url: string; close(): Promise<void> }> {
  const a2a = createClient(A2AService, upstream);
  const server: Server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as {
      id: number;
      method: string;
      params: JsonValue;
    };
    const answer = (payload: object) => ({ jsonrpc: "2.0", id: body.id, ...payload });
    const fail = (code: number, message: string) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify(answer({ error: { code, message } })));
    };
    if (req.headers["a2a-version"] !== "1.0") return fail(-32009, "send A2A-Version: 1.0");
    const headers = { "a2a-version": "1.0", authorization: req.headers.authorization ?? "" };
    const request = fromJson(SendMessageRequestSchema, body.params);
    try {
      if (body.method === "SendMessage") {
        const result = await a2a.sendMessage(request, { headers });
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify(answer({ result: toJson(SendMessageResponseSchema, result) })));
      } else if (body.method === "SendStreamingMessage") {
        const events = a2a.sendStreamingMessage(request, { headers });
        let started = false;
        for await (const event of events) {
          if (!started) res.writeHead(200, { "content-type": "text/event-stream" });
          started = true;
          res.write(`data: ${JSON.stringify(answer({ result: toJson(StreamResponseSchema, event) }))}\n\n`);
        }
        res.end();
      } else {
        fail(-32601, `no method ${body.method}`);
      }
    } catch (error) {
      const code = ConnectError.from(error).code === 10 ? -32050 : -32603;
      if (res.headersSent) res.end();
      else fail(code, ConnectError.from(error).rawMessage);
    }
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
