// The conformance agent's scenarios, driven through the official @a2a-js/sdk gRPC client.

import * as sdk from "@a2a-js/sdk";
import type { Client } from "@a2a-js/sdk/client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { asTask, kitId, partText, request, statusText } from "./fixtures/kit-requests.js";
import { sdkGrpcClient as sdkClient, startTestServer, type TestServer } from "./harness.js";

const S = sdk.TaskState;

/** A stream's events as short labels: task, status names, artifact texts, message texts. */
async function* labelsOf(events: AsyncIterable<sdk.StreamResponse>): AsyncGenerator<string> {
  for await (const event of events) {
    const payload = event.payload!;
    switch (payload.$case) {
      case "task":
        yield `task:${S[payload.value.status!.state]}`;
        break;
      case "statusUpdate":
        yield `status:${S[payload.value.status!.state]}`;
        break;
      case "artifactUpdate": {
        const update = payload.value;
        const content = update.artifact!.parts[0]?.content;
        yield `artifact:${update.artifact!.artifactId}:${content?.$case === "text" ? content.value : content?.$case}${update.append ? ":append" : ""}${update.lastChunk ? ":last" : ""}`;
        break;
      }
      case "message":
        yield `message:${payload.value.parts.map(partText).join("")}`;
        break;
    }
  }
}

/** A whole stream as a list of labels. */
async function streamLabels(events: AsyncIterable<sdk.StreamResponse>): Promise<string[]> {
  const labels: string[] = [];
  for await (const label of labelsOf(events)) labels.push(label);
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

    // STREAM-SUB-002: the subscription stays open while the task waits and follows the follow-up to its end.
    const subscribed: string[] = [];
    let opened!: () => void;
    const first = new Promise<void>((resolve) => {
      opened = resolve;
    });
    const following = (async () => {
      for await (const label of labelsOf(
        client.resubscribeTask(sdk.SubscribeToTaskRequest.fromJSON({ id: waiting.id })),
      )) {
        subscribed.push(label);
        opened();
      }
    })();
    await first;
    expect(subscribed).toEqual(["task:TASK_STATE_INPUT_REQUIRED"]);

    const done = asTask(await client.sendMessage(request(kitId("tck-complete-task"), { taskId: waiting.id })));
    expect(done.id).toBe(waiting.id);
    expect(done.status?.state).toBe(S.TASK_STATE_COMPLETED);
    expect(statusText(done)).toBe("Hello from TCK");
    await following;
    expect(subscribed[0]).toBe("task:TASK_STATE_INPUT_REQUIRED");
    // Only the first event is a Task (3.1.2): the follow-up turn's start arrives as a status update.
    expect(subscribed[1]).toBe("status:TASK_STATE_SUBMITTED");
    expect(subscribed.filter((label) => label.startsWith("task:"))).toHaveLength(1);
    expect(subscribed[subscribed.length - 1]).toBe("status:TASK_STATE_COMPLETED");

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
    // A stream starts with its task before the agent answers: the direct Message becomes the task's end.
    expect(await run("tck-message-response")).toEqual([
      "task:TASK_STATE_SUBMITTED",
      "status:TASK_STATE_WORKING",
      "status:TASK_STATE_COMPLETED",
    ]);
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
