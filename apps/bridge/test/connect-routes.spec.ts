import { Code, ConnectError, createClient, type Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { A2AService, AccessService, ErrorInfoSchema, Role, TaskState, ThreadService } from "@parley/proto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Bridge, createBridge } from "../src/bridge.js";
import { createConnectRoutes } from "../src/connect-routes.js";
import { createBridgeLogger } from "../src/logger.js";
import { createRemoteUpstream, type RemoteUpstream } from "../src/upstream.js";
import { postRaw, rpc, startStack, type TestStack } from "./harness.js";

const alice = { authorization: "Bearer key-alice", "a2a-version": "1.0" };
const bob = { authorization: "Bearer key-bob", "a2a-version": "1.0" };

function message(text: string, contextId: string) {
  return {
    messageId: crypto.randomUUID(),
    contextId,
    role: Role.USER,
    parts: [{ content: { case: "text" as const, value: text } }],
  };
}

async function failure(call: Promise<unknown>): Promise<ConnectError> {
  return call.then(
    () => {
      throw new Error("expected the call to fail");
    },
    (e: unknown) => ConnectError.from(e),
  );
}

describe.each(["embedded", "upstream"] as const)("Parley's services over HTTP/1.1 on the bridge port (%s)", (mode) => {
  let server: TestStack;
  let remote: RemoteUpstream | undefined;
  let front: Bridge;
  let over: Record<"connect" | "grpc-web", Transport>;

  beforeAll(async () => {
    server = await startStack({ apiKeys: { "key-alice": "alice", "key-bob": "bob" } });
    // Embedded: the server's in-process transport. Upstream: the same server over HTTP/2, as --upstream does.
    let upstream = server.parley.inProcessTransport();
    if (mode === "upstream") {
      remote = createRemoteUpstream(`http://${server.grpcAddress}`);
      upstream = remote.transport;
    }
    front = await createBridge({
      upstream,
      cards: server.parley,
      port: 0,
      logger: createBridgeLogger("silent"),
      routes: [createConnectRoutes({ upstream, maxBodyBytes: 64 * 1024 })],
    });
    over = {
      connect: createConnectTransport({ baseUrl: front.url, httpVersion: "1.1" }),
      "grpc-web": createGrpcWebTransport({ baseUrl: front.url, httpVersion: "1.1" }),
    };
  });
  afterAll(async () => {
    await front?.close();
    remote?.close();
    await server?.close();
  });

  it.each(["connect", "grpc-web"] as const)("authenticates through the server's interceptors (%s)", async (p) => {
    const access = createClient(AccessService, over[p]);
    expect(await access.getCaller({}, { headers: alice })).toMatchObject({ tenant: "alice", openMode: false });
    expect(await access.getCaller({}, { headers: bob })).toMatchObject({ tenant: "bob" });
    const refused = await failure(access.getCaller({}, { headers: { authorization: "Bearer nope" } }));
    expect([refused.code, refused.rawMessage]).toEqual([Code.Unauthenticated, "unknown API key"]);
  });

  it("streams a reply, keeps tenants apart and passes typed errors through with their details", async () => {
    const a2a = createClient(A2AService, over.connect);
    const contextId = `http1-${mode}`;
    const events = [];
    for await (const e of a2a.sendStreamingMessage({ message: message("hi", contextId) }, { headers: alice }))
      events.push(e);
    expect(events.length).toBeGreaterThan(2);
    expect(events.at(-1)?.payload.case).toBe("statusUpdate");
    const threads = createClient(ThreadService, over.connect);
    const mine = await threads.getThreadHistory({ contextId }, { headers: alice });
    expect(mine.messages.length).toBe(2);
    expect((await failure(threads.getThreadHistory({ contextId }, { headers: bob }))).code).toBe(Code.NotFound);

    // A second send while the slow agent works: CONTEXT_BUSY with the running task in ErrorInfo.
    const slow = { ...alice, "parley-agent": "slow" };
    const started = await a2a.sendMessage(
      { message: message("take a while", `${contextId}-busy`), configuration: { returnImmediately: true } },
      { headers: slow },
    );
    const task = started.payload.case === "task" ? started.payload.value : undefined;
    const busy = await failure(a2a.sendMessage({ message: message("again", `${contextId}-busy`) }, { headers: slow }));
    expect(busy.code).toBe(Code.Aborted);
    const info = busy.findDetails(ErrorInfoSchema)[0];
    expect([info?.reason, info?.metadata.taskId]).toEqual(["CONTEXT_BUSY", task?.id]);
    const canceled = await a2a.cancelTask({ id: task!.id }, { headers: alice });
    expect(canceled.status?.state).toBe(TaskState.CANCELED);
  });

  it("refuses a request over its size limit, and leaves JSON-RPC and unknown paths as they were", async () => {
    const a2a = createClient(A2AService, over.connect);
    const big = await failure(a2a.sendMessage({ message: message("x".repeat(100_000), "big") }, { headers: alice }));
    expect(big.code).toBe(Code.ResourceExhausted);
    const res = await postRaw(front.url, rpc("GetTask", { id: "nope" }), alice);
    expect(res.json.error).toMatchObject({ code: -32001 });
    const unknown = await fetch(new URL("/parley.v1.NoSuchService/Call", front.url), { method: "POST" });
    expect(unknown.status).toBe(404);
  });

  it("answers undecodable bodies invalid_argument, and refuses invalid UTF-8 as JSON-RPC does, storing nothing", async () => {
    const sendUrl = new URL("/lf.a2a.v1.A2AService/SendMessage", front.url);
    const garbage = await fetch(sendUrl, {
      method: "POST",
      headers: { ...alice, "content-type": "application/proto" },
      body: Buffer.from("\x0a\xff\xff\xff\xff\x0frandom bytes"),
    });
    expect(garbage.status).toBe(400);
    const garbageError = (await garbage.json()) as { code: string; message: string };
    expect(garbageError.code).toBe("invalid_argument");
    expect(garbageError.message).toMatch(/not a valid lf\.a2a\.v1\.SendMessageRequest/);

    const contextId = `bridge-utf8-${mode}-${crypto.randomUUID()}`;
    const withBadText = (prefix: string, suffix: string) =>
      Buffer.concat([Buffer.from(prefix), Buffer.from([0xff, 0xc3, 0x28]), Buffer.from(suffix)]);
    const message = `{"messageId":"${contextId}","contextId":"${contextId}","role":"ROLE_USER","parts":[{"text":"a`;
    const connectJson = await fetch(sendUrl, {
      method: "POST",
      headers: { ...alice, "content-type": "application/json" },
      body: withBadText(`{"message":${message}`, '"}]}}'),
    });
    expect(connectJson.status).toBe(400);
    expect(((await connectJson.json()) as { code: string }).code).toBe("invalid_argument");
    const jsonRpc = await postRaw(
      front.url,
      withBadText(`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":${message}`, '"}]}}}'),
      alice,
    );
    expect(jsonRpc.json.error).toMatchObject({ code: -32700 });
    expect(await server.parley.store.getThread({ tenant: "alice", contextId })).toBeUndefined();
  });
});
