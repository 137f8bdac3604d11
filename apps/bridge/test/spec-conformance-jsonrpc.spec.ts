// Rules of the A2A v1.0 specification beyond the conformance kit, over JSON-RPC (1.0 and 0.3): ListTasks' required
// fields (3.1.4), input modes (3.1.1), patch versions (3.6), the extended card (3.3.4), one Task event per stream
// (3.1.2), the required role, 0.3's optional push config id, notifications and the request's content type.

import { defaultConfig } from "@parley/server";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { postRaw, rpc, type SseEvent, sseEvents, startStack, type TestStack } from "./harness.js";

const v1 = { "a2a-version": "1.0" };
const v03 = { "a2a-version": "0.3" };

type Json = Record<string, unknown>;

function message(text: string, extra: Json = {}): Json {
  return { messageId: crypto.randomUUID(), role: "ROLE_USER", parts: [{ text }], ...extra };
}

describe("A2A rules over JSON-RPC", () => {
  let stack: TestStack;
  let url: string;

  async function call(method: string, params: unknown, headers: Record<string, string> = v1) {
    const { json } = await postRaw(url, rpc(method, params), headers);
    return json;
  }

  beforeAll(async () => {
    stack = await startStack({
      agents: [
        { name: "conformance", type: "conformance" },
        { name: "echo", type: "echo" },
      ],
      capabilities: { ...defaultConfig.capabilities, pushNotifications: true },
      push: { ...defaultConfig.push, allowedAddresses: ["127.0.0.1"], maxAttempts: 1 },
    });
    url = stack.bridge.url;
  });
  afterAll(async () => stack.close());

  it("always writes ListTasks' four fields: empty results and the last page included", async () => {
    const empty = await call("ListTasks", { contextId: `none-${crypto.randomUUID()}` });
    expect(empty.result).toEqual({ tasks: [], nextPageToken: "", pageSize: 50, totalSize: 0 });
    const contextId = `list-${crypto.randomUUID()}`;
    for (const text of ["one", "two"]) await call("SendMessage", { message: message(text, { contextId }) });
    const first = (await call("ListTasks", { contextId, pageSize: 1 })).result as Json;
    expect(first.nextPageToken).not.toBe("");
    const last = (await call("ListTasks", { contextId, pageSize: 1, pageToken: first.nextPageToken })).result as Json;
    expect(Object.keys(last)).toEqual(["tasks", "nextPageToken", "pageSize", "totalSize"]);
    expect(last).toMatchObject({ nextPageToken: "", pageSize: 1, totalSize: 2 });
  });

  it("refuses a part of a media type the agent does not accept with -32005, in 1.0 and 0.3", async () => {
    const raw = { raw: "dGNr", mediaType: "application/x-unsupported-tck-type" };
    const v1Reply = await call("SendMessage", { message: { ...message("x"), parts: [raw] } });
    expect((v1Reply.error as Json).code).toBe(-32005);
    expect((v1Reply.error as Json).message).toMatch(/application\/x-unsupported-tck-type/);
    const v03Reply = await call(
      "message/send",
      {
        message: {
          kind: "message",
          messageId: crypto.randomUUID(),
          role: "user",
          parts: [{ kind: "file", file: { bytes: "dGNr", mimeType: "application/x-unsupported-tck-type" } }],
        },
      },
      v03,
    );
    expect((v03Reply.error as Json).code).toBe(-32005);
  });

  it("reads A2A-Version by Major.Minor: 1.0.1 and 1.0.0 are 1.0", async () => {
    for (const version of ["1.0.1", "1.0.0"]) {
      const reply = await call("SendMessage", { message: message(version) }, { "a2a-version": version });
      expect(reply.error, version).toBeUndefined();
      expect((reply.result as Json).task).toBeDefined();
    }
  });

  it("answers GetExtendedAgentCard with -32004 when the capability is off, and 0.3's own -32007", async () => {
    expect(((await call("GetExtendedAgentCard", {})).error as Json).code).toBe(-32004);
    expect(((await call("agent/getAuthenticatedExtendedCard", {}, v03)).error as Json).code).toBe(-32007);
  });

  it("sends one Task event per SubscribeToTask stream, across a follow-up to an input-required task", async () => {
    const asked = await call("SendMessage", {
      message: { ...message("ask"), messageId: `tck-input-required-${crypto.randomUUID()}` },
    });
    const task = (asked.result as { task: { id: string; contextId: string } }).task;
    const res = await fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json", ...v1 },
      body: rpc("SubscribeToTask", { id: task.id }),
    });
    const events: SseEvent[] = [];
    for await (const event of sseEvents(res.body!)) {
      events.push(event);
      if (events.length === 1) {
        await call("SendMessage", { message: message("answer", { taskId: task.id, contextId: task.contextId }) });
      }
    }
    const kinds = events.map((e) => Object.keys(e.data.result as Json)[0]);
    expect(kinds[0]).toBe("task");
    expect(kinds.filter((k) => k === "task")).toHaveLength(1);
    expect(kinds.slice(1).every((k) => k === "statusUpdate" || k === "artifactUpdate")).toBe(true);
  });

  it("refuses a message without a role with -32602 naming role", async () => {
    const { role: _, ...noRole } = message("who");
    const reply = await call("SendMessage", { message: noRole });
    expect((reply.error as Json).code).toBe(-32602);
    expect((reply.error as Json).message).toMatch(/role is required/);
  });

  it("answers 0.3 tasks/pushNotificationConfig/get with only the task id", async () => {
    const sent = await call("SendMessage", { message: message("push") });
    const taskId = ((sent.result as Json).task as Json).id as string;
    const set = await call(
      "tasks/pushNotificationConfig/set",
      { taskId, pushNotificationConfig: { url: "http://127.0.0.1:9/hook" } },
      v03,
    );
    expect(set.error).toBeUndefined();
    const got = await call("tasks/pushNotificationConfig/get", { id: taskId }, v03);
    expect(got.error).toBeUndefined();
    expect(got.result).toMatchObject({ taskId, pushNotificationConfig: { url: "http://127.0.0.1:9/hook" } });
  });

  it("processes a notification (no id) and answers it with nothing", async () => {
    const contextId = `notified-${crypto.randomUUID()}`;
    const body = JSON.stringify({
      jsonrpc: "2.0",
      method: "SendMessage",
      params: { message: message("hi", { contextId }) },
    });
    const res = await fetch(url, { method: "POST", headers: { "content-type": "application/json", ...v1 }, body });
    expect(res.status).toBe(204);
    expect(await res.text()).toBe("");
    const listed = (await call("ListTasks", { contextId })).result as Json;
    expect(listed.totalSize).toBe(1);
    // A notification that fails is not answered either.
    const bad = JSON.stringify({ jsonrpc: "2.0", method: "GetTask", params: { id: "no-such-task" } });
    const refused = await fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json", ...v1 },
      body: bad,
    });
    expect([refused.status, await refused.text()]).toEqual([204, ""]);
  });

  it("answers GetTask without an id with -32602 naming id", async () => {
    const reply = await call("GetTask", {});
    expect((reply.error as Json).code).toBe(-32602);
    expect((reply.error as Json).message).toMatch(/\bid\b.*required/);
  });

  it("refuses a body sent as text/plain as an invalid request (415), not as -32005", async () => {
    const res = await postRaw(url, rpc("GetTask", { id: "x" }), { ...v1, "content-type": "text/plain" });
    expect(res.status).toBe(415);
    expect((res.json.error as Json).code).toBe(-32600);
    expect((res.json.error as Json).message).toMatch(/text\/plain.*application\/json/);
    expect(res.json.id).toBe(1);
  });
});
