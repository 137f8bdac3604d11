// Unknown fields reaching the server directly: Connect's JSON codec ignores keys it does not know, and the
// binary codecs do not keep unknown field numbers, so neither is stored nor echoed back in the task.

import * as http2 from "node:http2";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import { SendMessageRequestSchema, SendMessageResponseSchema, type Task } from "@parley/proto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, type TestServer, userMessage } from "./harness.js";

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer();
});
afterAll(async () => {
  await server?.close();
});

/** One Connect unary POST over h2c, as a peer of a newer version would send it. */
async function post(path: string, contentType: string, body: Uint8Array): Promise<{ status: number; body: Buffer }> {
  const session = http2.connect(server.baseUrl);
  try {
    return await new Promise((resolve, reject) => {
      const req = session.request({
        ":method": "POST",
        ":path": path,
        "content-type": contentType,
        "a2a-version": "1.0",
        "connect-protocol-version": "1",
      });
      const chunks: Buffer[] = [];
      let status = 0;
      req.on("response", (headers) => {
        status = Number(headers[":status"]);
      });
      req.on("data", (chunk: Buffer) => chunks.push(chunk));
      req.on("end", () => resolve({ status, body: Buffer.concat(chunks) }));
      req.on("error", reject);
      req.end(body);
    });
  } finally {
    session.close();
  }
}

describe("unknown fields sent to the server directly", () => {
  it("Connect JSON: accepted, dropped, not echoed in the task", async () => {
    const body = {
      message: {
        messageId: crypto.randomUUID(),
        role: "ROLE_USER",
        parts: [{ text: "from a newer peer", futurePartField: 1 }],
        futureMessageField: { nested: true },
      },
      configuration: { futureConfigField: "x" },
      futureRequestField: [1, 2],
    };
    const res = await post(
      "/lf.a2a.v1.A2AService/SendMessage",
      "application/json",
      new TextEncoder().encode(JSON.stringify(body)),
    );
    expect(res.status).toBe(200);
    const text = res.body.toString("utf8");
    expect(text).not.toContain("future");
    const { task } = JSON.parse(text) as { task: { id: string } };
    const stored = await server.a2a("connect").getTask({ id: task.id });
    expect(stored.history[0]?.parts[0]?.content.value).toBe("from a newer peer");
  });

  it("Connect JSON: a wrong type in a known field is still refused, naming the field", async () => {
    const res = await post(
      "/lf.a2a.v1.A2AService/GetTask",
      "application/json",
      new TextEncoder().encode(JSON.stringify({ id: 42, futureField: true })),
    );
    expect(res.status).toBe(400);
    expect(res.body.toString("utf8")).toContain("GetTaskRequest.id");
  });

  it("binary: an unknown field number in the message is not stored or echoed", async () => {
    const request = create(SendMessageRequestSchema, { message: userMessage("binary from a newer peer") });
    // Message field 99 (a varint) does not exist in this version of the contract.
    const message = toBinary(SendMessageRequestSchema, request);
    const unknown = new BinaryWriter().tag(99, WireType.Varint).uint32(7).finish();
    // SendMessageRequest.message is field 2... written again with the unknown field appended: protobuf merges it.
    const extra = new BinaryWriter().tag(2, WireType.LengthDelimited).bytes(unknown).finish();
    const res = await post("/lf.a2a.v1.A2AService/SendMessage", "application/proto", concat(message, extra));
    expect(res.status).toBe(200);
    const answer = fromBinary(SendMessageResponseSchema, res.body);
    expect(answer.payload.case).toBe("task");
    const echoed = answer.payload.value as Task;
    expect(echoed.history[0]?.$unknown).toBeUndefined();
    const stored = await server.a2a("grpc").getTask({ id: echoed.id });
    expect(stored.history[0]?.parts[0]?.content.value).toBe("binary from a newer peer");
    expect(stored.history[0]?.$unknown).toBeUndefined();
  });
});

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  const out = new Uint8Array(a.length + b.length);
  out.set(a);
  out.set(b, a.length);
  return out;
}
