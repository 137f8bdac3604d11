// One message far over limits.maxMessageBytes is refused cleanly on every protocol of the h2c port, and does
// not break its HTTP/2 connection. Before, a 32 MB message over Connect's Node gRPC client got INTERNAL
// NGHTTP2_ENHANCE_YOUR_CALM and so did every later call on that connection: the server answered at once and
// left the rest of the body unread, so the client held it in its session memory (over Node's 10 MB
// maxSessionMemory) and refused every response. Now the server reads the rest and throws it away first.

import { createServer, connect as netConnect, type Server, type Socket } from "node:net";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { Code, createClient, type Interceptor } from "@connectrpc/connect";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import * as grpc from "@grpc/grpc-js";
import { A2AService, SendMessageRequestSchema, SendMessageResponseSchema } from "@parley/proto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { failure, sendRequest, startTestServer, type TestServer } from "./harness.js";

/** The gRPC interface speaks A2A 1.0 only (no header means 0.3). */
const a2aVersion: Interceptor = (next) => (req) => {
  req.header.set("a2a-version", "1.0");
  return next(req);
};

function a2aMetadata(): grpc.Metadata {
  const metadata = new grpc.Metadata();
  metadata.set("a2a-version", "1.0");
  return metadata;
}

const big = "x".repeat(32 * 1024 * 1024);
const limitText = /larger than configured readMaxBytes 1048576/;

/** A TCP relay in front of the server that counts the connections clients open through it. */
async function countingRelay(
  target: string,
): Promise<{ address: string; connections: () => number; close(): Promise<void> }> {
  const [host, port] = [target.slice(0, target.lastIndexOf(":")), Number(target.slice(target.lastIndexOf(":") + 1))];
  let count = 0;
  const sockets = new Set<Socket>();
  const relay: Server = createServer((inbound) => {
    count++;
    const outbound = netConnect({ host, port });
    for (const s of [inbound, outbound]) {
      sockets.add(s);
      s.on("error", () => {});
      s.once("close", () => sockets.delete(s));
    }
    inbound.pipe(outbound).pipe(inbound);
    inbound.once("close", () => outbound.destroy());
    outbound.once("close", () => inbound.destroy());
  });
  await new Promise<void>((resolve) => relay.listen(0, "127.0.0.1", resolve));
  const { port: relayPort } = relay.address() as { port: number };
  return {
    address: `127.0.0.1:${relayPort}`,
    connections: () => count,
    close: () => {
      for (const s of sockets) s.destroy();
      return new Promise((resolve) => relay.close(() => resolve()));
    },
  };
}

describe("a 32 MB message on one HTTP/2 connection", () => {
  let server: TestServer;
  beforeAll(async () => {
    // A slow echo, so the concurrent call is still running while the large one is refused.
    server = await startTestServer({ agents: [{ name: "echo", type: "echo", options: { delayMs: 40, chunks: 8 } }] });
  });
  afterAll(() => server.close());

  it("@grpc/grpc-js: RESOURCE_EXHAUSTED naming the limit; a concurrent and a later call on the same connection succeed", async () => {
    const relay = await countingRelay(server.address);
    const client = new grpc.Client(relay.address, grpc.credentials.createInsecure(), {
      "grpc.max_send_message_length": -1,
    });
    const send = (contextId: string, text: string) =>
      new Promise<{ error?: grpc.ServiceError; kind?: string }>((resolve) => {
        client.makeUnaryRequest(
          "/lf.a2a.v1.A2AService/SendMessage",
          (m: Uint8Array) => Buffer.from(m),
          (b: Buffer) => fromBinary(SendMessageResponseSchema, b),
          toBinary(SendMessageRequestSchema, create(SendMessageRequestSchema, sendRequest(contextId, text) as never)),
          a2aMetadata(),
          (error, response) => resolve(error ? { error } : { kind: response?.payload.case }),
        );
      });
    try {
      expect((await send("lm-first", "hello")).kind).toBe("task");
      const concurrent = send("lm-concurrent", "unrelated, at the same time");
      const large = await send("lm-large", big);
      expect(large.error?.code).toBe(grpc.status.RESOURCE_EXHAUSTED);
      expect(large.error?.details).toMatch(limitText);
      expect((await concurrent).kind).toBe("task");
      expect((await send("lm-after", "after the large one")).kind).toBe("task");
      expect(relay.connections()).toBe(1);
    } finally {
      client.close();
      await relay.close();
    }
  });

  it("Connect's Node gRPC transport (Node's default session memory): ResourceExhausted, then the same session serves the next call", async () => {
    const relay = await countingRelay(server.address);
    const sessionManager = new Http2SessionManager(`http://${relay.address}`);
    const client = createClient(
      A2AService,
      createGrpcTransport({ baseUrl: `http://${relay.address}`, sessionManager, interceptors: [a2aVersion] }),
    );
    try {
      await client.sendMessage(sendRequest("lm-c-first", "hello"));
      const error = await failure(client.sendMessage(sendRequest("lm-c-large", big)));
      expect(error.code).toBe(Code.ResourceExhausted);
      expect(error.rawMessage).toMatch(limitText);
      const after = await client.sendMessage(sendRequest("lm-c-after", "after the large one"));
      expect(after.payload.case).toBe("task");
      expect(relay.connections()).toBe(1);
    } finally {
      sessionManager.abort();
      await relay.close();
    }
  });

  it("Connect's Node gRPC transport with a larger client session memory: a concurrent call is unaffected too", async () => {
    const relay = await countingRelay(server.address);
    // Node's HTTP/2 client refuses every response while it holds more than maxSessionMemory (10 MB by default)
    // of its own unsent data: a client that sends 32 MB messages needs more (grpc-js sets no limit).
    const sessionManager = new Http2SessionManager(`http://${relay.address}`, undefined, { maxSessionMemory: 128 });
    const client = createClient(
      A2AService,
      createGrpcTransport({ baseUrl: `http://${relay.address}`, sessionManager, interceptors: [a2aVersion] }),
    );
    try {
      await client.sendMessage(sendRequest("lm-m-first", "hello"));
      const concurrent = client.sendMessage(sendRequest("lm-m-concurrent", "unrelated, at the same time"));
      const error = await failure(client.sendMessage(sendRequest("lm-m-large", big)));
      expect(error.code).toBe(Code.ResourceExhausted);
      expect((await concurrent).payload.case).toBe("task");
      expect((await client.sendMessage(sendRequest("lm-m-after", "after"))).payload.case).toBe("task");
      expect(relay.connections()).toBe(1);
    } finally {
      sessionManager.abort();
      await relay.close();
    }
  });

  for (const protocol of ["connect", "grpc-web"] as const) {
    it(`${protocol} over HTTP/2: ResourceExhausted naming the limit, then the same transport serves the next call`, async () => {
      const client = server.a2a(protocol);
      const error = await failure(client.sendMessage(sendRequest(`lm-${protocol}-large`, "x".repeat(5 * 1024 * 1024))));
      expect(error.code).toBe(Code.ResourceExhausted);
      expect(error.rawMessage).toMatch(/readMaxBytes 1048576/);
      expect((await client.sendMessage(sendRequest(`lm-${protocol}-after`, "after"))).payload.case).toBe("task");
    });
  }

  it("Connect over HTTP/1.1: resource_exhausted naming the limit, on a connection that stays open", async () => {
    const body = JSON.stringify({
      message: { messageId: "lm-h1", role: "ROLE_USER", parts: [{ text: "x".repeat(5 * 1024 * 1024) }] },
    });
    for (let i = 0; i < 3; i++) {
      const res = await fetch(`${server.baseUrl}/lf.a2a.v1.A2AService/SendMessage`, {
        method: "POST",
        headers: { "content-type": "application/json", "a2a-version": "1.0" },
        body,
      });
      const error = (await res.json()) as { code: string; message: string };
      expect(error.code).toBe("resource_exhausted");
      expect(error.message).toMatch(/readMaxBytes 1048576/);
      expect(res.headers.get("connection")).not.toBe("close");
    }
  });
});
