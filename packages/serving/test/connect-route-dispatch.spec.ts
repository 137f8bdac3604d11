// Which Connect requests Parley's own route answers itself and which it leaves to its fallback (connect-node in
// the server): a route built on a small service of its own, behind the real body reader, on a real HTTP/2 port.
// connect-route.spec holds the answers themselves to connect-node's, on the whole server.

import * as http from "node:http";
import * as http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { create, toJsonString } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { validateUniversalHandlerOptions } from "@connectrpc/connect/protocol";
import { A2AService, GetTaskRequestSchema, SendMessageRequestSchema, TaskSchema, TaskState } from "@parley/proto";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { createConnectRoute } from "../src/listen/connect-route.js";
import { type NodeRequest, type NodeResponse, writeHead } from "../src/listen/node-http.js";
import { createBodyReader } from "../src/listen/request-body.js";
import { createServiceCalls } from "../src/service-calls.js";
import { grpcEnvelope as envelope, h2Post } from "./fixtures/h2-post.js";

const a2a = "/lf.a2a.v1.A2AService";

// The service behind the route: a task store of one task, and a stream of its two states.
const impl = {
  getTask(req: { id: string }) {
    if (req.id !== "t1") throw new ConnectError(`no task ${req.id}`, Code.NotFound);
    return create(TaskSchema, { id: "t1", contextId: "c1", status: { state: TaskState.COMPLETED } });
  },
  async *sendStreamingMessage() {
    yield { payload: { case: "statusUpdate", value: { taskId: "t1", status: { state: TaskState.WORKING } } } };
    yield { payload: { case: "statusUpdate", value: { taskId: "t1", status: { state: TaskState.COMPLETED } } } };
  },
};

describe("the Connect route's dispatch", () => {
  let fallbacks: string[] = [];
  let server: http2.Http2Server;
  let h1Server: http.Server;
  let baseUrl: string;
  let h1Url: string;
  let session: http2.ClientHttp2Session;

  beforeAll(async () => {
    const route = createConnectRoute(
      {
        calls: createServiceCalls(new Map([[A2AService.typeName, { service: A2AService, impl }]]), []),
        methods: A2AService.methods,
        handlerOptions: validateUniversalHandlerOptions({}),
      },
      (req: NodeRequest, res: NodeResponse) => {
        fallbacks.push(`${req.method} ${req.url}`);
        writeHead(res, 299, { "content-type": "text/plain" });
        res.end("fallback");
      },
    );
    const reader = createBodyReader(
      { maxBodyBytes: 1 << 20, maxDiscardBytes: 1 << 20, bodyTimeoutMs: 5_000, refuseSlowBody: () => {} },
      route,
    );
    server = http2.createServer(reader as (req: http2.Http2ServerRequest, res: http2.Http2ServerResponse) => void);
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    // The same route on HTTP/1.1, as the server's dual-protocol port also takes it.
    h1Server = http.createServer(reader as http.RequestListener);
    await new Promise<void>((resolve) => h1Server.listen(0, "127.0.0.1", resolve));
    h1Url = `http://127.0.0.1:${(h1Server.address() as AddressInfo).port}`;
    session = http2.connect(baseUrl);
  });
  afterAll(async () => {
    session.close();
    await new Promise((resolve) => server.close(resolve));
    h1Server.closeAllConnections();
    await new Promise((resolve) => h1Server.close(resolve));
  });
  beforeEach(() => {
    fallbacks = [];
  });

  const getTask = (id: string) => Buffer.from(toJsonString(GetTaskRequestSchema, create(GetTaskRequestSchema, { id })));
  const send = () => Buffer.from(toJsonString(SendMessageRequestSchema, create(SendMessageRequestSchema, {})));

  it("answers unary Connect itself: the message, or the error as JSON with its HTTP status", async () => {
    const found = await h2Post(session, `${a2a}/GetTask`, { "content-type": "application/json" }, getTask("t1"));
    expect(found.status).toBe(200);
    expect(JSON.parse(found.body.toString())).toMatchObject({ id: "t1", status: { state: "TASK_STATE_COMPLETED" } });
    const missing = await h2Post(session, `${a2a}/GetTask`, { "content-type": "application/json" }, getTask("t2"));
    expect(missing.status).toBe(404);
    expect(JSON.parse(missing.body.toString())).toEqual({ code: "not_found", message: "no task t2" });
    expect(fallbacks).toEqual([]);
  });

  it("answers Connect server streaming itself: the messages, then the end-stream message", async () => {
    const answer = await h2Post(
      session,
      `${a2a}/SendStreamingMessage`,
      { "content-type": "application/connect+json" },
      envelope(send()),
    );
    expect(answer.status).toBe(200);
    expect(answer.headers["content-type"]).toBe("application/connect+json");
    const flags: number[] = [];
    for (let offset = 0; offset < answer.body.length; offset += 5 + answer.body.readUInt32BE(offset + 1)) {
      flags.push(answer.body[offset]!);
    }
    expect(flags).toEqual([0, 0, 2]);
    expect(fallbacks).toEqual([]);
  });

  it("leaves the rest to its fallback: GET, the other kind's content type, gRPC, other methods, HTTP/1.1", async () => {
    const get = await new Promise<number>((resolve, reject) => {
      const stream = session.request({ ":method": "GET", ":path": `${a2a}/GetTask?encoding=json&message=%7B%7D` });
      let status = 0;
      stream.on("response", (h) => {
        status = Number(h[":status"]);
      });
      stream.on("end", () => resolve(status));
      stream.on("error", reject);
      stream.resume();
      stream.end();
    });
    const streamTypeOnUnary = await h2Post(
      session,
      `${a2a}/GetTask`,
      { "content-type": "application/connect+json" },
      envelope(getTask("t1")),
    );
    const unaryTypeOnStream = await h2Post(
      session,
      `${a2a}/SendStreamingMessage`,
      { "content-type": "application/json" },
      send(),
    );
    const grpc = await h2Post(
      session,
      `${a2a}/GetTask`,
      { "content-type": "application/grpc" },
      envelope(Buffer.alloc(0)),
    );
    const unknown = await h2Post(
      session,
      `${a2a}/NoSuchMethod`,
      { "content-type": "application/json" },
      Buffer.from("{}"),
    );
    const h1 = await new Promise<number>((resolve, reject) => {
      const req = http.request(
        `${h1Url}${a2a}/GetTask`,
        { method: "POST", headers: { "content-type": "application/json" }, agent: false },
        (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        },
      );
      req.on("error", reject);
      req.end(getTask("t1"));
    });
    expect([get, streamTypeOnUnary.status, unaryTypeOnStream.status, grpc.status, unknown.status, h1]).toEqual([
      299, 299, 299, 299, 299, 299,
    ]);
    expect(fallbacks).toEqual([
      `GET ${a2a}/GetTask?encoding=json&message=%7B%7D`,
      `POST ${a2a}/GetTask`,
      `POST ${a2a}/SendStreamingMessage`,
      `POST ${a2a}/GetTask`,
      `POST ${a2a}/NoSuchMethod`,
      `POST ${a2a}/GetTask`,
    ]);
  });
});
