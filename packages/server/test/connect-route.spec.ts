// Connect calls with one request message (unary and server streaming) over HTTP/2 are answered by Parley's own route
// (src/listen/connect-route.ts), not by connect-node. connect-node still answers Connect over HTTP/1.1 on the same
// port, so every case here is sent both ways and the two answers must match on the wire: status, content type,
// encodings, error JSON, messages and end-stream message (ids and times aside).

import * as http from "node:http";
import * as http2 from "node:http2";
import { gunzipSync, gzipSync } from "node:zlib";
import { create, fromBinary, type JsonValue, toBinary, toJson, toJsonString } from "@bufbuild/protobuf";
import {
  GetTaskRequestSchema,
  SendMessageRequestSchema,
  SendMessageResponseSchema,
  StreamResponseSchema,
  SubscribeToTaskRequestSchema,
} from "@parley/proto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { grpcEnvelope as envelope, h2Post } from "../../serving/test/fixtures/h2-post.js";
import { startTestServer, type TestServer, userMessage } from "./harness.js";

const a2a = "/lf.a2a.v1.A2AService";

interface Answer {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly body: Buffer;
}

/** The same request over HTTP/1.1, which connect-node answers. */
function h1Post(baseUrl: string, path: string, headers: Record<string, string>, body: Uint8Array): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const sent = { "a2a-version": "1.0", ...headers };
    const req = http.request(`${baseUrl}${path}`, { method: "POST", headers: sent, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end(body);
  });
}

/** Ids and times differ between two sends; everything else must not. */
function scrub(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(scrub);
  if (value && typeof value === "object") {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) {
      out[k] = ["id", "contextId", "taskId", "messageId", "timestamp", "parley-request-id"].includes(k)
        ? "*"
        : scrub(v);
    }
    return out;
  }
  // An error that names its task (a missed deadline) names a different one on each send.
  if (typeof value === "string") return value.replace(/task "[^"]+"/g, 'task "*"');
  return value;
}

const binaryOf = (data: Buffer, encoding: unknown) => (encoding === "gzip" ? gunzipSync(data) : data);

/** A unary answer as the client reads it: status, content type, encoding, `trailer-` headers and the decoded body. */
function unaryView(answer: Answer, proto: boolean) {
  const encoding = answer.headers["content-encoding"];
  const bytes = binaryOf(answer.body, encoding);
  const json = String(answer.headers["content-type"]).startsWith("application/json");
  const trailers = Object.keys(answer.headers).filter((k) => k.startsWith("trailer-"));
  return {
    status: answer.status,
    contentType: answer.headers["content-type"],
    encoding,
    trailers,
    body: scrub(
      json || !proto
        ? JSON.parse(bytes.toString())
        : toJson(SendMessageResponseSchema, fromBinary(SendMessageResponseSchema, bytes)),
    ),
  };
}

/** A stream's envelopes: each message decoded, then the end-stream message's JSON. */
function streamView(answer: Answer, proto: boolean) {
  const encoding = answer.headers["connect-content-encoding"];
  const envelopes: { flags: number; body: unknown }[] = [];
  let offset = 0;
  while (offset < answer.body.length) {
    const flags = answer.body[offset]!;
    const length = answer.body.readUInt32BE(offset + 1);
    let data = answer.body.subarray(offset + 5, offset + 5 + length);
    offset += 5 + length;
    if (flags & 1) data = gunzipSync(data);
    const end = (flags & 2) === 2;
    const body: JsonValue =
      end || !proto
        ? JSON.parse(data.toString())
        : toJson(StreamResponseSchema, fromBinary(StreamResponseSchema, data));
    envelopes.push({ flags: flags & 2, body: scrub(body) });
  }
  return { status: answer.status, contentType: answer.headers["content-type"], encoding, envelopes };
}

const sendJson = (text: string) =>
  Buffer.from(toJsonString(SendMessageRequestSchema, create(SendMessageRequestSchema, { message: userMessage(text) })));
const sendProto = (text: string) =>
  toBinary(SendMessageRequestSchema, create(SendMessageRequestSchema, { message: userMessage(text) }));

describe("Connect calls on Parley's own route (HTTP/2) answer as connect-node does (HTTP/1.1)", () => {
  let server: TestServer;
  let session: http2.ClientHttp2Session;

  beforeAll(async () => {
    server = await startTestServer({
      agents: [
        { name: "echo", type: "echo", options: {} },
        { name: "slow", type: "echo", options: { delayMs: 400, chunks: 1 } },
      ],
    });
    session = http2.connect(server.baseUrl);
  });
  afterAll(async () => {
    session.close();
    await server.close();
  });

  /** Sends the request made by `body()` over both protocols (a fresh body each, so no send is a retry). */
  async function both(path: string, given: Record<string, string>, body: () => Uint8Array) {
    // The A2A service's gRPC/Connect interface speaks 1.0 only (no header means 0.3).
    const headers = { "a2a-version": "1.0", ...given };
    const viaNode = await h1Post(server.baseUrl, path, headers, body());
    const viaRoute = await h2Post(session, path, headers, body());
    return { viaNode, viaRoute: { status: viaRoute.status, headers: viaRoute.headers, body: viaRoute.body } };
  }

  const unaryCases: [string, string, Record<string, string>, () => Uint8Array, number][] = [
    ["a JSON send", "SendMessage", { "content-type": "application/json" }, () => sendJson("hello"), 200],
    ["a binary send", "SendMessage", { "content-type": "application/proto" }, () => sendProto("hello"), 200],
    [
      "a JSON send with an unknown field (ignored)",
      "SendMessage",
      { "content-type": "application/json; charset=utf-8" },
      () => Buffer.from(JSON.stringify({ ...JSON.parse(sendJson("x").toString()), futureField: 1 })),
      200,
    ],
    [
      "a gzipped send, answered gzipped",
      "SendMessage",
      { "content-type": "application/json", "content-encoding": "gzip", "accept-encoding": "gzip" },
      () => gzipSync(sendJson("y".repeat(3000))),
      200,
    ],
    [
      "an unknown task",
      "GetTask",
      { "content-type": "application/json" },
      () => Buffer.from(toJsonString(GetTaskRequestSchema, create(GetTaskRequestSchema, { id: "no-such-task" }))),
      404,
    ],
    ["JSON that does not parse", "SendMessage", { "content-type": "application/json" }, () => Buffer.from("{"), 400],
    [
      "protobuf that does not parse",
      "SendMessage",
      { "content-type": "application/proto" },
      () => Buffer.from([0x0a, 0xff]),
      400,
    ],
    [
      "an encoding the server does not take",
      "SendMessage",
      { "content-type": "application/json", "content-encoding": "zstd" },
      () => sendJson("z"),
      501,
    ],
    [
      "a timeout that is not a number",
      "SendMessage",
      { "content-type": "application/json", "connect-timeout-ms": "soon" },
      () => sendJson("t"),
      400,
    ],
  ];

  it.each(unaryCases)("unary: %s", async (_name, method, headers, body, status) => {
    const proto = headers["content-type"] === "application/proto";
    const { viaNode, viaRoute } = await both(`${a2a}/${method}`, headers, body);
    expect(viaNode.status).toBe(status);
    expect(unaryView(viaRoute, proto)).toEqual(unaryView(viaNode, proto));
    expect(viaRoute.headers["parley-request-id"]).toBeTruthy();
    expect(Number(viaRoute.headers["content-length"])).toBe(viaRoute.body.length);
  });

  it("unary: a blocking send past its deadline answers 504 naming the task", async () => {
    const body = () => sendJson("wait");
    const headers = { "content-type": "application/json", "connect-timeout-ms": "50", "parley-agent": "slow" };
    const viaNode = await h1Post(server.baseUrl, `${a2a}/SendMessage`, headers, body());
    const viaRoute = await h2Post(session, `${a2a}/SendMessage`, headers, body());
    expect(viaNode.status).toBe(504);
    const view = (a: Answer) => ({ ...unaryView(a, false), body: undefined });
    expect(view(viaRoute as Answer)).toEqual(view(viaNode));
    const error = JSON.parse(viaRoute.body.toString()) as { code: string; message: string };
    expect(error.code).toBe("deadline_exceeded");
    expect(error.message).toMatch(/task/);
  });

  const streamCases: [string, string, Record<string, string>, () => Uint8Array][] = [
    [
      "a JSON stream",
      "SendStreamingMessage",
      { "content-type": "application/connect+json" },
      () => envelope(sendJson("stream me")),
    ],
    [
      "a binary stream",
      "SendStreamingMessage",
      { "content-type": "application/connect+proto" },
      () => envelope(sendProto("stream me")),
    ],
    [
      "a gzipped request, answered gzipped",
      "SendStreamingMessage",
      {
        "content-type": "application/connect+json",
        "connect-content-encoding": "gzip",
        "connect-accept-encoding": "gzip",
      },
      () => envelope(gzipSync(sendJson("z".repeat(2000))), 1),
    ],
    [
      "an unknown task (the error in the end-stream message)",
      "SubscribeToTask",
      { "content-type": "application/connect+json" },
      () =>
        envelope(
          Buffer.from(
            toJsonString(SubscribeToTaskRequestSchema, create(SubscribeToTaskRequestSchema, { id: "no-such" })),
          ),
        ),
    ],
    [
      "no request message",
      "SendStreamingMessage",
      { "content-type": "application/connect+json" },
      () => Buffer.alloc(0),
    ],
    [
      "two request messages",
      "SendStreamingMessage",
      { "content-type": "application/connect+json" },
      () => Buffer.concat([envelope(sendJson("a")), envelope(sendJson("b"))]),
    ],
    [
      "an incomplete envelope",
      "SendStreamingMessage",
      { "content-type": "application/connect+json" },
      () => envelope(sendJson("cut")).subarray(0, 12),
    ],
    [
      "a compressed envelope without an encoding",
      "SendStreamingMessage",
      { "content-type": "application/connect+json" },
      () => envelope(gzipSync(sendJson("g")), 1),
    ],
    [
      "a message that does not parse",
      "SendStreamingMessage",
      { "content-type": "application/connect+proto" },
      () => envelope(Buffer.from([0x0a, 0xff])),
    ],
    [
      "an encoding the server does not take",
      "SendStreamingMessage",
      { "content-type": "application/connect+json", "connect-content-encoding": "zstd" },
      () => envelope(sendJson("z")),
    ],
  ];

  it.each(streamCases)("server streaming: %s", async (_name, method, headers, body) => {
    const proto = headers["content-type"] === "application/connect+proto";
    const { viaNode, viaRoute } = await both(`${a2a}/${method}`, headers, body);
    expect(viaNode.status).toBe(200);
    expect(streamView(viaRoute, proto)).toEqual(streamView(viaNode, proto));
    expect(viaRoute.headers["parley-request-id"]).toBeTruthy();
  });

  it("server streaming: a stream past its deadline ends DEADLINE_EXCEEDED naming the task, on both routes", async () => {
    const headers = { "content-type": "application/connect+json", "connect-timeout-ms": "150", "parley-agent": "slow" };
    const { viaNode, viaRoute } = await both(`${a2a}/SendStreamingMessage`, headers, () => envelope(sendJson("late")));
    const view = streamView(viaRoute, false);
    expect(view).toEqual(streamView(viaNode, false));
    const end = view.envelopes.at(-1) as { flags: number; body: { error: { code: string; message: string } } };
    expect(end.flags).toBe(2);
    expect(end.body.error.code).toBe("deadline_exceeded");
    expect(end.body.error.message).toMatch(/^the call's deadline passed before task "[^"]+" ended; the task runs on/);
  });

  it("server streaming: a SubscribeToTask past its deadline ends DEADLINE_EXCEEDED, on both routes", async () => {
    const sent = await h2Post(
      session,
      `${a2a}/SendMessage`,
      { "content-type": "application/json", "parley-agent": "slow" },
      Buffer.from(
        toJsonString(
          SendMessageRequestSchema,
          create(SendMessageRequestSchema, {
            message: userMessage("follow"),
            configuration: { returnImmediately: true },
          }),
        ),
      ),
    );
    const id = (JSON.parse(sent.body.toString()) as { task: { id: string } }).task.id;
    const body = () =>
      envelope(Buffer.from(toJsonString(SubscribeToTaskRequestSchema, create(SubscribeToTaskRequestSchema, { id }))));
    const headers = { "content-type": "application/connect+json", "connect-timeout-ms": "100" };
    const { viaNode, viaRoute } = await both(`${a2a}/SubscribeToTask`, headers, body);
    const view = streamView(viaRoute, false);
    expect(view).toEqual(streamView(viaNode, false));
    expect(view.envelopes.at(-1)).toMatchObject({ flags: 2, body: { error: { code: "deadline_exceeded" } } });
  });

  it("server streaming: a send streams its events and ends with an empty end-stream message", async () => {
    const answer = await h2Post(
      session,
      `${a2a}/SendStreamingMessage`,
      { "content-type": "application/connect+json" },
      envelope(sendJson("events")),
    );
    const view = streamView(answer, false);
    expect(view.envelopes.length).toBeGreaterThan(2);
    expect(view.envelopes.at(-1)).toEqual({ flags: 2, body: {} });
    expect(view.envelopes.slice(0, -1).every((e) => e.flags === 0)).toBe(true);
    expect(answer.headers["parley-stream-start"]).toBeDefined();
  });

  it("leaves what it does not answer to connect-node: a content type of the other kind, GET", async () => {
    const wrongKind = await h2Post(
      session,
      `${a2a}/SendMessage`,
      { "content-type": "application/connect+json" },
      envelope(sendJson("x")),
    );
    expect(wrongKind.status).toBe(415);
    const get = await new Promise<number>((resolve, reject) => {
      const stream = session.request({
        ":method": "GET",
        ":path": `${a2a}/GetTask?connect=v1&encoding=json&message=%7B%7D`,
      });
      stream.on("response", (h) => resolve(Number(h[":status"])));
      stream.on("error", reject);
      stream.end();
    });
    expect(get).toBe(405);
  });
});

describe("Connect calls on Parley's own route, with API keys: the interceptors' answers match connect-node's", () => {
  let server: TestServer;
  let session: http2.ClientHttp2Session;

  beforeAll(async () => {
    server = await startTestServer({ apiKeys: { "key-alice": "alice", "key-bob": "bob" } });
    session = http2.connect(server.baseUrl);
  });
  afterAll(async () => {
    session.close();
    await server.close();
  });

  const cases: [string, Record<string, string>, number][] = [
    ["no key", {}, 401],
    ["an unknown key", { authorization: "Bearer key-mallory" }, 401],
    ["a key", { authorization: "Bearer key-alice" }, 200],
  ];

  it.each(cases)("unary and streaming: %s", async (_name, auth, status) => {
    const unary = { "content-type": "application/json", ...auth };
    const viaNode = await h1Post(server.baseUrl, `${a2a}/SendMessage`, unary, sendJson("k"));
    const viaRoute = await h2Post(session, `${a2a}/SendMessage`, unary, sendJson("k"));
    expect(viaNode.status).toBe(status);
    expect(unaryView(viaRoute, false)).toEqual(unaryView(viaNode, false));
    const streaming = { "content-type": "application/connect+json", ...auth };
    const streamNode = await h1Post(server.baseUrl, `${a2a}/SendStreamingMessage`, streaming, envelope(sendJson("s")));
    const streamRoute = await h2Post(session, `${a2a}/SendStreamingMessage`, streaming, envelope(sendJson("s")));
    expect(streamView(streamRoute, false)).toEqual(streamView(streamNode, false));
  });

  it("keeps tenants apart on both routes: bob does not see alice's task", async () => {
    const sent = await h2Post(
      session,
      `${a2a}/SendMessage`,
      { "content-type": "application/json", authorization: "Bearer key-alice" },
      sendJson("mine"),
    );
    const taskId = (JSON.parse(sent.body.toString()) as { task: { id: string } }).task.id;
    const get = () => Buffer.from(toJsonString(GetTaskRequestSchema, create(GetTaskRequestSchema, { id: taskId })));
    const headers = (key: string) => ({ "content-type": "application/json", authorization: `Bearer ${key}` });
    const own = await h2Post(session, `${a2a}/GetTask`, headers("key-alice"), get());
    expect(own.status).toBe(200);
    const viaNode = await h1Post(server.baseUrl, `${a2a}/GetTask`, headers("key-bob"), get());
    const viaRoute = await h2Post(session, `${a2a}/GetTask`, headers("key-bob"), get());
    expect(viaRoute.status).toBe(404);
    expect(unaryView(viaRoute, false)).toEqual(unaryView(viaNode, false));
  });
});
