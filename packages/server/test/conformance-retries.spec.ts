// messageId reuse against true retries, through the official @a2a-js/sdk gRPC client.

import * as sdk from "@a2a-js/sdk";
import type { Client } from "@a2a-js/sdk/client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { asTask, kitId, partText, request } from "./fixtures/kit-requests.js";
import { sdkGrpcClient as sdkClient, startTestServer, type TestServer } from "./harness.js";

const S = sdk.TaskState;

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

  // Issue 18 changed this: an identical resend without contextId is a retry (answered with the first task);
  // a reused messageId with new content still starts a new task each time.
  it("runs a reused messageId with new content as a new task each time it starts a new conversation", async () => {
    const id = kitId("tck-complete-task");
    const tasks = [];
    for (let i = 0; i < 3; i++) {
      tasks.push(
        asTask(
          await client.sendMessage(
            sdk.SendMessageRequest.fromJSON({
              message: { messageId: id, role: "ROLE_USER", parts: [{ text: `scenario ${id}, attempt ${i}` }] },
            }),
          ),
        ),
      );
    }
    expect(new Set(tasks.map((t) => t.id)).size).toBe(3);
    expect(new Set(tasks.map((t) => t.contextId)).size).toBe(3);
    for (const task of tasks) expect(task.status?.state).toBe(S.TASK_STATE_COMPLETED);
  });

  it("answers a true retry without a contextId (same messageId and content) with the first task", async () => {
    const retry = request(kitId("tck-complete-task"));
    const first = asTask(await client.sendMessage(retry));
    const second = asTask(await client.sendMessage(retry));
    expect(second.id).toBe(first.id);
    expect(second.contextId).toBe(first.contextId);
    expect(second.history.filter((m) => m.role === sdk.Role.ROLE_USER)).toHaveLength(1);
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
