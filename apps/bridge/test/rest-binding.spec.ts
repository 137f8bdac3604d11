import { randomUUID } from "node:crypto";
import {
  CancelTaskRequest,
  GetTaskRequest,
  ListTasksRequest,
  type Message,
  SendMessageRequest,
  type StreamResponse,
  SubscribeToTaskRequest,
  type Task,
  TaskState,
} from "@a2a-js/sdk";
import { type Client, ClientFactory, ClientFactoryOptions, RestTransportFactory } from "@a2a-js/sdk/client";
import { createObservability, loadConfig } from "@parley/server";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { memoryLogger } from "../../../packages/server/test/fixtures/memory-logger.js";
import { collect, type SseEvent, sseEvents, startStack, type TestStack } from "./harness.js";
import { rawExchange } from "./raw-http.js";

const v1 = { "a2a-version": "1.0" };

function userMessage(text: string, extra: { contextId?: string; taskId?: string } = {}) {
  return SendMessageRequest.fromJSON({
    message: { messageId: randomUUID(), role: "ROLE_USER", parts: [{ text }], ...extra },
  });
}

function asTask(result: Message | Task): Task {
  if (!("status" in result)) throw new Error(`expected a task, got a message: ${JSON.stringify(result)}`);
  return result;
}

function textOf(task: Task): string {
  return task.artifacts
    .flatMap((a) => a.parts)
    .map((p) => (p.content?.$case === "text" ? p.content.value : ""))
    .join("");
}

function streamedText(events: StreamResponse[]): string {
  return events
    .flatMap((e) => (e.payload?.$case === "artifactUpdate" ? (e.payload.value.artifact?.parts ?? []) : []))
    .map((p) => (p.content?.$case === "text" ? p.content.value : ""))
    .join("");
}

function lastState(events: StreamResponse[]): TaskState | undefined {
  for (let i = events.length - 1; i >= 0; i--) {
    const p = events[i]!.payload;
    if (p?.$case === "statusUpdate") return p.value.status?.state;
    if (p?.$case === "task") return p.value.status?.state;
  }
  return undefined;
}

/** An SDK client that can only speak HTTP+JSON, and the method and path of every request it made. */
async function restClient(url: string): Promise<{ client: Client; requests: string[] }> {
  const requests: string[] = [];
  const recordingFetch: typeof fetch = async (input, init) => {
    const target = new URL(input instanceof Request ? input.url : String(input));
    requests.push(`${init?.method ?? "GET"} ${target.pathname}`);
    return fetch(input, init);
  };
  const factory = new ClientFactory(
    ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
      transports: [new RestTransportFactory({ fetchImpl: recordingFetch })],
      preferredTransports: ["HTTP+JSON"],
    }),
  );
  return { client: await factory.createFromUrl(url), requests };
}

interface RestAnswer {
  readonly status: number;
  readonly headers: Headers;
  readonly json: Record<string, unknown>;
}

async function call(
  url: string,
  method: string,
  body?: string | Uint8Array,
  headers: Record<string, string> = { ...v1, "content-type": "application/json" },
): Promise<RestAnswer> {
  const res = await fetch(url, { method, headers, ...(body === undefined ? {} : { body }) });
  const text = await res.text();
  return { status: res.status, headers: res.headers, json: text ? JSON.parse(text) : {} };
}

/** The google.rpc.Status of an HTTP+JSON error answer. */
function statusOf(answer: RestAnswer): {
  code: number;
  status: string;
  message: string;
  details: { "@type": string; reason: string; domain: string; metadata?: Record<string, string> }[];
} {
  return answer.json.error as ReturnType<typeof statusOf>;
}

const sendBody = (text: string, extra: Record<string, unknown> = {}) =>
  JSON.stringify({ message: { messageId: randomUUID(), role: "ROLE_USER", parts: [{ text }], ...extra } });

let stack: TestStack;
const log = memoryLogger();

beforeAll(async () => {
  stack = await startStack({}, { observability: createObservability(log.logger) });
});

afterAll(async () => {
  await stack?.close();
});

describe("A2A 1.0 HTTP+JSON through the official SDK's REST transport", () => {
  it("finds the HTTP+JSON interface on the agent card and speaks it", async () => {
    const card = (await (await fetch(`${stack.bridge.url}.well-known/agent-card.json`)).json()) as {
      supportedInterfaces: { url: string; protocolBinding: string; protocolVersion: string }[];
    };
    expect(card.supportedInterfaces).toContainEqual({
      url: stack.bridge.url.replace(/\/$/, ""),
      protocolBinding: "HTTP+JSON",
      protocolVersion: "1.0",
    });
    const { client, requests } = await restClient(stack.bridge.url);
    expect(client.protocolVersion).toBe("1.0");
    asTask(await client.sendMessage(userMessage("ping")));
    expect(requests).toEqual(["POST /message:send"]);
  });

  it("holds a three-turn conversation on one contextId, each turn seeing the ones before it", async () => {
    const { client, requests } = await restClient(stack.bridge.url);
    const first = asTask(await client.sendMessage(userMessage("my name is Ada")));
    const second = asTask(await client.sendMessage(userMessage("I live in London", { contextId: first.contextId })));
    const third = asTask(await client.sendMessage(userMessage("who am I?", { contextId: first.contextId })));
    expect(new Set([first.contextId, second.contextId, third.contextId]).size).toBe(1);
    expect(new Set([first.id, second.id, third.id]).size).toBe(3);
    const reply = textOf(third);
    // The echo agent says what reached it: the thread's two earlier turns came with the third.
    expect(reply).toContain(`turn 3 of thread ${JSON.stringify(first.contextId)}`);
    expect(reply).toContain("4 earlier messages arrived with it (2 from user, 2 from agent)");
    expect(reply).toContain("who am I?");

    const listed = await client.listTasks(ListTasksRequest.fromJSON({ contextId: first.contextId }));
    expect(listed.tasks.map((t) => t.id).sort()).toEqual([first.id, second.id, third.id].sort());
    const fetched = await client.getTask(GetTaskRequest.fromJSON({ id: third.id, historyLength: 1 }));
    expect(fetched.id).toBe(third.id);
    expect(fetched.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(fetched.history).toHaveLength(1);
    // Nothing went to the JSON-RPC endpoint.
    expect(requests).not.toContain("POST /");
    expect(requests).toContain(`GET /tasks/${third.id}`);
  });

  it("streams a task: the Task first, then updates, ending COMPLETED", async () => {
    const { client, requests } = await restClient(stack.bridge.url);
    const events = await collect(client.sendMessageStream(userMessage("stream me")));
    expect(events[0]?.payload?.$case).toBe("task");
    expect(events.some((e) => e.payload?.$case === "artifactUpdate")).toBe(true);
    expect(lastState(events)).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(streamedText(events)).toBe("stream me");
    expect(requests).toEqual(["POST /message:stream"]);
  });

  it("resubscribes to a running task of a named agent from a second client and follows it to the end", async () => {
    const { client: slow } = await restClient(`${stack.bridge.url}agents/slow/`);
    const stream = slow.sendMessageStream(userMessage("follow me"));
    const first = await stream.next();
    const taskId = first.value?.payload?.$case === "task" ? first.value.payload.value.id : "";
    expect(taskId).not.toBe("");
    const { client: other, requests } = await restClient(`${stack.bridge.url}agents/slow/`);
    const [resubscribed, original] = await Promise.all([
      collect(other.resubscribeTask(SubscribeToTaskRequest.fromJSON({ id: taskId }))),
      collect({ [Symbol.asyncIterator]: () => stream }),
    ]);
    expect(requests).toEqual([`POST /agents/slow/tasks/${taskId}:subscribe`]);
    expect(resubscribed[0]?.payload?.$case).toBe("task");
    expect(lastState(resubscribed)).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(lastState(original)).toBe(TaskState.TASK_STATE_COMPLETED);
  });

  it("cancels a running task", async () => {
    const { client: slow } = await restClient(`${stack.bridge.url}agents/slow/`);
    const stream = slow.sendMessageStream(userMessage("cancel me"));
    const first = await stream.next();
    const task = first.value?.payload?.$case === "task" ? first.value.payload.value : undefined;
    const canceled = await slow.cancelTask(CancelTaskRequest.fromJSON({ id: task!.id }));
    expect(canceled.status?.state).toBe(TaskState.TASK_STATE_CANCELED);
    const rest = await collect({ [Symbol.asyncIterator]: () => stream });
    expect(lastState(rest)).toBe(TaskState.TASK_STATE_CANCELED);
  });

  it("turns the binding's errors into the SDK's typed errors", async () => {
    const { client } = await restClient(stack.bridge.url);
    await expect(client.getTask(GetTaskRequest.fromJSON({ id: "no-such-task" }))).rejects.toMatchObject({
      name: "TaskNotFoundError",
      statusCode: 404,
    });
  });

  it("answers push notification configs, switched off by default, with PushNotificationNotSupported as 400", async () => {
    const sent = await call(`${stack.bridge.url}message:send`, "POST", sendBody("push?"));
    const taskId = (sent.json.task as { id: string }).id;
    const create = await call(
      `${stack.bridge.url}tasks/${taskId}/pushNotificationConfigs`,
      "POST",
      JSON.stringify({ url: "http://127.0.0.1:9/hook" }),
    );
    expect(create.status).toBe(400);
    expect(statusOf(create).details[0]).toMatchObject({ reason: "PUSH_NOTIFICATION_NOT_SUPPORTED" });
    for (const [method, path] of [
      ["GET", "pushNotificationConfigs"],
      ["GET", "pushNotificationConfigs/c1"],
      ["DELETE", "pushNotificationConfigs/c1"],
    ] as const) {
      const answer = await call(`${stack.bridge.url}tasks/${taskId}/${path}`, method, undefined, v1);
      expect(answer.status).toBe(400);
      expect(statusOf(answer).details[0]).toMatchObject({ reason: "PUSH_NOTIFICATION_NOT_SUPPORTED" });
    }
  });
});

describe("A2A 1.0 HTTP+JSON on the wire", () => {
  it("answers an unknown task with 404 and a google.rpc.Status carrying the A2A ErrorInfo", async () => {
    const answer = await call(`${stack.bridge.url}tasks/no-such-task`, "GET", undefined, v1);
    expect(answer.status).toBe(404);
    expect(answer.headers.get("content-type")).toBe("application/json");
    const status = statusOf(answer);
    expect(status).toMatchObject({ code: 404, status: "NOT_FOUND" });
    expect(status.message).toContain("no-such-task");
    expect(status.details).toContainEqual(
      expect.objectContaining({
        "@type": "type.googleapis.com/google.rpc.ErrorInfo",
        reason: "TASK_NOT_FOUND",
        domain: "a2a-protocol.org",
      }),
    );
  });

  it("refuses a body that is not JSON, or a field of the wrong type, with 400 naming what was wrong", async () => {
    const broken = await call(`${stack.bridge.url}message:send`, "POST", '{"message": {');
    expect(broken.status).toBe(400);
    expect(statusOf(broken)).toMatchObject({ code: 400, status: "INVALID_ARGUMENT" });
    expect(statusOf(broken).message).toMatch(/^parse error: /);

    const badRole = await call(
      `${stack.bridge.url}message:send`,
      "POST",
      JSON.stringify({ message: { messageId: "m", role: "ROLE_NOBODY", parts: [{ text: "x" }] } }),
    );
    expect(badRole.status).toBe(400);
    expect(statusOf(badRole).message).toContain("message.role");

    const notObject = await call(`${stack.bridge.url}message:send`, "POST", "[1, 2]");
    expect(statusOf(notObject).message).toContain("the body must be a JSON object");

    const badQuery = await call(`${stack.bridge.url}tasks?pageSize=many`, "GET", undefined, v1);
    expect(badQuery.status).toBe(400);
    expect(statusOf(badQuery).message).toContain("pageSize");

    const plain = await call(`${stack.bridge.url}message:send`, "POST", sendBody("x"), {
      ...v1,
      "content-type": "text/plain",
    });
    expect(plain.status).toBe(415);
    expect(statusOf(plain).details[0]).toMatchObject({ reason: "CONTENT_TYPE_NOT_SUPPORTED" });
  });

  it("refuses a request without A2A 1.0 with 400 VERSION_NOT_SUPPORTED, and takes the version as a query parameter", async () => {
    for (const headers of [{ "content-type": "application/json" }, { ...v1, "a2a-version": "2.0" }]) {
      const answer = await call(`${stack.bridge.url}message:send`, "POST", sendBody("x"), {
        "content-type": "application/json",
        ...headers,
      });
      expect(answer.status).toBe(400);
      expect(statusOf(answer)).toMatchObject({ code: 400, status: "UNIMPLEMENTED" });
      expect(statusOf(answer).details[0]).toMatchObject({
        reason: "VERSION_NOT_SUPPORTED",
        domain: "a2a-protocol.org",
      });
      expect(statusOf(answer).message).toContain("A2A-Version: 1.0");
    }
    const byQuery = await call(`${stack.bridge.url}message:send?A2A-Version=1.0`, "POST", sendBody("by query"), {
      "content-type": "application/json",
    });
    expect(byQuery.status).toBe(200);
    expect((byQuery.json.task as { status: { state: string } }).status.state).toBe("TASK_STATE_COMPLETED");
  });

  it("serves the /{tenant}/ forms, also below a named agent, and refuses a body that names another tenant", async () => {
    const sent = await call(`${stack.bridge.url}acme/message:send`, "POST", sendBody("tenant form"));
    expect(sent.status).toBe(200);
    const task = sent.json.task as { id: string; contextId: string };
    const got = await call(`${stack.bridge.url}acme/tasks/${encodeURIComponent(task.id)}`, "GET", undefined, v1);
    expect(got.status).toBe(200);
    expect(got.json.id).toBe(task.id);
    const listed = await call(`${stack.bridge.url}acme/tasks?contextId=${task.contextId}`, "GET", undefined, v1);
    expect((listed.json.tasks as { id: string }[]).map((t) => t.id)).toEqual([task.id]);

    // The slow agent streams its reply in chunks: the stream shows which agent answered.
    const res = await fetch(`${stack.bridge.url}agents/slow/acme/message:stream`, {
      method: "POST",
      headers: { ...v1, "content-type": "application/json" },
      body: sendBody("abcdefghij"),
    });
    expect(res.status).toBe(200);
    const events = await collect(sseEvents(res.body!));
    const chunks = events.filter((e) => "artifactUpdate" in e.data);
    expect(chunks.length).toBeGreaterThan(2);

    const conflicting = await call(
      `${stack.bridge.url}acme/message:send`,
      "POST",
      JSON.stringify({ tenant: "other", ...JSON.parse(sendBody("x")) }),
    );
    expect(conflicting.status).toBe(400);
    expect(statusOf(conflicting).message).toContain('tenant is "other" in the request but "acme" in the path');
  });

  it("reads a target that starts with // (a base URL ending in / joined to /message:send) as the path", async () => {
    const outcome = await rawExchange(stack.bridge.port, {
      method: "POST",
      path: "//message:send",
      headers: [
        ["content-type", "application/json"],
        ["a2a-version", "1.0"],
      ],
      body: Buffer.from(sendBody("x")),
      mode: "whole",
    });
    expect("response" in outcome && outcome.response.status).toBe(200);
    const task = JSON.parse("response" in outcome ? outcome.response.body.toString() : "{}").task as { id: string };
    expect((await call(`${stack.bridge.url}/tasks/${task.id}`, "GET", undefined, v1)).status).toBe(200);
  });

  it("answers a path of the binding with the wrong HTTP method with 405 and Allow", async () => {
    const answer = await call(`${stack.bridge.url}message:send`, "GET", undefined, v1);
    expect(answer.status).toBe(405);
    expect(answer.headers.get("allow")).toBe("POST");
    expect(statusOf(answer).status).toBe("UNIMPLEMENTED");
  });

  it("refuses an oversize body with 413 naming the limit", async () => {
    const big = sendBody("x".repeat(1024 * 1024 + 10));
    const answer = await call(`${stack.bridge.url}message:send`, "POST", big);
    expect(answer.status).toBe(413);
    expect(statusOf(answer)).toMatchObject({ code: 413, status: "RESOURCE_EXHAUSTED" });
    expect(statusOf(answer).message).toContain("the limit is 1048576 bytes");
  });

  it("resumes a subscription after the Last-Event-ID it names, without repeating an event", async () => {
    const res = await fetch(`${stack.bridge.url}agents/slow/message:stream`, {
      method: "POST",
      headers: { ...v1, "content-type": "application/json" },
      body: sendBody("0123456789"),
    });
    const reader = sseEvents(res.body!);
    const before: SseEvent[] = [];
    for await (const event of reader) {
      before.push(event);
      if (before.length === 4) break;
    }
    const lastId = before[3]!.id!;
    const taskId = lastId.slice(0, lastId.lastIndexOf(":"));
    // The GET form of the proto's rule, with the id the stream gave.
    const resumed = await fetch(`${stack.bridge.url}agents/slow/tasks/${encodeURIComponent(taskId)}:subscribe`, {
      headers: { ...v1, "last-event-id": lastId },
    });
    expect(resumed.status).toBe(200);
    const after = await collect(sseEvents(resumed.body!));
    const seqs = after.map((e) => Number(e.id!.slice(e.id!.lastIndexOf(":") + 1)));
    expect(seqs[0]).toBe(Number(lastId.slice(lastId.lastIndexOf(":") + 1)) + 1);
    expect(seqs).toEqual([...seqs].sort((a, b) => a - b));
    expect(after.at(-1)!.data).toMatchObject({ statusUpdate: { status: { state: "TASK_STATE_COMPLETED" } } });

    const stale = await fetch(`${stack.bridge.url}agents/slow/tasks/${encodeURIComponent(taskId)}:subscribe`, {
      method: "POST",
      headers: { ...v1, "last-event-id": "other-task:2" },
    });
    expect(stale.status).toBe(400);
    expect(((await stale.json()) as { error: { message: string } }).error.message).toContain("Last-Event-ID");
  });

  it("counts and logs HTTP+JSON requests under the protocol label rest", async () => {
    const answer = await call(`${stack.bridge.url}message:send`, "POST", sendBody("count me"));
    const requestId = answer.headers.get("parley-request-id");
    const metrics = await (await fetch(`${stack.bridge.url}metrics`)).text();
    expect(metrics).toMatch(/parley_requests_total\{[^}]*protocol="rest"[^}]*method="SendMessage"[^}]*code="ok"/);
    // The log line is written when the response closes, which may follow the client's read.
    await expect
      .poll(() => log.lines.filter((l) => l.requestId === requestId && l.msg === "request finished"))
      .toEqual([expect.objectContaining({ protocol: "rest", method: "SendMessage", code: "ok" })]);
  });
});

describe("A2A 1.0 HTTP+JSON with API keys, a rate limit and a required extension", () => {
  const extension = "https://example.com/ext/required/v1";
  let secured: TestStack;
  beforeAll(async () => {
    const defaults = loadConfig({ argv: [], env: {} });
    secured = await startStack({
      apiKeys: { "key-alice": "alice", "key-bob": "bob", "key-carol": "carol", "key-dave": "dave" },
      limits: { ...defaults.limits, requestsPerSecondPerTenant: 1, requestBurstPerTenant: 2 },
      capabilities: { ...defaults.capabilities, requiredExtensions: [extension], extendedAgentCard: true },
    });
  });
  afterAll(async () => {
    await secured?.close();
  });

  it("refuses a missing or unknown key with 401, and keeps one tenant's tasks from another", async () => {
    for (const auth of [{}, { authorization: "Bearer nope" }] as Record<string, string>[]) {
      const refused = await call(`${secured.bridge.url}message:send`, "POST", sendBody("x"), {
        ...v1,
        "content-type": "application/json",
        ...auth,
      });
      expect(refused.status).toBe(401);
      expect(refused.headers.get("www-authenticate")).toContain("Bearer");
      expect(statusOf(refused)).toMatchObject({ code: 401, status: "UNAUTHENTICATED" });
    }
    const alice = {
      ...v1,
      "content-type": "application/json",
      authorization: "Bearer key-alice",
      "a2a-extensions": extension,
    };
    const sent = await call(`${secured.bridge.url}message:send`, "POST", sendBody("alice's"), alice);
    expect(sent.status).toBe(200);
    const taskId = (sent.json.task as { id: string }).id;
    expect((await call(`${secured.bridge.url}tasks/${taskId}`, "GET", undefined, alice)).status).toBe(200);
    const asBob = await call(`${secured.bridge.url}tasks/${taskId}`, "GET", undefined, {
      ...v1,
      authorization: "Bearer key-bob",
      "a2a-extensions": extension,
    });
    expect(asBob.status).toBe(404);
    expect(statusOf(asBob).details[0]).toMatchObject({ reason: "TASK_NOT_FOUND" });
  });

  it("refuses a send without the required extension, and takes the extension as a query parameter", async () => {
    const carol = { ...v1, "content-type": "application/json", authorization: "Bearer key-carol" };
    const refused = await call(`${secured.bridge.url}message:send`, "POST", sendBody("no extension"), carol);
    expect(refused.status).toBe(400);
    expect(statusOf(refused).details[0]).toMatchObject({ reason: "EXTENSION_SUPPORT_REQUIRED" });
    const byQuery = await call(
      `${secured.bridge.url}message:send?A2A-Extensions=${encodeURIComponent(extension)}`,
      "POST",
      sendBody("extension by query"),
      carol,
    );
    expect(byQuery.status, JSON.stringify(byQuery.json)).toBe(200);
  });

  it("answers a tenant over its rate limit with 429 and the RATE_LIMITED ErrorInfo", async () => {
    const bob = { ...v1, authorization: "Bearer key-bob", "a2a-extensions": extension };
    const answers = await Promise.all(
      Array.from({ length: 10 }, () => call(`${secured.bridge.url}tasks/x`, "GET", undefined, bob)),
    );
    const limited = answers.filter((a) => a.status === 429);
    expect(limited.length).toBeGreaterThan(0);
    expect(statusOf(limited[0]!)).toMatchObject({ code: 429, status: "RESOURCE_EXHAUSTED" });
    expect(statusOf(limited[0]!).details[0]).toMatchObject({ reason: "RATE_LIMITED", domain: "parley.dev" });
    expect(Number(limited[0]!.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
  });

  it("serves the extended agent card at GET /extendedAgentCard to an authenticated caller", async () => {
    const dave = { ...v1, authorization: "Bearer key-dave", "a2a-extensions": extension };
    // The extended card lists the interfaces the public card advertised, as a client that read it first sees them.
    expect((await fetch(`${secured.bridge.url}.well-known/agent-card.json`)).status).toBe(200);
    const card = await call(`${secured.bridge.url}extendedAgentCard`, "GET", undefined, dave);
    expect(card.status, JSON.stringify(card.json)).toBe(200);
    expect(card.json.supportedInterfaces).toContainEqual(
      expect.objectContaining({ protocolBinding: "HTTP+JSON", protocolVersion: "1.0" }),
    );
    const anonymous = await call(`${secured.bridge.url}extendedAgentCard`, "GET", undefined, v1);
    expect(anonymous.status).toBe(401);
  });
});
