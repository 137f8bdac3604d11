// gRPC error text reaches a grpc-js client as the server wrote it. grpc-message is percent-encoded as gRPC's HTTP/2
// protocol defines it (bytes outside printable ASCII, and "%"); grpc-js decodes it with decodeURI, which left the
// escapes of encodeURIComponent's wider set in place (`context %22busy%22 is busy%3A ...`).

import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";
import * as grpc from "@grpc/grpc-js";
import { SendMessageRequestSchema, SendMessageResponseSchema } from "@parley/proto";
import { percentEncodeGrpcMessage } from "@parley/serving";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { failure, sendRequest, startTestServer, type TestServer } from "./harness.js";

describe("grpc-message", () => {
  it("is percent-encoded only where gRPC's protocol asks: bytes outside 0x20-0x7E, and %", () => {
    expect(percentEncodeGrpcMessage('context "a, b" is busy: task t-1 (50% done)')).toBe(
      'context "a, b" is busy: task t-1 (50%25 done)',
    );
    expect(percentEncodeGrpcMessage("café ☃\nnext")).toBe("caf%C3%A9 %E2%98%83%0Anext");
    expect(decodeURIComponent(percentEncodeGrpcMessage("x: ☃ 100% \t"))).toBe("x: ☃ 100% \t");
  });
});

describe("a gRPC error seen by @grpc/grpc-js", () => {
  let server: TestServer;
  let client: grpc.Client;
  beforeAll(async () => {
    // A slow echo, so the first send still holds its context when the second arrives.
    server = await startTestServer({ agents: [{ name: "echo", type: "echo", options: { delayMs: 500, chunks: 60 } }] });
    client = new grpc.Client(server.address, grpc.credentials.createInsecure());
  });
  afterAll(async () => {
    client.close();
    await server.close();
  });

  /** Call metadata that asks for A2A 1.0, as every 1.0 client sends it. */
  const version = () => {
    const metadata = new grpc.Metadata();
    metadata.set("a2a-version", "1.0");
    return metadata;
  };
  const send = (contextId: string, text: string) =>
    new Promise<{ error?: grpc.ServiceError; kind?: string }>((resolve) => {
      client.makeUnaryRequest(
        "/lf.a2a.v1.A2AService/SendMessage",
        (m: Uint8Array) => Buffer.from(m),
        (b: Buffer) => fromBinary(SendMessageResponseSchema, b),
        toBinary(SendMessageRequestSchema, create(SendMessageRequestSchema, sendRequest(contextId, text) as never)),
        version(),
        (error, response) => resolve(error ? { error } : { kind: response?.payload.case }),
      );
    });

  it("reads the busy refusal in plain text, the same text a Connect client reads", async () => {
    const contextId = 'busy: "café ☃", 100%';
    // A stream's first event is its task: from then on the run holds the context.
    const stream = server.a2a("grpc").sendStreamingMessage(sendRequest(contextId, "first"))[Symbol.asyncIterator]();
    const first = await stream.next();
    const taskId = first.value?.payload.case === "task" ? first.value.payload.value.id : undefined;
    expect(taskId, "the first event is the running task").toBeDefined();
    const [viaGrpcJs, viaConnect] = await Promise.all([
      send(contextId, "second"),
      failure(server.a2a("grpc").sendMessage(sendRequest(contextId, "third"))),
    ]);
    expect(viaGrpcJs.error?.code).toBe(grpc.status.ABORTED);
    expect(viaConnect.code).toBe(Code.Aborted);
    expect(viaGrpcJs.error?.details).toBe(viaConnect.rawMessage);
    expect(viaGrpcJs.error?.details).toContain(`context ${JSON.stringify(contextId)} is busy`);
    expect(viaGrpcJs.error?.details).not.toMatch(/%[0-9A-F]{2}/);
    // The first send's agent would take 30 s: cancel it.
    await server.a2a("grpc").cancelTask({ id: taskId! });
    await stream.return?.();
  });
});
