// gRPC calls with one request message (unary and server streaming) are answered by Parley's own route
// (src/listen/grpc-route.ts), not by connect-node's streaming pipeline. These tests hold it to what connect-node answered before: the same messages, codes, details,
// encodings, deadlines and limits, checked on the wire (raw HTTP/2) and through connect-node's own client, with the
// Connect protocol (still connect-node's route) as the reference where both can answer.

import * as http2 from "node:http2";
import { gunzipSync, gzipSync } from "node:zlib";
import { create, fromBinary, toBinary, toJsonString } from "@bufbuild/protobuf";
import { Code, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import {
  A2AService,
  ErrorInfoSchema,
  GetTaskRequestSchema,
  SendMessageRequestSchema,
  SendMessageResponseSchema,
  StreamResponseSchema,
  SubscribeToTaskRequestSchema,
  TaskState,
} from "@parley/proto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { grpcEnvelope, type H2Answer, h2Post } from "../../serving/test/fixtures/h2-post.js";
import { percentDecoded } from "./fixtures/fuzz-responses.js";
import { failure, startTestServer, type TestServer, userMessage } from "./harness.js";

type Answer = H2Answer;

const sendPath = "/lf.a2a.v1.A2AService/SendMessage";

const post = (session: http2.ClientHttp2Session, path: string, headers: http2.OutgoingHttpHeaders, body: Uint8Array) =>
  h2Post(session, path, { "content-type": "application/grpc", "a2a-version": "1.0", ...headers }, body);
const envelope = grpcEnvelope;

const sendBytes = (text: string, contextId?: string) =>
  toBinary(SendMessageRequestSchema, create(SendMessageRequestSchema, { message: userMessage(text, { contextId }) }));

/** grpc-status and the decoded grpc-message, from trailers or a trailers-only answer's headers. */
function statusOf(answer: Answer): { code: number; message: string } {
  const fields = answer.trailers ?? answer.headers;
  return { code: Number(fields["grpc-status"]), message: percentDecoded(String(fields["grpc-message"] ?? "")) };
}

/** The one message of a unary answer's body. */
function messageOf(answer: Answer): { flags: number; data: Buffer } {
  expect(answer.body.length).toBeGreaterThanOrEqual(5);
  const length = answer.body.readUInt32BE(1);
  expect(answer.body.length).toBe(5 + length);
  return { flags: answer.body[0]!, data: answer.body.subarray(5) };
}

describe("gRPC calls on Parley's own route", () => {
  let server: TestServer;
  let session: http2.ClientHttp2Session;

  beforeAll(async () => {
    server = await startTestServer({
      agents: [
        { name: "echo", type: "echo", options: {} },
        { name: "slow", type: "echo", options: { delayMs: 300, chunks: 1 } },
        { name: "flood", type: "echo", options: { chunks: 400, repeat: 400, input: "text" } },
      ],
      limits: { subscriberBufferEvents: 16 },
    });
    session = http2.connect(server.baseUrl);
  });
  afterAll(async () => {
    session.close();
    await server.close();
  });

  it("answers a send in binary and in JSON, headers then the message then grpc-status 0 in the trailers", async () => {
    const binary = await post(session, sendPath, {}, envelope(sendBytes("hello")));
    expect(binary.headers[":status"]).toBe(200);
    expect(binary.headers["content-type"]).toBe("application/grpc+proto");
    expect(binary.headers["parley-request-id"]).toBeTruthy();
    expect(binary.trailers?.["grpc-status"]).toBe("0");
    const reply = fromBinary(SendMessageResponseSchema, messageOf(binary).data);
    expect(reply.payload.case).toBe("task");

    const json = toJsonString(
      SendMessageRequestSchema,
      create(SendMessageRequestSchema, { message: userMessage("j") }),
    );
    const answer = await post(
      session,
      sendPath,
      { "content-type": "application/grpc+json" },
      envelope(Buffer.from(json)),
    );
    expect(answer.headers["content-type"]).toBe("application/grpc+json");
    expect(answer.trailers?.["grpc-status"]).toBe("0");
    expect(JSON.parse(messageOf(answer).data.toString("utf8")).task.status.state).toBe("TASK_STATE_COMPLETED");
  });

  it("gives connect-node's gRPC client the same task the Connect route (connect-node's) gives", async () => {
    const grpc = server.a2a("grpc");
    const sent = await grpc.sendMessage({ message: userMessage("same over both") });
    expect(sent.payload.case).toBe("task");
    const taskId = sent.payload.case === "task" ? sent.payload.value.id : "";
    const overGrpc = await grpc.getTask({ id: taskId });
    const overConnect = await server.a2a("connect").getTask({ id: taskId });
    expect(toJsonString(A2AService.method.getTask.output, overGrpc)).toBe(
      toJsonString(A2AService.method.getTask.output, overConnect),
    );
    expect(overGrpc.status?.state).toBe(TaskState.COMPLETED);
  });

  it("answers with the bytes connect-node writes (gRPC-Web), for every part kind, unicode, large text, metadata", async () => {
    const getTaskPath = "/lf.a2a.v1.A2AService/GetTask";
    const metadata = { deep: { list: [null, "", "☃ 🎉", true, false, -1.5, [], [{ x: {} }]] }, empty: {} };
    const parts = [
      { content: { case: "text" as const, value: "" } },
      { content: { case: "text" as const, value: "ü ☃ 🎉" }, mediaType: "text/plain", metadata },
      // The echo agent takes text and JSON: the other kinds say they carry one of them.
      {
        content: { case: "raw" as const, value: Buffer.from('{"a":1}') },
        filename: "f.json",
        mediaType: "application/json",
      },
      { content: { case: "url" as const, value: "https://example.com/ü" }, mediaType: "text/plain" },
      { content: { case: "data" as const, value: { kind: { case: "structValue" as const, value: { fields: {} } } } } },
    ];
    const messages = [
      userMessage("y".repeat(200_000)),
      { ...userMessage("☃"), metadata, extensions: ["urn:x"], referenceTaskIds: [] },
      { ...userMessage("x"), parts: [...userMessage("x").parts, ...parts] },
    ];
    for (const message of messages) {
      const sent = await server.a2a("grpc").sendMessage({ message });
      const id = sent.payload.case === "task" ? sent.payload.value.id : "";
      expect(id).not.toBe("");
      const request = toBinary(GetTaskRequestSchema, create(GetTaskRequestSchema, { id }));
      const grpc = messageOf(await post(session, getTaskPath, {}, envelope(request))).data;
      // gRPC-Web is connect-node's: the answer's first envelope is the message, trailers follow in their own.
      const web = await post(session, getTaskPath, { "content-type": "application/grpc-web+proto" }, envelope(request));
      expect(web.body[0]).toBe(0);
      const library = web.body.subarray(5, 5 + web.body.readUInt32BE(1));
      const connect = await h2Post(session, getTaskPath, { "content-type": "application/proto" }, request);
      expect(grpc).toEqual(library);
      expect(connect.body).toEqual(library);
    }
  });

  it("answers a failed call trailers-only, with its typed details for the client", async () => {
    const raw = await post(
      session,
      "/lf.a2a.v1.A2AService/GetTask",
      {},
      envelope(toBinary(GetTaskRequestSchema, create(GetTaskRequestSchema, { id: "nope" }))),
    );
    expect(raw.trailers).toBeUndefined();
    expect(raw.headers["parley-request-id"]).toBeTruthy();
    expect(raw.body.length).toBe(0);
    expect(statusOf(raw)).toEqual({ code: Code.NotFound, message: 'task "nope" was not found' });
    expect(raw.headers["grpc-status-details-bin"]).toBeTruthy();

    const error = await failure(server.a2a("grpc").getTask({ id: "nope" }));
    expect(error.code).toBe(Code.NotFound);
    expect(error.findDetails(ErrorInfoSchema)[0]?.reason).toBe("TASK_NOT_FOUND");
  });

  it("takes a gzip request, and compresses an answer of 1 KiB or more for a client that accepts gzip", async () => {
    const zipped = await post(session, sendPath, { "grpc-encoding": "gzip" }, envelope(gzipSync(sendBytes("zip")), 1));
    expect(zipped.trailers?.["grpc-status"]).toBe("0");
    expect(zipped.headers["grpc-encoding"]).toBe("gzip");

    const long = "x".repeat(3_000);
    const answer = await post(session, sendPath, { "grpc-accept-encoding": "gzip" }, envelope(sendBytes(long)));
    expect(answer.headers["grpc-encoding"]).toBe("gzip");
    const { flags, data } = messageOf(answer);
    expect(flags).toBe(1);
    const reply = fromBinary(SendMessageResponseSchema, gunzipSync(data));
    expect(JSON.stringify(toJsonString(SendMessageResponseSchema, reply))).toContain(long);

    const short = await post(session, sendPath, { "grpc-accept-encoding": "gzip" }, envelope(sendBytes("short")));
    expect(messageOf(short).flags).toBe(0);

    // connect-node's client with gzip both ways.
    const client = createClient(
      A2AService,
      createGrpcTransport({ baseUrl: server.baseUrl, sendCompression: undefined, useBinaryFormat: true }),
    );
    const sent = await client.sendMessage({ message: userMessage(long) }, { headers: { "a2a-version": "1.0" } });
    expect(sent.payload.case).toBe("task");
  });

  it("refuses what it cannot take with the code and message connect-es gives, naming what was wrong", async () => {
    const cases: [string, http2.OutgoingHttpHeaders, Uint8Array, Code, string][] = [
      [
        "unknown encoding",
        { "grpc-encoding": "snappy" },
        envelope(sendBytes("x"), 1),
        Code.Unimplemented,
        'unknown compression "snappy": supported encodings are gzip,br',
      ],
      [
        "compressed without an encoding",
        {},
        envelope(sendBytes("x"), 1),
        Code.InvalidArgument,
        "the request is not a valid lf.a2a.v1.SendMessageRequest: received compressed envelope, but do not know how to decompress",
      ],
      [
        "not protobuf",
        {},
        envelope(Buffer.from([0x0a, 0xff, 0xff])),
        Code.InvalidArgument,
        "the request is not a valid lf.a2a.v1.SendMessageRequest: premature EOF",
      ],
      ["no message", {}, Buffer.alloc(0), Code.Unimplemented, "protocol error: missing input message for unary method"],
      [
        "two messages",
        {},
        Buffer.concat([envelope(sendBytes("a")), envelope(sendBytes("b"))]),
        Code.Unimplemented,
        "protocol error: received extra input message for unary method",
      ],
      [
        "a cut envelope",
        {},
        envelope(sendBytes("a")).subarray(0, 10),
        Code.InvalidArgument,
        "protocol error: incomplete envelope",
      ],
      [
        "a bad deadline",
        { "grpc-timeout": "soon" },
        envelope(sendBytes("t")),
        Code.InvalidArgument,
        "protocol error: invalid grpc timeout value: soon",
      ],
      [
        "an oversize message",
        {},
        envelope(Buffer.alloc(2 * 1024 * 1024, 1)),
        Code.ResourceExhausted,
        "message size 2097152 is larger than configured readMaxBytes 1048576",
      ],
    ];
    for (const [what, headers, body, code, message] of cases) {
      const answer = await post(session, sendPath, headers, body);
      expect({ what, ...statusOf(answer) }).toEqual({ what, code, message });
    }
    // The refused encoding is named in the answer, as gRPC's compression spec asks.
    const refused = await post(session, sendPath, { "grpc-encoding": "snappy" }, envelope(sendBytes("x"), 1));
    expect(refused.headers["grpc-accept-encoding"]).toBe("gzip,br");
  });

  it("ends a blocking send at its deadline with DEADLINE_EXCEEDED, as the Connect route does, and the task runs on", async () => {
    const started = Date.now();
    const grpc = await post(
      session,
      sendPath,
      { "grpc-timeout": "100m", "parley-agent": "slow" },
      envelope(sendBytes("late")),
    );
    expect(Date.now() - started).toBeLessThan(280);
    const { code, message } = statusOf(grpc);
    expect(code).toBe(Code.DeadlineExceeded);
    expect(message).toMatch(/^the call's deadline passed before task "[^"]+" ended; the task runs on/);
    const taskId = /task "([^"]+)"/.exec(message)?.[1] ?? "";

    const connect = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const stream = session.request({
        ":method": "POST",
        ":path": sendPath,
        "content-type": "application/proto",
        "connect-protocol-version": "1",
        "connect-timeout-ms": "100",
        "a2a-version": "1.0",
        "parley-agent": "slow",
      });
      const chunks: Buffer[] = [];
      let status = 0;
      stream.on("response", (h) => {
        status = Number(h[":status"]);
      });
      stream.on("data", (c: Buffer) => chunks.push(c));
      stream.on("end", () => resolve({ status, body: Buffer.concat(chunks).toString("utf8") }));
      stream.on("error", reject);
      stream.end(sendBytes("late over connect"));
    });
    expect(connect.status).toBe(504);
    expect(JSON.parse(connect.body).code).toBe("deadline_exceeded");

    // The deadline ended the wait, not the task.
    await new Promise((resolve) => setTimeout(resolve, 400));
    const later = await server.a2a("grpc").getTask({ id: taskId });
    expect(later.status?.state).toBe(TaskState.COMPLETED);
  });

  it("ends a stream at its deadline with DEADLINE_EXCEEDED naming the task, and the task runs on", async () => {
    const answer = await post(
      session,
      "/lf.a2a.v1.A2AService/SendStreamingMessage",
      { "grpc-timeout": "150m", "parley-agent": "slow" },
      envelope(sendBytes("late stream")),
    );
    expect(answer.headers[":status"]).toBe(200);
    const { code, message } = statusOf(answer);
    expect(code).toBe(Code.DeadlineExceeded);
    expect(message).toMatch(/^the call's deadline passed before task "[^"]+" ended; the task runs on/);
    const taskId = /task "([^"]+)"/.exec(message)?.[1] ?? "";
    await new Promise((resolve) => setTimeout(resolve, 400));
    const later = await server.a2a("grpc").getTask({ id: taskId });
    expect(later.status?.state).toBe(TaskState.COMPLETED);
  });

  it("ends a SubscribeToTask at its deadline with DEADLINE_EXCEEDED naming the task, not as if the task had ended", async () => {
    const sent = await server.a2a("grpc", { "parley-agent": "slow" }).sendMessage({
      message: userMessage("follow me"),
      configuration: { returnImmediately: true },
    });
    const taskId = sent.payload.case === "task" ? sent.payload.value.id : "";
    const answer = await post(
      session,
      "/lf.a2a.v1.A2AService/SubscribeToTask",
      { "grpc-timeout": "100m" },
      envelope(toBinary(SubscribeToTaskRequestSchema, create(SubscribeToTaskRequestSchema, { id: taskId }))),
    );
    const { code, message } = statusOf(answer);
    expect(code).toBe(Code.DeadlineExceeded);
    expect(message).toBe(
      `the call's deadline passed before task "${taskId}" ended; the task runs on (GetTask or SubscribeToTask reads it)`,
    );
  });

  it("streams a send: the headers with the first event, one message per event, grpc-status 0; as the Connect route", async () => {
    const answer = await post(
      session,
      "/lf.a2a.v1.A2AService/SendStreamingMessage",
      {},
      envelope(sendBytes("stream me")),
    );
    expect(answer.headers[":status"]).toBe(200);
    expect(answer.headers["content-type"]).toBe("application/grpc+proto");
    expect(Number(answer.headers["parley-stream-start"])).toBeGreaterThanOrEqual(0);
    expect(answer.trailers?.["grpc-status"]).toBe("0");
    const cases: string[] = [];
    for (let at = 0; at < answer.body.length; ) {
      expect(answer.body[at]).toBe(0);
      const length = answer.body.readUInt32BE(at + 1);
      cases.push(fromBinary(StreamResponseSchema, answer.body.subarray(at + 5, at + 5 + length)).payload.case ?? "");
      at += 5 + length;
    }
    const overConnect: string[] = [];
    for await (const event of server.a2a("connect").sendStreamingMessage({ message: userMessage("stream me") })) {
      overConnect.push(event.payload.case ?? "");
    }
    expect(cases).toEqual(overConnect);
    expect(cases[0]).toBe("task");
    expect(cases.filter((c) => c === "artifactUpdate").length).toBeGreaterThan(1);
    expect(cases.at(-1)).toBe("statusUpdate");
  });

  it("answers a stream refused before its first event trailers-only, with the handler's error", async () => {
    const answer = await post(
      session,
      "/lf.a2a.v1.A2AService/SendStreamingMessage",
      {},
      envelope(toBinary(SendMessageRequestSchema, create(SendMessageRequestSchema, {}))),
    );
    expect(answer.trailers).toBeUndefined();
    expect(answer.body.length).toBe(0);
    expect(statusOf(answer)).toEqual({ code: Code.InvalidArgument, message: "message is required" });
  });

  it("cuts a stream whose client stops reading, with the limit's error in its trailers, once its follower falls behind", async () => {
    const stream = session.request({
      ":method": "POST",
      ":path": "/lf.a2a.v1.A2AService/SendStreamingMessage",
      "content-type": "application/grpc",
      te: "trailers",
      "a2a-version": "1.0",
      "parley-agent": "flood",
    });
    let trailers: http2.IncomingHttpHeaders | undefined;
    stream.on("trailers", (t) => {
      trailers = t;
    });
    stream.end(envelope(sendBytes("x".repeat(200))));
    // Nothing is read while the agent streams 400 chunks of 200 bytes: HTTP/2 flow control fills, the route waits
    // for 'drain', and the run's follower falls more than subscriberBufferEvents (16) behind.
    stream.pause();
    await new Promise((resolve) => setTimeout(resolve, 700));
    const chunks: Buffer[] = [];
    stream.on("data", (c: Buffer) => chunks.push(c));
    await new Promise((resolve) => {
      stream.on("close", resolve);
      stream.resume();
    });
    let events = 0;
    const body = Buffer.concat(chunks);
    for (let at = 0; at < body.length; at += 5 + body.readUInt32BE(at + 1)) events++;
    expect(events).toBeGreaterThan(0);
    expect(events).toBeLessThan(402);
    expect(Number(trailers?.["grpc-status"])).toBe(Code.ResourceExhausted);
    expect(percentDecoded(String(trailers?.["grpc-message"]))).toMatch(/fell \d+ events behind task .* \(limit 16\)/);
  });

  it("leaves health checks and unknown paths to connect-node", async () => {
    const unknown = await post(session, "/lf.a2a.v1.A2AService/Nope", {}, envelope(sendBytes("x")));
    expect(unknown.headers[":status"]).toBe(404);
    const health = await post(session, "/grpc.health.v1.Health/Check", {}, envelope(new Uint8Array(0)));
    expect(health.trailers?.["grpc-status"]).toBe("0");
  });
});
