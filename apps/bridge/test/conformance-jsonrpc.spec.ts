// The conformance agent's scenarios and the A2A error codes over JSON-RPC:
// the official a2a-js client against a real embedded Parley behind the bridge.

import { createServer, type IncomingHttpHeaders } from "node:http";
import type { AddressInfo } from "node:net";
import * as sdk from "@a2a-js/sdk";
import { type Client, ClientFactory } from "@a2a-js/sdk/client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { postRaw, rpc, sseEvents, startStack, type TestStack } from "./harness.js";

const S = sdk.TaskState;
const requiredExtension = "urn:a2a:tck:required-extension";
const v1 = { "a2a-version": "1.0" };

let counter = 0;
function kitId(prefix: string): string {
  return `${prefix}-${(0x20000000 + counter++).toString(16)}-jsonrpc`;
}

function request(messageId: string, extra: Record<string, unknown> = {}, configuration?: Record<string, unknown>) {
  return sdk.SendMessageRequest.fromJSON({
    message: { messageId, role: "ROLE_USER", parts: [{ text: `scenario ${messageId}` }], ...extra },
    ...(configuration ? { configuration } : {}),
  });
}

function partText(part: sdk.Part | undefined): string {
  return part?.content?.$case === "text" ? part.content.value : "";
}

function asTask(result: sdk.Task | sdk.Message): sdk.Task {
  if (!("status" in result)) throw new Error(`expected a Task, got a Message: ${JSON.stringify(result)}`);
  return result as sdk.Task;
}

async function streamLabels(events: AsyncIterable<sdk.StreamResponse>): Promise<string[]> {
  const labels: string[] = [];
  for await (const event of events) {
    const payload = event.payload!;
    if (payload.$case === "task") labels.push(`task:${S[payload.value.status!.state]}`);
    else if (payload.$case === "statusUpdate") labels.push(`status:${S[payload.value.status!.state]}`);
    else if (payload.$case === "artifactUpdate") {
      const content = payload.value.artifact!.parts[0]?.content;
      labels.push(
        `artifact:${content?.$case === "text" ? content.value : content?.$case}${payload.value.append ? ":append" : ""}${payload.value.lastChunk ? ":last" : ""}`,
      );
    } else if (payload.$case === "message") labels.push(`message:${payload.value.parts.map(partText).join("")}`);
  }
  return labels;
}

/** The JSON-RPC error code of a call, whether it came back as JSON or as the first SSE event. */
async function errorCode(url: string, body: string, headers: Record<string, string>): Promise<number | undefined> {
  const res = await fetch(url, { method: "POST", headers: { "content-type": "application/json", ...headers }, body });
  if (res.headers.get("content-type")?.startsWith("text/event-stream")) {
    for await (const event of sseEvents(res.body!)) {
      return (event.data.error as { code?: number } | undefined)?.code;
    }
    return undefined;
  }
  const json = (await res.json()) as { error?: { code?: number } };
  return json.error?.code;
}

describe("conformance agent over JSON-RPC with the a2a-js client", () => {
  let stack: TestStack;
  let client: Client;

  beforeAll(async () => {
    stack = await startStack({
      agents: [{ name: "conformance", type: "conformance", options: { resubscribeWorkMs: 1_000 } }],
    });
    client = await new ClientFactory().createFromUrl(stack.bridge.url);
  });
  afterAll(async () => {
    await stack?.close();
  });

  it("answers each unary scenario as the kit expects", async () => {
    const complete = asTask(await client.sendMessage(request(kitId("tck-complete-task"))));
    expect(complete.status?.state).toBe(S.TASK_STATE_COMPLETED);
    expect(complete.status?.message?.parts.map(partText).join("")).toBe("Hello from TCK");

    const direct = await client.sendMessage(request(kitId("tck-message-response")));
    expect("status" in direct).toBe(false);
    expect((direct as sdk.Message).parts.map(partText).join("")).toBe("Direct message response");

    const text = asTask(await client.sendMessage(request(kitId("tck-artifact-text"))));
    expect(text.artifacts[0]!.parts.map(partText).join("")).toBe("Generated text content");

    const url = asTask(await client.sendMessage(request(kitId("tck-artifact-file-url"))));
    expect(url.artifacts[0]!.parts[0]).toMatchObject({
      content: { $case: "url", value: "https://example.com/output.txt" },
      filename: "output.txt",
      mediaType: "text/plain",
    });

    const file = asTask(await client.sendMessage(request(kitId("tck-artifact-file"))));
    expect(file.artifacts[0]!.parts[0]!.content?.$case).toBe("raw");
    expect(file.artifacts[0]!.parts[0]).toMatchObject({ filename: "output.txt", mediaType: "text/plain" });

    const data = asTask(await client.sendMessage(request(kitId("tck-artifact-data"))));
    expect(data.artifacts[0]!.parts[0]!.content).toEqual({ $case: "data", value: { key: "value", count: 42 } });

    const rejected = asTask(await client.sendMessage(request(kitId("tck-reject-task"))));
    expect(rejected.status?.state).toBe(S.TASK_STATE_REJECTED);

    const waiting = asTask(await client.sendMessage(request(kitId("tck-input-required"))));
    expect(waiting.status?.state).toBe(S.TASK_STATE_INPUT_REQUIRED);
    const still = asTask(await client.sendMessage(request(kitId("tck-input-required"), { taskId: waiting.id })));
    expect(still.status?.state).toBe(S.TASK_STATE_INPUT_REQUIRED);
    expect(still.history.filter((m) => m.role === sdk.Role.ROLE_USER)).toHaveLength(2);
    const done = asTask(await client.sendMessage(request(kitId("tck-complete-task"), { taskId: waiting.id })));
    expect([done.id, done.status?.state]).toEqual([waiting.id, S.TASK_STATE_COMPLETED]);

    const other = asTask(await client.sendMessage(request("anything-else")));
    expect(other.status?.state).toBe(S.TASK_STATE_COMPLETED);
  });

  it("streams each streaming scenario in order", async () => {
    const run = (prefix: string) => streamLabels(client.sendMessageStream(request(kitId(prefix))));
    const lifecycle = (artifact: string) => [
      "task:TASK_STATE_SUBMITTED",
      "status:TASK_STATE_WORKING",
      `artifact:${artifact}`,
      "status:TASK_STATE_COMPLETED",
    ];
    expect(await run("tck-stream-001")).toEqual(lifecycle("Stream hello from TCK"));
    expect(await run("tck-stream-002")).toEqual(["task:TASK_STATE_SUBMITTED", "status:TASK_STATE_COMPLETED"]);
    expect(await run("tck-stream-003")).toEqual(lifecycle("Stream task lifecycle"));
    expect(await run("tck-stream-ordering-001")).toEqual(lifecycle("Ordered output"));
    expect(await run("tck-stream-artifact-chunked")).toEqual([
      "task:TASK_STATE_SUBMITTED",
      "status:TASK_STATE_WORKING",
      "artifact:chunk-1 ",
      "artifact:chunk-2:append:last",
      "status:TASK_STATE_COMPLETED",
    ]);
    // A stream starts with its task before the agent answers: the direct Message becomes the task's end.
    expect(await run("tck-message-response")).toEqual([
      "task:TASK_STATE_SUBMITTED",
      "status:TASK_STATE_WORKING",
      "status:TASK_STATE_COMPLETED",
    ]);
    expect(await run("tck-reject-task")).toEqual(["task:TASK_STATE_SUBMITTED", "status:TASK_STATE_REJECTED"]);
    expect(await run("tck-artifact-file")).toEqual(lifecycle("raw"));
  });

  it("lets a client resubscribe to a test-resubscribe task while it works", async () => {
    const started = asTask(
      await client.sendMessage(request(kitId("test-resubscribe-message-id"), {}, { returnImmediately: true })),
    );
    const labels = await streamLabels(client.resubscribeTask(sdk.SubscribeToTaskRequest.fromJSON({ id: started.id })));
    expect(labels.slice(1)).toEqual(["status:TASK_STATE_WORKING", "status:TASK_STATE_COMPLETED"]);
  });

  it("keeps a subscription to an INPUT_REQUIRED task open through the follow-up to COMPLETED (STREAM-SUB-002)", async () => {
    const waiting = asTask(await client.sendMessage(request(kitId("tck-input-required"))));
    expect(waiting.status?.state).toBe(S.TASK_STATE_INPUT_REQUIRED);
    const events = client.resubscribeTask(sdk.SubscribeToTaskRequest.fromJSON({ id: waiting.id }));
    const iterator = events[Symbol.asyncIterator]();
    const first = await iterator.next();
    expect(first.value?.payload?.$case).toBe("task");
    const done = asTask(await client.sendMessage(request(kitId("tck-complete-task"), { taskId: waiting.id })));
    expect(done.status?.state).toBe(S.TASK_STATE_COMPLETED);
    const rest = await streamLabels({ [Symbol.asyncIterator]: () => iterator });
    // Only a stream's first event is a Task (3.1.2): the follow-up turn's start comes as a status update.
    expect(rest[0]).toBe("status:TASK_STATE_SUBMITTED");
    expect(rest.filter((label) => label.startsWith("task:"))).toEqual([]);
    expect(rest[rest.length - 1]).toBe("status:TASK_STATE_COMPLETED");
  });

  it("treats a true retry as a retry and a reused messageId with new content as a new message", async () => {
    const contextId = `retry-${crypto.randomUUID()}`;
    const id = kitId("tck-complete-task");
    const first = asTask(await client.sendMessage(request(id, { contextId })));
    const retried = asTask(await client.sendMessage(request(id, { contextId })));
    expect(retried.id).toBe(first.id);
    const reused = asTask(
      await client.sendMessage(
        sdk.SendMessageRequest.fromJSON({
          message: { messageId: id, contextId, role: "ROLE_USER", parts: [{ text: "new content" }] },
        }),
      ),
    );
    expect(reused.id).not.toBe(first.id);
  });
});

describe("capability switches and protocol errors over JSON-RPC", () => {
  let off: TestStack;
  let on: TestStack;
  let carded: TestStack;
  let receiver: ReturnType<typeof createServer>;
  const received: { headers: IncomingHttpHeaders; body: Record<string, unknown> }[] = [];
  let done: () => void;
  const completed = new Promise<void>((resolve) => (done = resolve));

  beforeAll(async () => {
    off = await startStack({
      agents: [{ name: "conformance", type: "conformance" }],
      capabilities: {
        streaming: false,
        pushNotifications: false,
        extendedAgentCard: false,
        requiredExtensions: [requiredExtension],
      },
    });
    carded = await startStack({
      agents: [{ name: "conformance", type: "conformance" }],
      capabilities: { streaming: true, pushNotifications: true, extendedAgentCard: true, requiredExtensions: [] },
      // The extended card is served to authenticated callers only.
      apiKeys: { "key-carded": "tck" },
    });
    on = await startStack({
      agents: [{ name: "conformance", type: "conformance" }],
      capabilities: { streaming: true, pushNotifications: true, extendedAgentCard: false, requiredExtensions: [] },
      // The kit's webhook receiver listens on loopback, which push notifications may not reach by default.
      push: {
        allowedHosts: [],
        allowedAddresses: ["127.0.0.1"],
        maxAttempts: 5,
        retryBaseMs: 500,
        timeoutMs: 10_000,
        maxConfigsPerTask: 10,
      },
    });
    receiver = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        const body = JSON.parse(Buffer.concat(chunks).toString()) as Record<string, unknown>;
        received.push({ headers: req.headers, body });
        res.writeHead(200).end();
        const state = (body.statusUpdate as { status?: { state?: string } } | undefined)?.status?.state;
        if (state === "TASK_STATE_COMPLETED") done();
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve));
  });
  afterAll(async () => {
    await off?.close();
    await on?.close();
    await carded?.close();
    await new Promise<void>((resolve) => receiver.close(() => resolve()));
  });

  it("gives -32003, -32004 and -32008 for switched-off capabilities and a missing extension", async () => {
    const url = off.bridge.url;
    const ext = { ...v1, "a2a-extensions": requiredExtension };
    const message = { messageId: crypto.randomUUID(), role: "ROLE_USER", parts: [{ text: "hi" }] };
    expect(await errorCode(url, rpc("SendMessage", { message }), v1)).toBe(-32008);
    expect(await errorCode(url, rpc("SendStreamingMessage", { message }), ext)).toBe(-32004);
    expect(await errorCode(url, rpc("GetExtendedAgentCard", {}), ext)).toBe(-32004);
    expect(
      await errorCode(url, rpc("CreateTaskPushNotificationConfig", { taskId: "t", url: "http://127.0.0.1/" }), ext),
    ).toBe(-32003);
    const accepted = await postRaw(url, rpc("SendMessage", { message }), ext);
    expect((accepted.json.result as { task?: { status?: { state?: string } } }).task?.status?.state).toBe(
      "TASK_STATE_COMPLETED",
    );
  });

  it("gives -32009 for an unsupported A2A-Version and reads an absent one as 0.3", async () => {
    const message = { messageId: crypto.randomUUID(), role: "ROLE_USER", parts: [{ text: "hi" }] };
    expect(await errorCode(on.bridge.url, rpc("SendMessage", { message }), { "a2a-version": "9.9" })).toBe(-32009);
    const legacy = await postRaw(
      on.bridge.url,
      rpc("message/send", {
        message: {
          kind: "message",
          messageId: crypto.randomUUID(),
          role: "user",
          parts: [{ kind: "text", text: "hi" }],
        },
      }),
    );
    expect((legacy.json.result as { kind?: string }).kind).toBe("task");
  });

  it("returns the extended card and delivers push notifications when they are switched on", async () => {
    const anonymous = await postRaw(carded.bridge.url, rpc("GetExtendedAgentCard", {}), v1);
    expect([anonymous.status, (anonymous.json.error as { code?: number }).code]).toEqual([401, -32053]);
    const card = await postRaw(carded.bridge.url, rpc("GetExtendedAgentCard", {}), {
      ...v1,
      authorization: "Bearer key-carded",
    });
    expect((card.json.result as { capabilities?: Record<string, unknown> }).capabilities).toMatchObject({
      pushNotifications: true,
      extendedAgentCard: true,
    });
    const { port } = receiver.address() as AddressInfo;
    const client = await new ClientFactory().createFromUrl(on.bridge.url);
    const task = asTask(
      await client.sendMessage(
        request(
          kitId("tck-stream-001"),
          {},
          {
            taskPushNotificationConfig: {
              url: `http://127.0.0.1:${port}/hook`,
              token: "jsonrpc-token",
              authentication: { scheme: "Bearer", credentials: "s3cret" },
            },
          },
        ),
      ),
    );
    expect(task.status?.state).toBe(S.TASK_STATE_COMPLETED);
    await completed;
    expect(received.map((r) => Object.keys(r.body)[0])).toEqual([
      "task",
      "statusUpdate",
      "artifactUpdate",
      "statusUpdate",
    ]);
    expect(received[0]!.headers).toMatchObject({
      "content-type": "application/a2a+json",
      authorization: "Bearer s3cret",
      "x-a2a-notification-token": "jsonrpc-token",
    });
    const refused = await postRaw(
      on.bridge.url,
      rpc("CreateTaskPushNotificationConfig", { taskId: task.id, url: "http://169.254.169.254/latest/meta-data/" }),
      v1,
    );
    expect((refused.json.error as { message?: string }).message).toContain(
      "169.254.169.254 is a cloud metadata endpoint",
    );
  });
});
