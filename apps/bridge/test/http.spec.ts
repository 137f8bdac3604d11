import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Bridge, createBridge } from "../src/bridge.js";
import { createBridgeLogger } from "../src/logger.js";
import { createRemoteUpstream, type RemoteUpstream } from "../src/upstream.js";
import { postRaw, rpc, sseEvents, startStack, type TestStack } from "./harness.js";

let stack: TestStack;
let url: string;
const v1 = { "A2A-Version": "1.0" };

beforeAll(async () => {
  stack = await startStack({}, { keepAliveMs: 50 });
  url = stack.bridge.url;
});

afterAll(async () => {
  await stack?.close();
});

function sendParams(text: string, extra: Record<string, unknown> = {}) {
  return { message: { messageId: randomUUID(), role: "ROLE_USER", parts: [{ text }], ...extra } };
}

async function getTaskState(taskId: string): Promise<string> {
  const { json } = await postRaw(url, rpc("GetTask", { id: taskId }), v1);
  return (json.result as { status?: { state: string } }).status?.state ?? "";
}

async function waitForTerminal(taskId: string): Promise<string> {
  for (;;) {
    const state = await getTaskState(taskId);
    if (!["TASK_STATE_SUBMITTED", "TASK_STATE_WORKING"].includes(state)) return state;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

describe("malformed requests get the right JSON-RPC errors", () => {
  const manyParts = {
    message: { messageId: "m", role: "ROLE_USER", parts: Array.from({ length: 65 }, () => ({ text: "x" })) },
  };
  const cases: Array<{
    name: string;
    body: string | Uint8Array;
    headers?: Record<string, string>;
    status?: number;
    code: number;
    id?: unknown;
    message: RegExp;
    reason?: string;
  }> = [
    { name: "truncated JSON", body: '{"jsonrpc":"2.0",', code: -32700, message: /parse error/ },
    {
      name: "invalid UTF-8",
      body: new Uint8Array([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x7d]),
      code: -32700,
      message: /UTF-8/,
    },
    { name: "a JSON string", body: '"hello"', code: -32600, message: /got string/ },
    {
      name: "a batch",
      body: `[${rpc("GetTask", { id: "x" })}]`,
      code: -32600,
      message: /batch requests are not supported/,
    },
    {
      name: "wrong jsonrpc",
      body: '{"jsonrpc":"1.0","id":4,"method":"GetTask"}',
      code: -32600,
      id: 4,
      message: /"2.0"/,
    },
    {
      name: "object id",
      body: '{"jsonrpc":"2.0","id":{"a":1},"method":"GetTask"}',
      code: -32600,
      id: null,
      message: /id must be/,
    },
    {
      name: "method not a string",
      body: '{"jsonrpc":"2.0","id":1,"method":7}',
      code: -32600,
      message: /method must be a string/,
    },
    { name: "unknown method", body: rpc("FlyToTheMoon"), headers: v1, code: -32601, id: 1, message: /"FlyToTheMoon"/ },
    {
      name: "1.0 name without A2A-Version",
      body: rpc("GetTask", { id: "x" }),
      code: -32601,
      message: /A2A-Version: 1.0/,
    },
    {
      name: "0.3 name with A2A-Version 1.0",
      body: rpc("tasks/get", { id: "x" }),
      headers: v1,
      code: -32601,
      message: /A2A-Version: 0.3/,
    },
    {
      name: "unsupported version",
      body: rpc("GetTask", { id: "x" }),
      headers: { "A2A-Version": "2.5" },
      code: -32009,
      message: /"2.5" is not supported/,
      reason: "VERSION_NOT_SUPPORTED",
    },
    {
      name: "1.0 params of the wrong type",
      body: rpc("SendMessage", { message: { parts: "nope" } }),
      headers: v1,
      code: -32602,
      message: /parts/,
    },
    {
      name: "1.0 params as an array",
      body: rpc("GetTask", ["x"]),
      headers: v1,
      code: -32602,
      message: /params must be a JSON object/,
    },
    {
      // Issue 18: unknown fields are ignored (forward compatibility), so this is a lookup of task "x" now.
      name: "1.0 unknown field next to a known one",
      body: rpc("GetTask", { id: "x", colour: "red" }),
      headers: v1,
      code: -32001,
      message: /task "x" was not found/,
    },
    {
      name: "0.3 message without messageId",
      body: rpc("message/send", { message: { role: "user", parts: [{ kind: "text", text: "hi" }] } }),
      code: -32602,
      message: /message\.messageId/,
    },
    {
      name: "0.3 part with unknown kind",
      body: rpc("message/send", { message: { messageId: "m", role: "user", parts: [{ kind: "video" }] } }),
      code: -32602,
      message: /message\.parts\.0/,
    },
    {
      name: "too many parts",
      body: rpc("SendMessage", manyParts),
      headers: v1,
      code: -32052,
      message: /65 parts; at most 64/,
      reason: "LIMIT_EXCEEDED",
    },
    {
      name: "nesting too deep",
      body: `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"x","n":${"[".repeat(80)}${"]".repeat(80)}}}`,
      code: -32600,
      message: /nesting depth 82 exceeds the limit of 64/,
    },
    {
      name: "unknown task",
      body: rpc("GetTask", { id: "missing-task" }),
      headers: v1,
      code: -32001,
      message: /missing-task|not found/i,
      reason: "TASK_NOT_FOUND",
    },
    {
      name: "push notifications switched off",
      body: rpc("CreateTaskPushNotificationConfig", { taskId: "t", url: "http://127.0.0.1:1/hook" }),
      headers: v1,
      code: -32003,
      message: /push/i,
      reason: "PUSH_NOTIFICATION_NOT_SUPPORTED",
    },
    {
      name: "no extended card",
      body: rpc("GetExtendedAgentCard", {}),
      headers: v1,
      code: -32004,
      message: /card/i,
      reason: "UNSUPPORTED_OPERATION",
    },
    {
      name: "body over 1 MiB",
      body: rpc("SendMessage", sendParams("x".repeat(1024 * 1024 + 10))),
      headers: v1,
      status: 413,
      code: -32600,
      message: /request body too large/,
    },
  ];

  for (const c of cases) {
    it(c.name, async () => {
      const res = await postRaw(url, c.body, c.headers);
      expect(res.status).toBe(c.status ?? 200);
      expect(res.json.jsonrpc).toBe("2.0");
      if ("id" in c) expect(res.json.id).toEqual(c.id);
      const error = res.json.error as { code: number; message: string; data?: Array<Record<string, unknown>> };
      expect(error.code).toBe(c.code);
      expect(error.message).toMatch(c.message);
      if (c.reason) {
        expect(error.data?.[0]).toMatchObject({
          "@type": "type.googleapis.com/google.rpc.ErrorInfo",
          reason: c.reason,
        });
      }
    });
  }

  it("answers non-POST on the JSON-RPC path with 405 and Allow", async () => {
    const res = await fetch(url);
    expect(res.status).toBe(405);
    expect(res.headers.get("allow")).toBe("POST");
  });

  it("answers a JSON-RPC request to an unknown agent with 404 and a JSON-RPC error naming the known ones", async () => {
    const res = await postRaw(`${url}agents/nobody/`, rpc("GetTask", { id: "x" }, 7), v1);
    expect(res.status).toBe(404);
    expect(res.json).toEqual({
      jsonrpc: "2.0",
      id: 7,
      error: {
        code: -32602,
        message: 'no agent named "nobody"; known agents: echo, slow',
        data: { agent: "nobody", agents: ["echo", "slow"] },
      },
    });
    // Whatever else is wrong with the request: the URL is checked first, and the id is kept when it reads.
    const cases: Array<{ path: string; body: string; headers: Record<string, string>; id: unknown }> = [
      { path: "agents/no%20body/", body: rpc("tasks/get", { id: "x" }, "req-1"), headers: {}, id: "req-1" },
      { path: "agents/nobody/", body: '{"jsonrpc":"2.0","id":', headers: v1, id: null },
      { path: "agents/nobody/", body: rpc("NoSuchMethod", {}, 8), headers: v1, id: 8 },
      {
        path: "agents/nobody/",
        body: rpc("GetTask", { id: "x" }, 9),
        headers: { ...v1, "content-type": "text/plain" },
        id: 9,
      },
    ];
    for (const c of cases) {
      const refused = await postRaw(`${url}${c.path}`, c.body, c.headers);
      expect(refused.status, c.path).toBe(404);
      expect(refused.json).toMatchObject({ jsonrpc: "2.0", id: c.id, error: { code: -32602 } });
      expect((refused.json.error as { message: string }).message).toMatch(
        /^no agent named "no ?body"; known agents: echo, slow$/,
      );
    }
    // A card lookup is plain HTTP, like the bridge's other non-JSON-RPC answers: its 404 stays plain JSON.
    const card = await fetch(`${url}agents/nobody/.well-known/agent-card.json`);
    expect(card.status).toBe(404);
    expect(await card.json()).toEqual({
      error: 'no agent named "nobody"; known agents: echo, slow',
      agents: ["echo", "slow"],
    });
  });

  it("reports a busy context as -32050 naming the running task", async () => {
    const contextId = `ctx-busy-${randomUUID()}`;
    const started = await postRaw(
      `${url}agents/slow/`,
      rpc("SendMessage", { ...sendParams("long", { contextId }), configuration: { returnImmediately: true } }),
      v1,
    );
    const taskId = (started.json.result as { task: { id: string } }).task.id;
    const busy = await postRaw(`${url}agents/slow/`, rpc("SendMessage", sendParams("again", { contextId })), v1);
    const error = busy.json.error as { code: number; data: Array<{ reason: string; metadata: { taskId: string } }> };
    expect(error.code).toBe(-32050);
    expect(error.data[0]).toMatchObject({ reason: "CONTEXT_BUSY", metadata: { taskId } });
    await postRaw(url, rpc("CancelTask", { id: taskId }), v1);
  });

  it("is still serving after all of the above", async () => {
    const res = await postRaw(url, rpc("SendMessage", sendParams("still here")), v1);
    expect((res.json.result as { task: { status: { state: string } } }).task.status.state).toBe("TASK_STATE_COMPLETED");
  });
});

describe("SSE", () => {
  it("sends the SSE headers, one data line per event and keep-alive comments", async () => {
    const res = await fetch(`${url}agents/slow/`, {
      method: "POST",
      headers: { "content-type": "application/json", ...v1 },
      body: rpc("SendStreamingMessage", sendParams("tick"), "s1"),
    });
    expect(res.headers.get("content-type")).toBe("text/event-stream");
    expect(res.headers.get("cache-control")).toBe("no-cache");
    expect(res.headers.get("x-accel-buffering")).toBe("no");
    const comments: string[] = [];
    const kinds: string[] = [];
    for await (const { data } of sseEvents(res.body!, (line) => comments.push(line))) {
      expect(data).toMatchObject({ jsonrpc: "2.0", id: "s1" });
      kinds.push(Object.keys(data.result as object)[0]!);
    }
    expect(kinds[0]).toBe("task");
    expect(kinds).toContain("artifactUpdate");
    expect(comments).toContain(": keep-alive");
  });

  it("answers a stream that fails before its first event with a plain JSON-RPC error", async () => {
    const res = await postRaw(url, rpc("SubscribeToTask", { id: "no-such-task" }), v1);
    expect(res.headers.get("content-type")).toBe("application/json");
    expect((res.json.error as { code: number }).code).toBe(-32001);
  });

  // Issue 18: a dropped connection is not a cancel; this test asserted CANCELED before.
  it("ends only the stream when the client disconnects: the task runs on to COMPLETED, then the context frees", async () => {
    const contextId = `ctx-drop-${randomUUID()}`;
    const abort = new AbortController();
    const res = await fetch(`${url}agents/slow/`, {
      method: "POST",
      headers: { "content-type": "application/json", ...v1 },
      body: rpc("SendStreamingMessage", sendParams("drop me", { contextId })),
      signal: abort.signal,
    });
    let taskId = "";
    for await (const { data } of sseEvents(res.body!)) {
      taskId = (data.result as { task: { id: string } }).task.id;
      break;
    }
    abort.abort();
    expect(await waitForTerminal(taskId)).toBe("TASK_STATE_COMPLETED");
    const next = await postRaw(`${url}agents/slow/`, rpc("SendMessage", sendParams("fresh start", { contextId })), v1);
    expect(next.json.error).toBeUndefined();
    expect((next.json.result as { task: { status: { state: string } } }).task.status.state).toBe(
      "TASK_STATE_COMPLETED",
    );
  });

  it("maps 0.3 streams with kinds and final", async () => {
    const res = await fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: rpc("message/stream", {
        message: {
          kind: "message",
          messageId: randomUUID(),
          role: "user",
          parts: [{ kind: "text", text: "old school" }],
        },
      }),
    });
    const results: Array<Record<string, unknown>> = [];
    for await (const { data } of sseEvents(res.body!)) results.push(data.result as Record<string, unknown>);
    expect(results[0]).toMatchObject({ kind: "task", status: { state: "submitted" } });
    const last = results.at(-1)!;
    expect(last).toMatchObject({ kind: "status-update", final: true, status: { state: "completed" } });
    expect(results.slice(0, -1).every((r) => r.final !== true)).toBe(true);
  });
});

describe("agent cards", () => {
  it("serves the 1.0 card with the JSON-RPC URL and the gRPC address, cacheable by ETag", async () => {
    const res = await fetch(`${url}.well-known/agent-card.json`);
    expect(res.status).toBe(200);
    expect(res.headers.get("cache-control")).toBe("public, max-age=60");
    const etag = res.headers.get("etag")!;
    const card = (await res.json()) as { supportedInterfaces: Array<{ url: string; protocolBinding: string }> };
    expect(card.supportedInterfaces).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ url, protocolBinding: "JSONRPC" }),
        expect.objectContaining({ url: stack.grpcAddress, protocolBinding: "GRPC" }),
      ]),
    );
    expect(stack.grpcAddress).toMatch(/^[^/]+:\d+$/);
    const again = await fetch(`${url}.well-known/agent-card.json`, { headers: { "If-None-Match": etag } });
    expect(again.status).toBe(304);
    expect(again.headers.get("last-modified")).toBe(res.headers.get("last-modified"));
  });

  it("serves per-agent cards pointing at the per-agent JSON-RPC path", async () => {
    const res = await fetch(`${url}agents/slow/.well-known/agent-card.json`);
    const card = (await res.json()) as { supportedInterfaces: Array<{ url: string }> };
    expect(card.supportedInterfaces[0]?.url).toBe(`${url}agents/slow/`);
    const missing = await fetch(`${url}agents/ghost/.well-known/agent-card.json`);
    expect(missing.status).toBe(404);
    expect(((await missing.json()) as { error: string }).error).toContain("known agents: echo, slow");
  });

  it("serves the 0.3 card shape when asked for 0.3", async () => {
    const res = await fetch(`${url}.well-known/agent-card.json?A2A-Version=0.3`);
    const card = (await res.json()) as Record<string, unknown>;
    expect(card).toMatchObject({ protocolVersion: "0.3.0", url, preferredTransport: "JSONRPC" });
  });

  it("lists only the JSON-RPC URL in every 0.3 card, and HTTP+JSON and gRPC beside it in every 1.0 card", async () => {
    for (const path of ["", "agents/echo/", "agents/slow/"]) {
      const jsonRpcUrl = `${url}${path}`;
      const v1Card = await cardsListingOnlyJsonRpcFor03(jsonRpcUrl);
      expect(v1Card.supportedInterfaces).toEqual([
        { url: jsonRpcUrl, protocolBinding: "JSONRPC", protocolVersion: "1.0" },
        { url: jsonRpcUrl, protocolBinding: "JSONRPC", protocolVersion: "0.3" },
        { url: jsonRpcUrl.replace(/\/$/, ""), protocolBinding: "HTTP+JSON", protocolVersion: "1.0" },
        { url: stack.grpcAddress, protocolBinding: "GRPC", protocolVersion: "1.0" },
      ]);
    }
  });
});

/**
 * The 0.3 card of the agent at `jsonRpcUrl`, asked for by header and by query. A 0.3 card names no protocol
 * version per interface, so it may list only what 0.3 clients can call: the h2c port's gRPC is A2A 1.0's
 * `lf.a2a.v1.A2AService`, and a 0.3 gRPC client calls 0.3's `a2a.v1.A2AService` (UNIMPLEMENTED there).
 */
async function v03CardsOf(jsonRpcUrl: string): Promise<Record<string, unknown>[]> {
  const cardUrl = `${jsonRpcUrl}.well-known/agent-card.json`;
  const responses = await Promise.all([
    fetch(cardUrl, { headers: { "A2A-Version": "0.3" } }),
    fetch(`${cardUrl}?A2A-Version=0.3`),
  ]);
  const cards = (await Promise.all(responses.map((r) => r.json()))) as Record<string, unknown>[];
  for (const card of cards) expect(card.protocolVersion).toBe("0.3.0");
  return cards;
}

/** Checks that both 0.3 cards of an agent's URL (by header and by query) list only that JSON-RPC URL; its 1.0 card. */
async function cardsListingOnlyJsonRpcFor03(jsonRpcUrl: string): Promise<Record<string, unknown>> {
  for (const card of await v03CardsOf(jsonRpcUrl)) {
    expect(card).toMatchObject({ url: jsonRpcUrl, preferredTransport: "JSONRPC" });
    expect(card.additionalInterfaces).toEqual([{ url: jsonRpcUrl, transport: "JSONRPC" }]);
  }
  return (await (await fetch(`${jsonRpcUrl}.well-known/agent-card.json`)).json()) as Record<string, unknown>;
}

describe("authentication and remote mode", () => {
  let secured: TestStack;
  let remote: RemoteUpstream;
  let remoteBridge: Bridge;

  beforeAll(async () => {
    secured = await startStack({ apiKeys: { "sekret-key": "team-a" } });
    remote = createRemoteUpstream(`http://${secured.grpcAddress}`);
    remoteBridge = await createBridge({
      upstream: remote.transport,
      cards: remote.cards,
      port: 0,
      grpcAddress: secured.grpcAddress,
      logger: createBridgeLogger("silent"),
    });
  });

  afterAll(async () => {
    await remoteBridge?.close();
    remote?.close();
    await secured?.close();
  });

  it("answers a missing API key with HTTP 401, WWW-Authenticate and a JSON-RPC error", async () => {
    const res = await postRaw(secured.bridge.url, rpc("GetTask", { id: "x" }), v1);
    expect(res.status).toBe(401);
    expect(res.headers.get("www-authenticate")).toMatch(/^Bearer/);
    expect((res.json.error as { message: string }).message).toMatch(/credentials/);
  });

  it("forwards the bearer key and works through a remote (Connect over HTTP/2) upstream", async () => {
    const auth = { ...v1, authorization: "Bearer sekret-key" };
    const res = await postRaw(remoteBridge.url, rpc("SendMessage", sendParams("over the wire")), auth);
    const task = (res.json.result as { task: { artifacts: Array<{ parts: Array<{ text: string }> }> } }).task;
    expect(task.artifacts[0]?.parts.map((p) => p.text).join("")).toBe("over the wire");
    const card = await fetch(`${remoteBridge.url}.well-known/agent-card.json`);
    expect(card.status).toBe(200);
  });

  it("lists only the JSON-RPC URL in the 0.3 cards of a remote-mode bridge, which knows the gRPC address", async () => {
    for (const jsonRpcUrl of [remoteBridge.url, `${remoteBridge.url}agents/echo/`]) {
      const v1Card = await cardsListingOnlyJsonRpcFor03(jsonRpcUrl);
      expect(v1Card.supportedInterfaces).toContainEqual({
        url: secured.grpcAddress,
        protocolBinding: "GRPC",
        protocolVersion: "1.0",
      });
    }
  });
});

describe("the 0.3 extended agent card", () => {
  let extended: TestStack;

  beforeAll(async () => {
    extended = await startStack({
      capabilities: { streaming: true, pushNotifications: false, extendedAgentCard: true, requiredExtensions: [] },
      // The extended card is served to authenticated callers only.
      apiKeys: { "key-x": "tenant-x" },
    });
  });

  afterAll(async () => {
    await extended?.close();
  });
  const auth = { authorization: "Bearer key-x" };

  it("agent/getAuthenticatedExtendedCard lists only the JSON-RPC URL; GetExtendedAgentCard (1.0) lists gRPC too", async () => {
    const jsonRpcUrl = extended.bridge.url;
    // The server learns the advertised endpoints from the first card it builds for the bridge.
    expect((await fetch(`${jsonRpcUrl}.well-known/agent-card.json`)).status).toBe(200);
    const v03 = await postRaw(jsonRpcUrl, rpc("agent/getAuthenticatedExtendedCard"), { "A2A-Version": "0.3", ...auth });
    expect(v03.json.result).toMatchObject({ protocolVersion: "0.3.0", url: jsonRpcUrl, preferredTransport: "JSONRPC" });
    expect((v03.json.result as { additionalInterfaces: unknown }).additionalInterfaces).toEqual([
      { url: jsonRpcUrl, transport: "JSONRPC" },
    ]);
    const v1 = await postRaw(jsonRpcUrl, rpc("GetExtendedAgentCard", {}), { "A2A-Version": "1.0", ...auth });
    expect((v1.json.result as { supportedInterfaces: unknown }).supportedInterfaces).toContainEqual({
      url: extended.grpcAddress,
      protocolBinding: "GRPC",
      protocolVersion: "1.0",
    });
  });
});
