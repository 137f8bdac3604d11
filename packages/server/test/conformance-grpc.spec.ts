// The conformance agent's scenarios, capability switches, A2A-Version and
// messageId reuse, driven through the official @a2a-js/sdk gRPC client.

import * as sdk from "@a2a-js/sdk";
import { type Client, ServiceParameters, withA2AExtensions } from "@a2a-js/sdk/client";
import { ConnectError } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { errorReasonOf } from "../src/index.js";
import { sdkGrpcClient as sdkClient, startTestServer, type TestServer, userMessage } from "./harness.js";

const S = sdk.TaskState;
const requiredExtension = "urn:a2a:tck:required-extension";

let counter = 0;
/** A messageId as the kit builds it: the scenario prefix, 8 hex digits, sometimes a transport suffix. */
function kitId(prefix: string, suffix = ""): string {
  return `${prefix}-${(0x10000000 + counter++).toString(16)}${suffix}`;
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

function statusText(task: sdk.Task): string {
  return (task.status?.message?.parts ?? []).map(partText).join("");
}

function asTask(result: sdk.Task | sdk.Message): sdk.Task {
  if (!("id" in result)) throw new Error(`expected a Task, got a Message: ${JSON.stringify(result)}`);
  return result as sdk.Task;
}

/** A stream as a list of short labels: task, status names, artifact texts, message texts. */
async function streamLabels(events: AsyncIterable<sdk.StreamResponse>): Promise<string[]> {
  const labels: string[] = [];
  for await (const event of events) {
    const payload = event.payload!;
    switch (payload.$case) {
      case "task":
        labels.push(`task:${S[payload.value.status!.state]}`);
        break;
      case "statusUpdate":
        labels.push(`status:${S[payload.value.status!.state]}`);
        break;
      case "artifactUpdate": {
        const update = payload.value;
        const content = update.artifact!.parts[0]?.content;
        labels.push(
          `artifact:${update.artifact!.artifactId}:${content?.$case === "text" ? content.value : content?.$case}${update.append ? ":append" : ""}${update.lastChunk ? ":last" : ""}`,
        );
        break;
      }
      case "message":
        labels.push(`message:${payload.value.parts.map(partText).join("")}`);
        break;
    }
  }
  return labels;
}

const stateRank: Record<string, number> = {
  TASK_STATE_SUBMITTED: 0,
  TASK_STATE_WORKING: 1,
  TASK_STATE_INPUT_REQUIRED: 2,
  TASK_STATE_COMPLETED: 3,
  TASK_STATE_REJECTED: 3,
  TASK_STATE_CANCELED: 3,
  TASK_STATE_FAILED: 3,
};

function expectForwardOnly(labels: string[]): void {
  const ranks = labels
    .filter((l) => l.startsWith("task:") || l.startsWith("status:"))
    .map((l) => stateRank[l.split(":")[1]!]!);
  expect(ranks).toEqual([...ranks].sort((a, b) => a - b));
}

function reasonOf(error: unknown): string | undefined {
  if (error instanceof ConnectError) return errorReasonOf(error);
  return (error as { reason?: string }).reason;
}

describe("conformance agent over the @a2a-js/sdk gRPC client", () => {
  let server: TestServer;
  let client: Client;

  beforeAll(async () => {
    server = await startTestServer({
      agents: [{ name: "conformance", type: "conformance" }],
      capabilities: { pushNotifications: true, extendedAgentCard: true },
    });
    client = await sdkClient(server);
  });
  afterAll(async () => {
    await server.close();
  });

  it("answers each unary scenario as the kit expects", async () => {
    const complete = asTask(await client.sendMessage(request(kitId("tck-complete-task", "-grpc"))));
    expect(complete.status?.state).toBe(S.TASK_STATE_COMPLETED);
    expect(statusText(complete)).toBe("Hello from TCK");

    const direct = await client.sendMessage(request(kitId("tck-message-response")));
    expect("id" in direct).toBe(false);
    expect((direct as sdk.Message).role).toBe(sdk.Role.ROLE_AGENT);
    expect((direct as sdk.Message).parts.map(partText).join("")).toBe("Direct message response");

    const textArtifact = asTask(await client.sendMessage(request(kitId("tck-artifact-text"))));
    expect(textArtifact.status?.state).toBe(S.TASK_STATE_COMPLETED);
    expect(textArtifact.artifacts.map((a) => a.parts.map(partText).join(""))).toEqual(["Generated text content"]);

    const urlArtifact = asTask(await client.sendMessage(request(kitId("tck-artifact-file-url"))));
    const urlPart = urlArtifact.artifacts[0]!.parts[0]!;
    expect(urlPart.content).toEqual({ $case: "url", value: "https://example.com/output.txt" });
    expect([urlPart.filename, urlPart.mediaType]).toEqual(["output.txt", "text/plain"]);

    const fileArtifact = asTask(await client.sendMessage(request(kitId("tck-artifact-file"))));
    const filePart = fileArtifact.artifacts[0]!.parts[0]!;
    expect(filePart.content?.$case).toBe("raw");
    expect(Buffer.from(filePart.content!.value as Uint8Array).toString()).toBe("Generated file content");
    expect([filePart.filename, filePart.mediaType]).toEqual(["output.txt", "text/plain"]);

    const dataArtifact = asTask(await client.sendMessage(request(kitId("tck-artifact-data"))));
    const dataPart = dataArtifact.artifacts[0]!.parts[0]!;
    expect(dataPart.content?.$case).toBe("data");
    expect(dataPart.content!.value).toEqual({ key: "value", count: 42 });

    const rejected = asTask(await client.sendMessage(request(kitId("tck-reject-task"))));
    expect(rejected.status?.state).toBe(S.TASK_STATE_REJECTED);
    expect(statusText(rejected)).toBe("rejected");

    const other = asTask(await client.sendMessage(request("some-other-message-id")));
    expect(other.status?.state).toBe(S.TASK_STATE_COMPLETED);
  });

  it("keeps an input-required task open for follow-ups, cancel and subscribe", async () => {
    const waiting = asTask(await client.sendMessage(request(kitId("tck-input-required"))));
    expect(waiting.status?.state).toBe(S.TASK_STATE_INPUT_REQUIRED);

    const again = asTask(
      await client.sendMessage(
        request(kitId("tck-input-required"), { taskId: waiting.id, contextId: waiting.contextId }),
      ),
    );
    expect(again.id).toBe(waiting.id);
    expect(again.status?.state).toBe(S.TASK_STATE_INPUT_REQUIRED);
    expect(again.history.filter((m) => m.role === sdk.Role.ROLE_USER)).toHaveLength(2);

    const subscribed = await streamLabels(
      client.resubscribeTask(sdk.SubscribeToTaskRequest.fromJSON({ id: waiting.id })),
    );
    expect(subscribed).toEqual(["task:TASK_STATE_INPUT_REQUIRED"]);

    const done = asTask(await client.sendMessage(request(kitId("tck-complete-task"), { taskId: waiting.id })));
    expect(done.id).toBe(waiting.id);
    expect(done.status?.state).toBe(S.TASK_STATE_COMPLETED);
    expect(statusText(done)).toBe("Hello from TCK");

    const other = asTask(await client.sendMessage(request(kitId("tck-input-required"))));
    const followed = asTask(await client.sendMessage(request("a-plain-follow-up", { taskId: other.id })));
    expect(followed.status?.state).toBe(S.TASK_STATE_COMPLETED);

    const toCancel = asTask(await client.sendMessage(request(kitId("tck-input-required"))));
    const canceled = await client.cancelTask(sdk.CancelTaskRequest.fromJSON({ id: toCancel.id }));
    expect(canceled.status?.state).toBe(S.TASK_STATE_CANCELED);
  });

  it("streams each streaming scenario in order, states never going backwards", async () => {
    const run = async (prefix: string) => {
      const labels = await streamLabels(client.sendMessageStream(request(kitId(prefix))));
      expectForwardOnly(labels);
      return labels;
    };
    expect(await run("tck-stream-001")).toEqual([
      "task:TASK_STATE_SUBMITTED",
      "status:TASK_STATE_WORKING",
      "artifact:stream-artifact:Stream hello from TCK",
      "status:TASK_STATE_COMPLETED",
    ]);
    expect(await run("tck-stream-002")).toEqual(["task:TASK_STATE_SUBMITTED", "status:TASK_STATE_COMPLETED"]);
    expect(await run("tck-stream-003")).toEqual([
      "task:TASK_STATE_SUBMITTED",
      "status:TASK_STATE_WORKING",
      "artifact:stream-artifact:Stream task lifecycle",
      "status:TASK_STATE_COMPLETED",
    ]);
    expect(await run("tck-stream-ordering-001")).toEqual([
      "task:TASK_STATE_SUBMITTED",
      "status:TASK_STATE_WORKING",
      "artifact:ordered-artifact:Ordered output",
      "status:TASK_STATE_COMPLETED",
    ]);
    expect(await run("tck-stream-artifact-chunked")).toEqual([
      "task:TASK_STATE_SUBMITTED",
      "status:TASK_STATE_WORKING",
      "artifact:chunked-artifact:chunk-1 ",
      "artifact:chunked-artifact:chunk-2:append:last",
      "status:TASK_STATE_COMPLETED",
    ]);
    expect(await run("tck-message-response")).toEqual(["message:Direct message response"]);
    expect(await run("tck-input-required")).toEqual(["task:TASK_STATE_SUBMITTED", "status:TASK_STATE_INPUT_REQUIRED"]);
    expect(await run("tck-reject-task")).toEqual(["task:TASK_STATE_SUBMITTED", "status:TASK_STATE_REJECTED"]);
    expect(await run("tck-artifact-file-url")).toEqual([
      "task:TASK_STATE_SUBMITTED",
      "status:TASK_STATE_WORKING",
      "artifact:file-url-artifact:url",
      "status:TASK_STATE_COMPLETED",
    ]);
    expect((await run("tck-artifact-data")).slice(-2)).toEqual([
      "artifact:data-artifact:data",
      "status:TASK_STATE_COMPLETED",
    ]);

    let chunkedId = "";
    for await (const event of client.sendMessageStream(request(kitId("tck-stream-artifact-chunked")))) {
      if (event.payload?.$case === "task") chunkedId = event.payload.value.id;
    }
    const chunked = await client.getTask(sdk.GetTaskRequest.fromJSON({ id: chunkedId }));
    expect(chunked.artifacts.map((a) => a.parts.map(partText).join(""))).toEqual(["chunk-1 chunk-2"]);
  });

  it("keeps a test-resubscribe task working long enough to resubscribe, then completes it", async () => {
    const started = asTask(
      await client.sendMessage(request(kitId("test-resubscribe-message-id"), {}, { returnImmediately: true })),
    );
    const labels = await streamLabels(client.resubscribeTask(sdk.SubscribeToTaskRequest.fromJSON({ id: started.id })));
    expect(labels[0]!.startsWith("task:")).toBe(true);
    expect(labels.slice(1)).toEqual(["status:TASK_STATE_WORKING", "status:TASK_STATE_COMPLETED"]);
  });
});

describe("messageId reuse against true retries", () => {
  let server: TestServer;
  let client: Client;

  beforeAll(async () => {
    server = await startTestServer({ agents: [{ name: "conformance", type: "conformance" }] });
    client = await sdkClient(server);
  });
  afterAll(async () => {
    await server.close();
  });

  it("runs a reused messageId as a new task each time it starts a new conversation", async () => {
    const id = kitId("tck-complete-task");
    const tasks = [];
    for (let i = 0; i < 3; i++) tasks.push(asTask(await client.sendMessage(request(id))));
    expect(new Set(tasks.map((t) => t.id)).size).toBe(3);
    expect(new Set(tasks.map((t) => t.contextId)).size).toBe(3);
    for (const task of tasks) expect(task.status?.state).toBe(S.TASK_STATE_COMPLETED);
  });

  it("processes the same messageId twice into one task when the content differs", async () => {
    const id = kitId("tck-input-required");
    const waiting = asTask(await client.sendMessage(request(id)));
    const follow = (text: string) =>
      sdk.SendMessageRequest.fromJSON({
        message: { messageId: id, taskId: waiting.id, role: "ROLE_USER", parts: [{ text }] },
      });
    await client.sendMessage(follow("first follow-up"));
    const second = asTask(await client.sendMessage(follow("second follow-up")));
    expect(second.status?.state).toBe(S.TASK_STATE_INPUT_REQUIRED);
    const userTexts = second.history
      .filter((m) => m.role === sdk.Role.ROLE_USER)
      .map((m) => m.parts.map(partText).join(""));
    expect(userTexts).toEqual([`scenario ${id}`, "first follow-up", "second follow-up"]);
  });

  it("answers a true retry (same thread, messageId and content) from the store", async () => {
    const retry = request(kitId("tck-artifact-text"), { contextId: `retry-${crypto.randomUUID()}` });
    const first = asTask(await client.sendMessage(retry));
    const second = asTask(await client.sendMessage(retry));
    expect(second.id).toBe(first.id);
    expect(second.history).toHaveLength(first.history.length);
    const listed = await client.listTasks(sdk.ListTasksRequest.fromJSON({ contextId: first.contextId }));
    expect(listed.tasks).toHaveLength(1);

    const changed = asTask(
      await client.sendMessage(
        sdk.SendMessageRequest.fromJSON({
          message: { ...(sdk.Message.toJSON(retry.message!) as object), parts: [{ text: "other content, same id" }] },
        }),
      ),
    );
    expect(changed.id).not.toBe(first.id);
    expect(changed.contextId).toBe(first.contextId);
  });

  it("attaches a true retry to the task its first send started while that task runs", async () => {
    const retry = request(
      kitId("test-resubscribe-message-id"),
      { contextId: `running-${crypto.randomUUID()}` },
      { returnImmediately: true },
    );
    const first = asTask(await client.sendMessage(retry));
    const second = asTask(await client.sendMessage(retry));
    expect(second.id).toBe(first.id);
    const canceled = await client.cancelTask(sdk.CancelTaskRequest.fromJSON({ id: first.id }));
    expect(canceled.status?.state).toBe(S.TASK_STATE_CANCELED);
  });
});

describe("capability switches and protocol checks", () => {
  let on: TestServer;
  let off: TestServer;

  beforeAll(async () => {
    on = await startTestServer({
      agents: [{ name: "conformance", type: "conformance" }],
      capabilities: { pushNotifications: true, extendedAgentCard: true },
    });
    off = await startTestServer({
      agents: [{ name: "conformance", type: "conformance" }],
      capabilities: {
        streaming: false,
        pushNotifications: false,
        extendedAgentCard: false,
        requiredExtensions: [requiredExtension],
      },
    });
  });
  afterAll(async () => {
    await on.close();
    await off.close();
  });

  it("reflects every switch in the agent card", () => {
    const onCard = on.parley.agentCard({ grpcAddress: on.address });
    expect(onCard.capabilities).toMatchObject({ streaming: true, pushNotifications: true, extendedAgentCard: true });
    expect(onCard.capabilities?.extensions).toEqual([]);
    const offCard = off.parley.agentCard({ grpcAddress: off.address });
    expect(offCard.capabilities).toMatchObject({
      streaming: false,
      pushNotifications: false,
      extendedAgentCard: false,
    });
    expect(offCard.capabilities?.extensions.map((e) => [e.uri, e.required])).toEqual([[requiredExtension, true]]);
  });

  it("returns the extended card when it is switched on", async () => {
    const client = await sdkClient(on);
    const card = await client.getAgentCard();
    expect(card.name).toBe("Parley");
    expect(card.skills[0]?.inputModes).toEqual(["text/plain"]);
  });

  it("refuses the RPCs of switched-off capabilities with the specification's errors", async () => {
    const ext = { "a2a-version": "1.0", "a2a-extensions": requiredExtension };
    const a2a = off.a2a("grpc", ext);
    const reason = (p: Promise<unknown> | AsyncIterable<unknown>) =>
      (Symbol.asyncIterator in p
        ? (async () => {
            for await (const _ of p as AsyncIterable<unknown>);
          })()
        : (p as Promise<unknown>)
      ).then(
        () => "resolved",
        (e: unknown) => reasonOf(e),
      );
    expect(await reason(a2a.sendStreamingMessage({ message: userMessage("stream please") }))).toBe(
      "UNSUPPORTED_OPERATION",
    );
    expect(await reason(a2a.subscribeToTask({ id: "any" }))).toBe("UNSUPPORTED_OPERATION");
    expect(await reason(a2a.getExtendedAgentCard({}))).toBe("EXTENDED_AGENT_CARD_NOT_CONFIGURED");
    for (const call of [
      a2a.createTaskPushNotificationConfig({ taskId: "t", url: "http://127.0.0.1/hook" }),
      a2a.getTaskPushNotificationConfig({ taskId: "t", id: "c" }),
      a2a.listTaskPushNotificationConfigs({ taskId: "t" }),
      a2a.deleteTaskPushNotificationConfig({ taskId: "t", id: "c" }),
      a2a.sendMessage({
        message: userMessage("with a webhook"),
        configuration: { taskPushNotificationConfig: { url: "http://127.0.0.1/hook" } },
      }),
    ]) {
      expect(await reason(call)).toBe("PUSH_NOTIFICATION_NOT_SUPPORTED");
    }
  });

  it("requires a declared extension in A2A-Extensions, through the SDK client too", async () => {
    const client = await sdkClient(off);
    const refused = await client.sendMessage(request(kitId("tck-complete-task"))).catch((e: unknown) => e);
    expect(reasonOf(refused)).toBe("EXTENSION_SUPPORT_REQUIRED");
    expect((refused as { metadata?: Record<string, string> }).metadata?.extensions).toBe(requiredExtension);
    const accepted = asTask(
      await client.sendMessage(request(kitId("tck-complete-task")), {
        serviceParameters: ServiceParameters.create(withA2AExtensions(requiredExtension)),
      }),
    );
    expect(accepted.status?.state).toBe(S.TASK_STATE_COMPLETED);
  });

  it("treats an absent or empty A2A-Version as 0.3 and refuses an unsupported one", async () => {
    for (const headers of [
      {} as Record<string, string>,
      { "a2a-version": "" },
      { "a2a-version": "0.3" },
      { "a2a-version": "1.0" },
    ]) {
      const result = await on.a2a("grpc", headers).sendMessage({ message: userMessage("version check") });
      expect(result.payload.case).toBe("task");
    }
    const refused = await on
      .a2a("grpc", { "a2a-version": "2.0" })
      .sendMessage({ message: userMessage("too new") })
      .catch((e: unknown) => e);
    expect(reasonOf(refused)).toBe("VERSION_NOT_SUPPORTED");
    expect(ConnectError.from(refused).rawMessage).toContain('"2.0" is not supported');
  });
});
