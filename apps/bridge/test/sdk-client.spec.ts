import { randomUUID } from "node:crypto";
import {
  CancelTaskRequest,
  GetTaskRequest,
  ListTasksRequest,
  type Message,
  SendMessageConfiguration,
  SendMessageRequest,
  type StreamResponse,
  SubscribeToTaskRequest,
  type Task,
  TaskState,
} from "@a2a-js/sdk";
import {
  AgentCardResolver,
  type Client,
  ClientFactory,
  ClientFactoryOptions,
  DefaultAgentCardResolver,
  JsonRpcTransportFactory,
} from "@a2a-js/sdk/client";
import { GrpcTransportFactory } from "@a2a-js/sdk/client/grpc";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { collect, postRaw, rpc, startStack, type TestStack } from "./harness.js";

let stack: TestStack;
let client: Client;
let slow: Client;

beforeAll(async () => {
  // The framed echo: its reply shows the history block the second turn arrived with.
  stack = await startStack({
    agents: [
      { name: "echo", type: "echo", options: { input: "framed" } },
      { name: "slow", type: "echo", options: { delayMs: 200, chunks: 10 } },
    ],
  });
  client = await new ClientFactory().createFromUrl(stack.bridge.url);
  slow = await new ClientFactory().createFromUrl(`${stack.bridge.url}agents/slow/`);
});

afterAll(async () => {
  await stack?.close();
});

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

/** The reply text a stream delivered: its artifact chunks, concatenated in order. */
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

describe("A2A 1.0 through the official SDK client", () => {
  it("picks the bridge's JSON-RPC 1.0 interface from the agent card", () => {
    expect(client.protocolVersion).toBe("1.0");
  });

  it("sends a blocking message and gets the completed task with the echo reply", async () => {
    const task = asTask(await client.sendMessage(userMessage("hello bridge")));
    expect(task.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(textOf(task)).toBe("hello bridge");
    expect(task.contextId).not.toBe("");
  });

  it("streams a task: the Task first, then updates, ending COMPLETED", async () => {
    const events = await collect(client.sendMessageStream(userMessage("stream me")));
    expect(events[0]?.payload?.$case).toBe("task");
    expect(events.some((e) => e.payload?.$case === "artifactUpdate")).toBe(true);
    expect(lastState(events)).toBe(TaskState.TASK_STATE_COMPLETED);
    const text = streamedText(events);
    expect(text).toBe("stream me");
  });

  it("carries a conversation over one contextId: turn 2 sees turn 1 inside the history guard block", async () => {
    const first = asTask(await client.sendMessage(userMessage("my name is Ada")));
    const second = asTask(await client.sendMessage(userMessage("what is my name?", { contextId: first.contextId })));
    expect(second.contextId).toBe(first.contextId);
    expect(second.id).not.toBe(first.id);
    const reply = textOf(second);
    expect(reply).toMatch(/^<<<PARLEY_HISTORY [0-9a-f]+>>>/);
    expect(reply).toContain("my name is Ada");
    expect(reply.endsWith("what is my name?")).toBe(true);

    const listed = await client.listTasks(ListTasksRequest.fromJSON({ contextId: first.contextId }));
    expect(listed.tasks.map((t) => t.id).sort()).toEqual([first.id, second.id].sort());

    const fetched = await client.getTask(GetTaskRequest.fromJSON({ id: second.id }));
    expect(fetched.id).toBe(second.id);
    expect(fetched.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
  });

  it("cancels a running task", async () => {
    const stream = slow.sendMessageStream(userMessage("cancel me"));
    const first = await stream.next();
    const task = first.value?.payload?.$case === "task" ? first.value.payload.value : undefined;
    expect(task).toBeDefined();
    const canceled = await slow.cancelTask(CancelTaskRequest.fromJSON({ id: task!.id }));
    expect(canceled.status?.state).toBe(TaskState.TASK_STATE_CANCELED);
    const rest = await collect({ [Symbol.asyncIterator]: () => stream });
    expect(lastState(rest)).toBe(TaskState.TASK_STATE_CANCELED);
  });

  it("resubscribes to a running task from a second client and follows it to the end", async () => {
    const stream = slow.sendMessageStream(userMessage("follow me"));
    const first = await stream.next();
    const taskId = first.value?.payload?.$case === "task" ? first.value.payload.value.id : "";
    const other = await new ClientFactory().createFromUrl(`${stack.bridge.url}agents/slow/`);
    const [resubscribed, original] = await Promise.all([
      collect(other.resubscribeTask(SubscribeToTaskRequest.fromJSON({ id: taskId }))),
      collect({ [Symbol.asyncIterator]: () => stream }),
    ]);
    expect(resubscribed[0]?.payload?.$case).toBe("task");
    expect(lastState(resubscribed)).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(lastState(original)).toBe(TaskState.TASK_STATE_COMPLETED);
  });

  it("turns typed server errors into the SDK's typed errors", async () => {
    await expect(client.getTask(GetTaskRequest.fromJSON({ id: "no-such-task" }))).rejects.toMatchObject({
      name: expect.stringMatching(/TaskNotFound/),
    });
  });

  it("gets a JSON-RPC error, not an HTTP one, from an agent URL that names no hosted agent", async () => {
    // A card whose interfaces point at /agents/nope/: what a client holds when an agent was renamed or removed.
    const card = await AgentCardResolver.default.resolve(stack.bridge.url);
    const nope = `${stack.bridge.url}agents/nope/`;
    const stale = await new ClientFactory().createFromAgentCard({
      ...card,
      supportedInterfaces: card.supportedInterfaces.map((i) => ({ ...i, url: nope })),
    });
    await expect(stale.getTask(GetTaskRequest.fromJSON({ id: "x" }))).rejects.toMatchObject({
      envelopeCode: -32602,
      message: 'no agent named "nope"; known agents: echo, slow',
      data: { agent: "nope", agents: ["echo", "slow"] },
    });
  });
});

describe("A2A 0.3 through the SDK's legacy-compat client", () => {
  let legacy: Client;
  let slowLegacy: Client;
  const sentMethods: string[] = [];
  /** The params of every request the SDK put on the wire, to show what 0.3 form the bridge was given. */
  const sentParams: Record<string, unknown>[] = [];

  beforeAll(async () => {
    const recordingFetch: typeof fetch = async (input, init) => {
      if (typeof init?.body === "string") {
        const body = JSON.parse(init.body);
        sentMethods.push(body.method);
        sentParams.push(body.params);
      }
      return fetch(input, init);
    };
    const factory = new ClientFactory(
      ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
        transports: [new JsonRpcTransportFactory({ legacyCompat: { enabled: true }, fetchImpl: recordingFetch })],
        cardResolver: new DefaultAgentCardResolver({ legacyCompat: { enabled: true } }),
      }),
    );
    // The 0.3 card (asked for explicitly) names only what a 0.3 client understands.
    legacy = await factory.createFromUrl(stack.bridge.url, "/.well-known/agent-card.json?A2A-Version=0.3");
    slowLegacy = await factory.createFromUrl(
      `${stack.bridge.url}agents/slow/`,
      ".well-known/agent-card.json?A2A-Version=0.3",
    );
  });

  it("speaks 0.3", () => {
    expect(legacy.protocolVersion).toBe("0.3");
  });

  it("a 0.3 client that prefers gRPC is left JSON-RPC by the 0.3 card, and its sends work", async () => {
    // The h2c port serves A2A 1.0's lf.a2a.v1.A2AService only; this client would call 0.3's a2a.v1.A2AService.
    const posted: string[] = [];
    const recordingFetch: typeof fetch = async (input, init) => {
      if (typeof init?.body === "string") posted.push(JSON.parse(init.body).method);
      return fetch(input, init);
    };
    const factory = new ClientFactory(
      ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
        transports: [
          new GrpcTransportFactory({ legacyCompat: { enabled: true } }),
          new JsonRpcTransportFactory({ legacyCompat: { enabled: true }, fetchImpl: recordingFetch }),
        ],
        preferredTransports: ["GRPC"],
        cardResolver: new DefaultAgentCardResolver({ legacyCompat: { enabled: true } }),
      }),
    );
    for (const base of [stack.bridge.url, `${stack.bridge.url}agents/echo/`]) {
      const grpcFirst = await factory.createFromUrl(base, ".well-known/agent-card.json?A2A-Version=0.3");
      expect(grpcFirst.protocolVersion).toBe("0.3");
      const task = asTask(await grpcFirst.sendMessage(userMessage("gRPC preferred")));
      expect(task.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
      expect(textOf(task)).toBe("gRPC preferred");
    }
    expect(posted).toEqual(["message/send", "message/send"]);
  });

  it("message/send: a blocking send answered with the completed task", async () => {
    const task = asTask(await legacy.sendMessage(userMessage("legacy hello")));
    expect(task.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(textOf(task)).toBe("legacy hello");
    expect(sentMethods).toContain("message/send");
  });

  it("message/stream: events with kinds, the final one COMPLETED, over the same context", async () => {
    const first = asTask(await legacy.sendMessage(userMessage("turn one")));
    const events = await collect(legacy.sendMessageStream(userMessage("turn two", { contextId: first.contextId })));
    expect(sentMethods).toContain("message/stream");
    expect(events[0]?.payload?.$case).toBe("task");
    expect(lastState(events)).toBe(TaskState.TASK_STATE_COMPLETED);
    const text = streamedText(events);
    expect(text).toContain("turn one");
    expect(text.endsWith("turn two")).toBe(true);
  });

  it("message/send with blocking:false answers with the task at once and lets it run on", async () => {
    const request = userMessage("do not wait for me");
    request.configuration = SendMessageConfiguration.fromJSON({ returnImmediately: true });
    const task = asTask(await slowLegacy.sendMessage(request));
    expect(sentParams.at(-1)?.configuration).toMatchObject({ blocking: false });
    // The slow agent needs 10 chunks 200 ms apart: a send that waited for it would come back COMPLETED.
    expect([TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING]).toContain(task.status?.state);
    const rest = await collect(slowLegacy.resubscribeTask(SubscribeToTaskRequest.fromJSON({ id: task.id })));
    expect(lastState(rest)).toBe(TaskState.TASK_STATE_COMPLETED);
  });

  it("message/send unwraps a data_part_compat DataPart: the thread stores the bare value, without the flag", async () => {
    const request = SendMessageRequest.fromJSON({
      message: { messageId: randomUUID(), role: "ROLE_USER", parts: [{ text: "with data" }, { data: [1, "two"] }] },
    });
    const task = asTask(await legacy.sendMessage(request));
    // 0.3 DataParts hold objects only, so the SDK sent the list wrapped, and flagged it.
    const sentPart = (sentParams.at(-1)?.message as { parts?: unknown[] } | undefined)?.parts?.[1];
    expect(sentPart).toEqual({ kind: "data", data: { value: [1, "two"] }, metadata: { data_part_compat: true } });
    // Read back in 1.0, where a DataPart holds any JSON value: the wrapping is gone.
    const res = await postRaw(stack.bridge.url, rpc("GetTask", { id: task.id, historyLength: 10 }), {
      "A2A-Version": "1.0",
    });
    const history = (res.json.result as { history: Array<{ messageId: string; parts: unknown[] }> }).history;
    const stored = history.find((m) => m.messageId === request.message?.messageId);
    expect(stored?.parts).toEqual([{ text: "with data" }, { data: [1, "two"] }]);
  });
});
