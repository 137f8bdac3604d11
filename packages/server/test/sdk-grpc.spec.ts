// The official A2A SDK's gRPC client, unmodified, against a real Parley.

import * as sdk from "@a2a-js/sdk";
import type { Client } from "@a2a-js/sdk/client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { framedEcho, sdkGrpcClient, startTestServer, type TestServer } from "./harness.js";

function send(text: string, extra: Record<string, unknown> = {}) {
  return sdk.SendMessageRequest.fromJSON({
    message: { messageId: crypto.randomUUID(), role: "ROLE_USER", parts: [{ text }], ...extra },
    ...("configuration" in extra ? { configuration: extra.configuration } : {}),
  });
}

function taskText(task: sdk.Task): string {
  return task.artifacts
    .flatMap((a) => a.parts)
    .map((p) => (p.content?.$case === "text" ? p.content.value : ""))
    .join("");
}

describe("@a2a-js/sdk gRPC client against Parley", () => {
  let server: TestServer;
  let slow: TestServer;
  let client: Client;
  let slowClient: Client;

  beforeAll(async () => {
    server = await startTestServer({ agents: [framedEcho] });
    slow = await startTestServer({ agents: [{ name: "echo", type: "echo", options: { delayMs: 50, chunks: 8 } }] });
    client = await sdkGrpcClient(server);
    slowClient = await sdkGrpcClient(slow);
  });
  afterAll(async () => {
    await server.close();
    await slow.close();
  });

  it("sends, and continues the conversation over one contextId", async () => {
    const first = (await client.sendMessage(send("remember the number 42"))) as sdk.Task;
    expect(first.status?.state).toBe(sdk.TaskState.TASK_STATE_COMPLETED);
    expect(taskText(first)).toBe("remember the number 42");
    const second = (await client.sendMessage(send("which number?", { contextId: first.contextId }))) as sdk.Task;
    expect(second.contextId).toBe(first.contextId);
    expect(taskText(second)).toContain("user: remember the number 42");
    expect(taskText(second).endsWith("which number?")).toBe(true);
  });

  it("streams a task with appended artifact chunks", async () => {
    const cases: string[] = [];
    let text = "";
    for await (const event of client.sendMessageStream(send("streamed through the SDK"))) {
      cases.push(event.payload!.$case);
      if (event.payload?.$case === "artifactUpdate") {
        text += event.payload.value
          .artifact!.parts.map((p) => (p.content?.$case === "text" ? p.content.value : ""))
          .join("");
      }
    }
    expect(cases[0]).toBe("task");
    expect(cases[cases.length - 1]).toBe("statusUpdate");
    expect(text).toBe("streamed through the SDK");
  });

  it("gets and lists tasks", async () => {
    const task = (await client.sendMessage(send("to be listed", { contextId: "sdk-list" }))) as sdk.Task;
    const got = await client.getTask(sdk.GetTaskRequest.fromJSON({ id: task.id }));
    expect(got.id).toBe(task.id);
    const listed = await client.listTasks(sdk.ListTasksRequest.fromJSON({ contextId: "sdk-list" }));
    expect(listed.tasks.map((t) => t.id)).toEqual([task.id]);
  });

  it("cancels a running task and resubscribes to one", async () => {
    const started = (await slowClient.sendMessage(
      send("cancel me", { contextId: "sdk-cancel", configuration: { returnImmediately: true } }),
    )) as sdk.Task;
    const canceled = await slowClient.cancelTask(sdk.CancelTaskRequest.fromJSON({ id: started.id }));
    expect(canceled.status?.state).toBe(sdk.TaskState.TASK_STATE_CANCELED);

    const running = (await slowClient.sendMessage(
      send("watch me", { contextId: "sdk-resubscribe", configuration: { returnImmediately: true } }),
    )) as sdk.Task;
    const seen: string[] = [];
    for await (const event of slowClient.resubscribeTask(sdk.SubscribeToTaskRequest.fromJSON({ id: running.id }))) {
      seen.push(event.payload!.$case);
    }
    expect(seen[0]).toBe("task");
    expect(seen).toContain("artifactUpdate");
    const final = await slowClient.getTask(sdk.GetTaskRequest.fromJSON({ id: running.id }));
    expect(final.status?.state).toBe(sdk.TaskState.TASK_STATE_COMPLETED);
  });
});
