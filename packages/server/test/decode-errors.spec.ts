// Issue 20 item 8: requests the server cannot decode are the caller's mistake
// and answer INVALID_ARGUMENT on every protocol, naming what was wrong, never
// INTERNAL / HTTP 500; invalid UTF-8 is refused the same way everywhere and
// nothing of it is stored. Raw HTTP/2 requests, since a real client would not
// send these bytes.

import * as http2 from "node:http2";
import { create, type JsonValue, toBinary } from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";
import { Role, SendMessageRequestSchema } from "@parley/proto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { grpcEnvelope, type H2Answer, h2Post } from "../../serving/test/fixtures/h2-post.js";
import { percentDecoded } from "./fixtures/fuzz-responses.js";
import { startTestServer, type TestServer } from "./harness.js";

type Answer = H2Answer;

const post = (session: http2.ClientHttp2Session, path: string, contentType: string, body: Uint8Array) =>
  h2Post(session, path, { "content-type": contentType }, body);
const envelope = grpcEnvelope;

/** grpc-status and the decoded grpc-message, from trailers (or a trailers-only answer's headers). */
function grpcStatus(answer: Answer): { code: number; message: string } {
  const code = answer.trailers?.["grpc-status"] ?? answer.headers["grpc-status"];
  const message = answer.trailers?.["grpc-message"] ?? answer.headers["grpc-message"] ?? "";
  return { code: Number(code), message: percentDecoded(String(message)) };
}

/** The gRPC-Web trailer frame at the end of the body. */
function grpcWebStatus(answer: Answer): { code: number; message: string } {
  for (let at = 0; at + 5 <= answer.body.length; ) {
    const flags = answer.body[at]!;
    const length = answer.body.readUInt32BE(at + 1);
    const data = answer.body.subarray(at + 5, at + 5 + length).toString();
    at += 5 + length;
    if (flags & 0x80) {
      const fields = new Map(
        data
          .split("\r\n")
          .filter(Boolean)
          .map((line) => [line.slice(0, line.indexOf(":")).trim(), line.slice(line.indexOf(":") + 1).trim()]),
      );
      return { code: Number(fields.get("grpc-status")), message: percentDecoded(fields.get("grpc-message") ?? "") };
    }
  }
  throw new Error("no gRPC-Web trailer frame");
}

const garbage = Buffer.from("\x0a\xff\xff\xff\xff\x0frandom bytes, not a message");

/** A SendMessageRequest whose message metadata nests a Struct `depth` levels deep. */
function deepStruct(depth: number): Uint8Array {
  // Built value by value: protobuf-es's encoder does not bound depth, its decoder does (100 messages).
  let value: JsonValue = "leaf";
  for (let i = 0; i < depth; i++) value = { nested: value };
  return toBinary(
    SendMessageRequestSchema,
    create(SendMessageRequestSchema, {
      message: {
        messageId: `deep-${depth}`,
        role: Role.USER,
        parts: [{ content: { case: "text", value: "hi" } }],
        metadata: { deep: value },
      },
    }),
  );
}

/** A SendMessageRequest whose text part holds the bytes FF C3 28 (not UTF-8). */
function invalidUtf8Text(contextId: string): Uint8Array {
  const bytes = Buffer.from(
    toBinary(
      SendMessageRequestSchema,
      create(SendMessageRequestSchema, {
        message: {
          messageId: contextId,
          contextId,
          role: Role.USER,
          parts: [{ content: { case: "text", value: "a@@@b" } }],
        },
      }),
    ),
  );
  const at = bytes.indexOf("@@@");
  bytes.set([0xff, 0xc3, 0x28], at);
  return bytes;
}

const sendPath = "/lf.a2a.v1.A2AService/SendMessage";
const streamPath = "/lf.a2a.v1.A2AService/SendStreamingMessage";

describe("undecodable requests answer INVALID_ARGUMENT on every protocol", () => {
  let server: TestServer;
  let session: http2.ClientHttp2Session;

  beforeAll(async () => {
    server = await startTestServer();
    session = http2.connect(server.baseUrl);
    session.on("error", () => {});
  });
  afterAll(async () => {
    session.close();
    await server.close();
  });

  it("gRPC: malformed bytes, a 101-deep Struct and invalid UTF-8, unary and streaming", async () => {
    const cases: [string, string, Uint8Array, RegExp][] = [
      ["malformed", sendPath, garbage, /not a valid lf\.a2a\.v1\.SendMessageRequest: /],
      ["malformed, streaming", streamPath, garbage, /not a valid lf\.a2a\.v1\.SendMessageRequest: /],
      ["deep Struct", sendPath, deepStruct(101), /maximum recursion depth of 100/],
      ["invalid UTF-8", sendPath, invalidUtf8Text("grpc-utf8"), /a string field is not valid UTF-8/],
      ["invalid UTF-8, streaming", streamPath, invalidUtf8Text("grpc-utf8-s"), /not valid UTF-8/],
    ];
    for (const [name, path, payload, message] of cases) {
      const answer = await post(session, path, "application/grpc", envelope(payload));
      const status = grpcStatus(answer);
      expect(status.code, `${name}: ${status.message}`).toBe(Code.InvalidArgument);
      expect(status.message, name).toMatch(message);
    }
    // Nesting as such is not refused: a shallow Struct decodes and the send succeeds.
    const shallow = grpcStatus(await post(session, sendPath, "application/grpc", envelope(deepStruct(5))));
    expect(shallow.code, shallow.message).toBe(0);
  });

  it("gRPC: an envelope flagged compressed without an encoding is the caller's mistake too", async () => {
    const answer = await post(session, sendPath, "application/grpc", envelope(garbage, 1));
    expect(grpcStatus(answer).code).toBe(Code.InvalidArgument);
  });

  it("gRPC-Web: malformed bytes answer INVALID_ARGUMENT in the trailer frame", async () => {
    const answer = await post(session, sendPath, "application/grpc-web+proto", envelope(garbage));
    const status = grpcWebStatus(answer);
    expect(status.code, status.message).toBe(Code.InvalidArgument);
    expect(status.message).toMatch(/not a valid lf\.a2a\.v1\.SendMessageRequest/);
  });

  it("gRPC-Web and Connect streaming: a malformed streaming request ends with invalid_argument", async () => {
    const web = grpcWebStatus(await post(session, streamPath, "application/grpc-web+proto", envelope(garbage)));
    expect(web.code, web.message).toBe(Code.InvalidArgument);
    const connect = await post(session, streamPath, "application/connect+proto", envelope(garbage));
    // The Connect streaming protocol ends a stream with an end-stream frame (flag 2) holding the error as JSON.
    expect(connect.body[0]).toBe(2);
    const end = JSON.parse(connect.body.subarray(5).toString()) as { error?: { code: string; message: string } };
    expect(end.error?.code).toBe("invalid_argument");
    expect(end.error?.message).toMatch(/not a valid lf\.a2a\.v1\.SendMessageRequest/);
  });

  it("Connect proto: random bytes answer 400 invalid_argument", async () => {
    const answer = await post(session, sendPath, "application/proto", garbage);
    expect(answer.status).toBe(400);
    const error = JSON.parse(answer.body.toString()) as { code: string; message: string };
    expect(error.code).toBe("invalid_argument");
    expect(error.message).toMatch(/not a valid lf\.a2a\.v1\.SendMessageRequest/);
    const utf8 = await post(session, sendPath, "application/proto", invalidUtf8Text("connect-proto-utf8"));
    expect([utf8.status, JSON.parse(utf8.body.toString()).code]).toEqual([400, "invalid_argument"]);
  });

  it("Connect JSON: FF C3 28 in a text part answers invalid_argument and nothing is stored", async () => {
    const contextId = `connect-json-utf8-${crypto.randomUUID()}`;
    const body = Buffer.concat([
      Buffer.from(
        `{"message":{"messageId":"${contextId}","contextId":"${contextId}","role":"ROLE_USER","parts":[{"text":"a`,
      ),
      Buffer.from([0xff, 0xc3, 0x28]),
      Buffer.from('"}]}}'),
    ]);
    const answer = await post(session, sendPath, "application/json", body);
    expect(answer.status).toBe(400);
    const error = JSON.parse(answer.body.toString()) as { code: string; message: string };
    expect(error.code).toBe("invalid_argument");
    expect(error.message).toContain("not valid UTF-8");
    expect(await server.parley.store.getThread({ tenant: "default", contextId })).toBeUndefined();
    // gRPC with the JSON codec reads through the same decoder.
    const grpcJson = grpcStatus(await post(session, sendPath, "application/grpc+json", envelope(body)));
    expect(grpcJson.code).toBe(Code.InvalidArgument);
    expect(await server.parley.store.getThread({ tenant: "default", contextId })).toBeUndefined();
    // The same bytes over binary protobuf: refused, nothing stored.
    await post(session, sendPath, "application/grpc", envelope(invalidUtf8Text(contextId)));
    expect(await server.parley.store.getThread({ tenant: "default", contextId })).toBeUndefined();
  });

  it("still serves well-formed requests on the same connection", async () => {
    const ok = toBinary(
      SendMessageRequestSchema,
      create(SendMessageRequestSchema, {
        message: { messageId: "fine", role: Role.USER, parts: [{ content: { case: "text", value: "fine" } }] },
      }),
    );
    expect(grpcStatus(await post(session, sendPath, "application/grpc", envelope(ok))).code).toBe(0);
    expect((await post(session, sendPath, "application/proto", ok)).status).toBe(200);
  });
});
