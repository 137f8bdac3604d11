// Forward compatibility and request hygiene over JSON-RPC: fields this version does not know are accepted and
// dropped in every request type (1.0 and 0.3), known fields keep their strict checks, the Content-Type is
// checked first, the card answers Last-Modified and conditional requests, and a retry without a contextId
// (the official a2a-js client resending the same message) finds the first task.

import { randomUUID } from "node:crypto";
import * as sdk from "@a2a-js/sdk";
import { type Client, ClientFactory } from "@a2a-js/sdk/client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { postRaw, rpc, sseEvents, startStack, type TestStack } from "./harness.js";

const v1 = { "A2A-Version": "1.0" };
const v03 = { "A2A-Version": "0.3" };
const future = { futureField: 1, futureObject: { nested: true } };

let stack: TestStack;
let url: string;
beforeAll(async () => {
  stack = await startStack({
    capabilities: { streaming: true, pushNotifications: true, extendedAgentCard: false, requiredExtensions: [] },
    // The configs below point at loopback (port 9, discard), which push notifications may not reach by default.
    push: {
      allowedHosts: [],
      allowedAddresses: ["127.0.0.1"],
      maxAttempts: 1,
      retryBaseMs: 500,
      timeoutMs: 10_000,
      maxConfigsPerTask: 10,
    },
  });
  url = stack.bridge.url;
});
afterAll(async () => {
  await stack?.close();
});

async function call(method: string, params: unknown, headers: Record<string, string> = v1) {
  const res = await postRaw(url, rpc(method, params), headers);
  expect(res.json.error).toBeUndefined();
  return res.json.result as Record<string, unknown>;
}

/** Every event of a streaming call; fails on an error event. */
async function stream(method: string, params: unknown, headers: Record<string, string> = v1) {
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: rpc(method, params),
  });
  const events: Record<string, unknown>[] = [];
  for await (const { data } of sseEvents(res.body!)) {
    expect(data.error).toBeUndefined();
    events.push(data.result as Record<string, unknown>);
  }
  return events;
}

const message = (text: string, extra: Record<string, unknown> = {}) => ({
  messageId: randomUUID(),
  role: "ROLE_USER",
  parts: [{ text, ...future }],
  ...future,
  ...extra,
});

describe("unknown fields are accepted and dropped in every A2A 1.0 request", () => {
  it("SendMessage, SendStreamingMessage, GetTask, ListTasks, SubscribeToTask and CancelTask", async () => {
    const sent = await call("SendMessage", {
      message: message("hello from a newer peer", { metadata: { kept: "metadata is data" } }),
      configuration: { returnImmediately: false, ...future },
      ...future,
    });
    const task = sent.task as { id: string; contextId: string; history: Record<string, unknown>[] };
    const stored = await call("GetTask", { id: task.id, ...future });
    const inbound = (stored.history as Record<string, unknown>[])[0]!;
    // Dropped, not stored: the task read back has no trace of the unknown fields; metadata (a Struct) is kept.
    expect(JSON.stringify(stored)).not.toContain("future");
    expect(inbound.metadata).toEqual({ kept: "metadata is data" });
    expect((inbound.parts as { text: string }[])[0]!.text).toBe("hello from a newer peer");

    const listed = await call("ListTasks", { contextId: task.contextId, ...future });
    expect((listed.tasks as unknown[]).length).toBe(1);

    const streamed = await stream("SendStreamingMessage", { message: message("streamed"), ...future });
    expect(JSON.stringify(streamed)).not.toContain("future");
    expect(streamed[streamed.length - 1]).toMatchObject({
      statusUpdate: { status: { state: "TASK_STATE_COMPLETED" } },
    });

    // The slow agent (10 chunks, 200 ms apart) keeps the task running long enough to subscribe and cancel.
    const slow = `${url}agents/slow/`;
    const started = await postRaw(
      slow,
      rpc("SendMessage", { message: message("wait"), configuration: { returnImmediately: true } }),
      v1,
    );
    const runningId = (started.json.result as { task: { id: string } }).task.id;
    const subscription = await fetch(slow, {
      method: "POST",
      headers: { "content-type": "application/json", ...v1 },
      body: rpc("SubscribeToTask", { id: runningId, ...future }),
    });
    for await (const { data } of sseEvents(subscription.body!)) {
      expect(data.error).toBeUndefined();
      expect((data.result as { task?: { id: string } }).task?.id).toBe(runningId);
      break;
    }
    const canceled = await postRaw(slow, rpc("CancelTask", { id: runningId, ...future }), v1);
    expect(canceled.json.error).toBeUndefined();
    expect((canceled.json.result as { status: { state: string } }).status.state).toBe("TASK_STATE_CANCELED");
  });

  it("the four push config requests and GetExtendedAgentCard", async () => {
    const sent = await call("SendMessage", { message: message("push me") });
    const taskId = (sent.task as { id: string }).id;
    const created = await call("CreateTaskPushNotificationConfig", {
      taskId,
      id: "cfg-1",
      url: "http://127.0.0.1:9/hook",
      token: "t",
      authentication: { scheme: "Bearer", credentials: "secret", ...future },
      ...future,
    });
    expect(JSON.stringify(created)).not.toContain("future");
    const got = await call("GetTaskPushNotificationConfig", { taskId, id: "cfg-1", ...future });
    expect(got).toMatchObject({ id: "cfg-1", url: "http://127.0.0.1:9/hook" });
    expect(JSON.stringify(got)).not.toContain("future");
    const listed = await call("ListTaskPushNotificationConfigs", { taskId, ...future });
    expect((listed.configs as unknown[]).length).toBe(1);
    await call("DeleteTaskPushNotificationConfig", { taskId, id: "cfg-1", ...future });
    // The extended card is served to authenticated callers only, so from a stack with an API key.
    const keyed = await startStack({
      capabilities: { streaming: true, pushNotifications: false, extendedAgentCard: true, requiredExtensions: [] },
      apiKeys: { "key-f": "tenant-f" },
    });
    try {
      const res = await postRaw(keyed.bridge.url, rpc("GetExtendedAgentCard", { ...future }), {
        ...v1,
        authorization: "Bearer key-f",
      });
      expect((res.json.result as { name?: string }).name).toBeDefined();
    } finally {
      await keyed.close();
    }
  });

  it("keeps the strict checks and messages of known fields", async () => {
    const badEnum = await postRaw(url, rpc("SendMessage", { message: message("x", { role: "ROLE_SOMEONE" }) }), v1);
    expect((badEnum.json.error as { code: number }).code).toBe(-32602);
    expect((badEnum.json.error as { message: string }).message).toContain("message.role");
    const badType = await postRaw(url, rpc("GetTask", { id: 7, ...future }), v1);
    expect((badType.json.error as { code: number }).code).toBe(-32602);
    expect((badType.json.error as { message: string }).message).toContain("id");
    const badPart = await postRaw(url, rpc("SendMessage", { message: message("x", { parts: "text" }) }), v1);
    expect((badPart.json.error as { message: string }).message).toContain("message.parts");
  });
});

describe("unknown fields are accepted and dropped in every A2A 0.3 request", () => {
  const message03 = (text: string) => ({
    kind: "message",
    messageId: randomUUID(),
    role: "user",
    parts: [{ kind: "text", text, ...future }],
    ...future,
  });

  it("message/send, message/stream, tasks/get, tasks/cancel, tasks/resubscribe and the push config methods", async () => {
    const sent = await call(
      "message/send",
      { message: message03("old dialect, new fields"), configuration: { blocking: true, ...future }, ...future },
      v03,
    );
    const taskId = sent.id as string;
    const got = await call("tasks/get", { id: taskId, ...future }, v03);
    expect(JSON.stringify(got)).not.toContain("future");
    const streamed = await stream("message/stream", { message: message03("streamed"), ...future }, v03);
    expect(streamed[streamed.length - 1]).toMatchObject({ kind: "status-update", final: true });
    const canceled = await postRaw(url, rpc("tasks/cancel", { id: taskId, ...future }), v03);
    expect((canceled.json.error as { code: number }).code).toBe(-32002);
    const resubscribed = await postRaw(url, rpc("tasks/resubscribe", { id: taskId, ...future }), v03);
    expect((resubscribed.json.error as { code: number }).code).toBe(-32004);

    const set = await call(
      "tasks/pushNotificationConfig/set",
      {
        taskId,
        pushNotificationConfig: {
          id: "cfg-03",
          url: "http://127.0.0.1:9/hook",
          authentication: { schemes: ["Bearer"], credentials: "s", ...future },
          ...future,
        },
        ...future,
      },
      v03,
    );
    expect(JSON.stringify(set)).not.toContain("future");
    await call("tasks/pushNotificationConfig/get", { id: taskId, pushNotificationConfigId: "cfg-03", ...future }, v03);
    await call("tasks/pushNotificationConfig/list", { id: taskId, ...future }, v03);
    await call(
      "tasks/pushNotificationConfig/delete",
      { id: taskId, pushNotificationConfigId: "cfg-03", ...future },
      v03,
    );
  });
});

describe("Content-Type is checked first", () => {
  it("answers anything but application/json with 415 and -32600 naming the type received", async () => {
    // -32005 (ContentTypeNotSupportedError) is about the media types of message parts, not the request body.
    for (const contentType of ["text/plain", "application/x-www-form-urlencoded", "application/jsonx"]) {
      const res = await fetch(url, { method: "POST", headers: { "content-type": contentType, ...v1 }, body: "{" });
      expect(res.status).toBe(415);
      const json = (await res.json()) as { id: unknown; error: { code: number; message: string } };
      expect(json.error.code).toBe(-32600);
      expect(json.error.message).toContain(contentType);
    }
    const missing = await fetch(url, { method: "POST", body: new Uint8Array([123]), headers: v1 });
    const json = (await missing.json()) as { error: { code: number; message: string } };
    expect(json.error.code).toBe(-32600);
    expect(json.error.message).toContain("no Content-Type");
  });

  it("accepts application/json with parameters, in any case", async () => {
    for (const contentType of ["application/json; charset=utf-8", "Application/JSON"]) {
      const res = await postRaw(url, rpc("GetTask", { id: "none" }), { ...v1, "content-type": contentType });
      expect((res.json.error as { code: number }).code).toBe(-32001);
    }
  });
});

describe("agent card validators", () => {
  it("answers Last-Modified and honours If-None-Match, then If-Modified-Since", async () => {
    const card = `${url}.well-known/agent-card.json`;
    const res = await fetch(card);
    const lastModified = res.headers.get("last-modified")!;
    const etag = res.headers.get("etag")!;
    expect(Number.isFinite(Date.parse(lastModified))).toBe(true);
    expect((await fetch(card, { headers: { "If-None-Match": etag } })).status).toBe(304);
    expect((await fetch(card, { headers: { "If-Modified-Since": lastModified } })).status).toBe(304);
    const earlier = new Date(Date.parse(lastModified) - 60_000).toUTCString();
    expect((await fetch(card, { headers: { "If-Modified-Since": earlier } })).status).toBe(200);
    // If-None-Match decides when both are sent: a stale tag gets the card even with a current date.
    expect(
      (await fetch(card, { headers: { "If-None-Match": '"stale"', "If-Modified-Since": lastModified } })).status,
    ).toBe(200);
    expect((await fetch(card)).headers.get("last-modified")).toBe(lastModified);
  });
});

describe("retries without a contextId, with the official a2a-js client", () => {
  let client: Client;
  beforeAll(async () => {
    client = await new ClientFactory().createFromUrl(url);
  });

  const request = (messageId: string, text: string) =>
    sdk.SendMessageRequest.fromJSON({ message: { messageId, role: "ROLE_USER", parts: [{ text }] } });

  it("answers a true retry (same messageId and bytes) with the first task, not a second conversation", async () => {
    const retry = request(randomUUID(), "send me twice");
    const first = (await client.sendMessage(retry)) as sdk.Task;
    const second = (await client.sendMessage(retry)) as sdk.Task;
    expect(second.id).toBe(first.id);
    expect(second.contextId).toBe(first.contextId);
    const listed = await call("ListTasks", { contextId: first.contextId });
    expect((listed.tasks as unknown[]).length).toBe(1);
  });

  it("runs the same messageId with other bytes as a new message in a new conversation", async () => {
    const messageId = randomUUID();
    const first = (await client.sendMessage(request(messageId, "one text"))) as sdk.Task;
    const other = (await client.sendMessage(request(messageId, "another text"))) as sdk.Task;
    expect(other.id).not.toBe(first.id);
    expect(other.contextId).not.toBe(first.contextId);
  });
});
