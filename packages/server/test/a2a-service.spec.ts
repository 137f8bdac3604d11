import { Code, ConnectError } from "@connectrpc/connect";
import { messageText } from "@parley/domain";
import { ErrorInfoSchema, type Role, type StreamResponse, type Task, TaskState } from "@parley/proto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { collect, framedEcho, startTestServer, streamedText, type TestServer, userMessage } from "./harness.js";

function replyText(task: Task): string {
  return task.artifacts.map((a) => messageText(a)).join("");
}

function reasonOf(error: unknown): string | undefined {
  return ConnectError.from(error).findDetails(ErrorInfoSchema)[0]?.reason;
}

describe.each(["grpc", "connect", "grpc-web"] as const)("A2AService over %s", (protocol) => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({ agents: [framedEcho] });
  });
  afterAll(async () => {
    await server.close();
  });

  it("answers a send with a completed task and a generated ctx- contextId", async () => {
    const res = await server.a2a(protocol).sendMessage({ message: userMessage("hello") });
    expect(res.payload.case).toBe("task");
    const task = res.payload.value as Task;
    expect(task.contextId).toMatch(/^ctx-[0-9a-f-]{36}$/);
    expect(task.status?.state).toBe(TaskState.COMPLETED);
    expect(replyText(task)).toBe("hello");
    expect(task.history.map((m) => messageText(m))).toEqual(["hello", "hello"]);
  });

  it("keeps a client contextId exactly and reads the thread back into the next turn", async () => {
    const contextId = `tenant/a ${protocol} ☃`;
    const client = server.a2a(protocol);
    const first = await client.sendMessage({ message: userMessage("my name is Ada", { contextId }) });
    expect((first.payload.value as Task).contextId).toBe(contextId);
    const second = await client.sendMessage({ message: userMessage("what is my name?", { contextId }) });
    const text = replyText(second.payload.value as Task);
    const block = /<<<PARLEY_HISTORY (\w+)>>>\n([\s\S]*)<<<END_PARLEY_HISTORY \1>>>\n\nwhat is my name\?$/.exec(text);
    expect(block, text).not.toBeNull();
    expect(block![2]).toContain("not new instructions");
    const nonce = block![1];
    expect(block![2]).toContain(`#${nonce} user: my name is Ada\n#${nonce} agent: my name is Ada\n`);
  });

  it("streams the task, then append-only chunks, then COMPLETED", async () => {
    const events = await collect(
      server.a2a(protocol).sendStreamingMessage({ message: userMessage("stream me please") }),
    );
    expect(events[0]?.payload.case).toBe("task");
    expect(events[1]?.payload.case).toBe("statusUpdate");
    const last = events[events.length - 1]!;
    expect(last.payload.case === "statusUpdate" && last.payload.value.status?.state).toBe(TaskState.COMPLETED);
    const chunks = events.filter((e) => e.payload.case === "artifactUpdate");
    expect(chunks.length).toBeGreaterThan(1);
    const appends = chunks.map((e) => (e.payload.case === "artifactUpdate" ? e.payload.value.append : undefined));
    expect(appends[0]).toBe(false);
    expect(appends.slice(1).every(Boolean)).toBe(true);
    const lastChunk = chunks[chunks.length - 1]!;
    expect(lastChunk.payload.case === "artifactUpdate" && lastChunk.payload.value.lastChunk).toBe(true);
    expect(streamedText(events)).toBe("stream me please");
  });

  it("gets, lists and honours historyLength", async () => {
    const client = server.a2a(protocol);
    const contextId = `list-${protocol}`;
    const a = (await client.sendMessage({ message: userMessage("one", { contextId }) })).payload.value as Task;
    const b = (await client.sendMessage({ message: userMessage("two", { contextId }) })).payload.value as Task;
    expect((await client.getTask({ id: a.id })).history).toHaveLength(2);
    expect((await client.getTask({ id: a.id, historyLength: 0 })).history).toHaveLength(0);
    expect((await client.getTask({ id: a.id, historyLength: 1 })).history.map((m) => m.role)).toEqual([2]);
    const listed = await client.listTasks({ contextId });
    expect(listed.tasks.map((t) => t.id)).toEqual([b.id, a.id]);
    expect(listed.totalSize).toBe(2);
    expect(listed.tasks[0]?.artifacts).toHaveLength(0);
    const withArtifacts = await client.listTasks({ contextId, includeArtifacts: true, pageSize: 1 });
    expect(withArtifacts.tasks).toHaveLength(1);
    expect(withArtifacts.tasks[0]?.artifacts.length).toBeGreaterThan(0);
    expect(withArtifacts.nextPageToken).not.toBe("");
    const rest = await client.listTasks({ contextId, pageSize: 1, pageToken: withArtifacts.nextPageToken });
    expect(rest.tasks.map((t) => t.id)).toEqual([a.id]);
    await expect(client.listTasks({ pageSize: 101 })).rejects.toThrow(/pageSize must be between 1 and 100/);
  });

  it("returns the task at once with returnImmediately", async () => {
    const res = await server.a2a(protocol).sendMessage({
      message: userMessage("later"),
      configuration: { returnImmediately: true },
    });
    const task = res.payload.value as Task;
    expect(task.status?.state).toBe(TaskState.SUBMITTED);
  });

  it("applies the taskId rules", async () => {
    const client = server.a2a(protocol);
    const err = await client.sendMessage({ message: userMessage("x", { taskId: "no-such-task" }) }).catch((e) => e);
    expect(ConnectError.from(err).code).toBe(Code.NotFound);
    expect(reasonOf(err)).toBe("TASK_NOT_FOUND");

    const done = (await client.sendMessage({ message: userMessage("done", { contextId: `rules-${protocol}` }) }))
      .payload.value as Task;
    const terminal = await client.sendMessage({ message: userMessage("more", { taskId: done.id }) }).catch((e) => e);
    expect(reasonOf(terminal)).toBe("UNSUPPORTED_OPERATION");
    expect(ConnectError.from(terminal).code).toBe(Code.FailedPrecondition);

    const mismatch = await client
      .sendMessage({ message: userMessage("more", { taskId: done.id, contextId: "another" }) })
      .catch((e) => e);
    expect(ConnectError.from(mismatch).code).toBe(Code.InvalidArgument);
    expect(ConnectError.from(mismatch).rawMessage).toMatch(/does not match the contextId of task/);

    await expect(client.getTask({ id: "missing" })).rejects.toSatisfy((e) => reasonOf(e) === "TASK_NOT_FOUND");
    await expect(client.cancelTask({ id: done.id })).rejects.toSatisfy((e) => reasonOf(e) === "TASK_NOT_CANCELABLE");
    await expect(collect(client.subscribeToTask({ id: done.id }))).rejects.toSatisfy(
      (e) => reasonOf(e) === "UNSUPPORTED_OPERATION",
    );
  });

  it("rejects an unsupported A2A-Version and a malformed message with errors that say why", async () => {
    const versioned = server.a2a(protocol, { "a2a-version": "9.9" });
    const err = await versioned.sendMessage({ message: userMessage("x") }).catch((e) => e);
    expect(reasonOf(err)).toBe("VERSION_NOT_SUPPORTED");
    expect(ConnectError.from(err).rawMessage).toMatch(
      /"9.9" is not supported on this interface; supported versions: 1.0;/,
    );
    const empty = await server
      .a2a(protocol)
      .sendMessage({ message: { messageId: "m", role: 1, parts: [] } })
      .catch((e) => e);
    expect(ConnectError.from(empty).code).toBe(Code.InvalidArgument);
    expect(ConnectError.from(empty).rawMessage).toMatch(/parts must hold at least one part/);
    // A Value with no kind has no JSON form: stored, it could never be read back over JSON-RPC or exported.
    const kindless = await server
      .a2a(protocol)
      .sendMessage({
        message: {
          messageId: crypto.randomUUID(),
          role: 1,
          parts: [{ content: { case: "data", value: { kind: { case: "listValue", value: { values: [{}] } } } } }],
        },
      })
      .catch((e) => e);
    expect(ConnectError.from(kindless).code).toBe(Code.InvalidArgument);
    expect(ConnectError.from(kindless).rawMessage).toMatch(
      /message\.parts\[0\]\.data\[0\] is a google\.protobuf\.Value with no kind set/,
    );
    // Role is an open enum: a number that is neither user nor agent is refused, not stored and echoed back.
    const roleContext = `role-${crypto.randomUUID()}`;
    const unknownRole = await server
      .a2a(protocol)
      .sendMessage({
        message: {
          messageId: crypto.randomUUID(),
          contextId: roleContext,
          // Not a member of Role: what a binary or ProtoJSON caller can still send.
          role: 7 as Role,
          parts: [{ content: { case: "text", value: "who am I" } }],
        },
      })
      .catch((e) => e);
    expect(ConnectError.from(unknownRole).code).toBe(Code.InvalidArgument);
    expect(ConnectError.from(unknownRole).rawMessage).toMatch(/message\.role 7 is not a role/);
    expect(await server.parley.store.getThread({ tenant: "default", contextId: roleContext })).toBeUndefined();
    await expect(server.a2a(protocol).getExtendedAgentCard({})).rejects.toSatisfy(
      (e) => reasonOf(e) === "UNSUPPORTED_OPERATION",
    );
    await expect(
      server.a2a(protocol).createTaskPushNotificationConfig({ taskId: "t", url: "http://127.0.0.1/" }),
    ).rejects.toSatisfy((e) => reasonOf(e) === "PUSH_NOTIFICATION_NOT_SUPPORTED");
  });
});

describe("the conversation engine under a slow agent", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({
      agents: [{ name: "echo", type: "echo", options: { delayMs: 40, chunks: 10 } }],
    });
  });
  afterAll(async () => {
    await server.close();
  });

  it("accepts exactly one of 100 concurrent sends to one contextId and stores none of the others", async () => {
    const client = server.a2a("grpc");
    const contextId = "contended";
    const results = await Promise.allSettled(
      Array.from({ length: 100 }, (_, i) =>
        client.sendMessage({
          message: userMessage(`attempt ${i}`, { contextId }),
          configuration: { returnImmediately: true },
        }),
      ),
    );
    const accepted = results.filter((r) => r.status === "fulfilled");
    const rejected = results.filter((r): r is PromiseRejectedResult => r.status === "rejected");
    expect(accepted).toHaveLength(1);
    expect(rejected).toHaveLength(99);
    const running = (accepted[0] as PromiseFulfilledResult<{ payload: { value: unknown } }>).value.payload
      .value as Task;
    for (const r of rejected) {
      const err = ConnectError.from(r.reason);
      expect(err.code).toBe(Code.Aborted);
      expect(reasonOf(err)).toBe("CONTEXT_BUSY");
      expect(err.findDetails(ErrorInfoSchema)[0]?.metadata.taskId).toBe(running.id);
      expect(err.rawMessage).toContain(running.id);
    }
    await collect(client.subscribeToTask({ id: running.id }));
    const history = await server.threads().getThreadHistory({ contextId });
    expect(history.thread?.messageCount).toBe(2n);
    const next = await client.sendMessage({ message: userMessage("after", { contextId }) });
    expect((next.payload.value as Task).status?.state).toBe(TaskState.COMPLETED);
  });

  it("replays every event from the start to a late subscriber, and to several at once", async () => {
    const client = server.a2a("grpc");
    const stream = client.sendStreamingMessage({
      message: userMessage("a fairly long message to stream in ten chunks"),
    });
    const original: StreamResponse[] = [];
    let taskId = "";
    const late: Promise<StreamResponse[]>[] = [];
    for await (const event of stream) {
      original.push(event);
      if (event.payload.case === "task") taskId = event.payload.value.id;
      if (original.length === 4) {
        late.push(collect(client.subscribeToTask({ id: taskId })));
        late.push(collect(server.a2a("connect").subscribeToTask({ id: taskId })));
      }
    }
    const replays = await Promise.all(late);
    for (const replay of replays) {
      expect(replay[0]?.payload.case).toBe("task");
      expect(replay.length).toBe(original.length);
      expect(streamedText(replay)).toBe(streamedText(original));
    }
    expect(streamedText(original)).toBe("a fairly long message to stream in ten chunks");
  });

  it("cancels a running task: CANCELED, the agent stops, and the context is free again", async () => {
    const client = server.a2a("grpc");
    const contextId = "cancel-me";
    const started = await client.sendMessage({
      message: userMessage("long running", { contextId }),
      configuration: { returnImmediately: true },
    });
    const id = (started.payload.value as Task).id;
    const canceled = await client.cancelTask({ id });
    expect(canceled.status?.state).toBe(TaskState.CANCELED);
    expect((await client.getTask({ id })).status?.state).toBe(TaskState.CANCELED);
    const next = await client.sendMessage({ message: userMessage("again", { contextId }) });
    expect((next.payload.value as Task).status?.state).toBe(TaskState.COMPLETED);
  });

  it("keeps the task running when the streaming caller disconnects: it ends COMPLETED, then frees the context", async () => {
    // Issue 18: a socket closing is not a cancel (CancelTask is); this test asserted the opposite before.
    const client = server.a2a("grpc");
    const contextId = "walk-away";
    const abort = new AbortController();
    let taskId = "";
    await expect(
      (async () => {
        for await (const event of client.sendStreamingMessage(
          { message: userMessage("going away", { contextId }) },
          { signal: abort.signal },
        )) {
          if (event.payload.case === "task") {
            taskId = event.payload.value.id;
            abort.abort();
          }
        }
      })(),
    ).rejects.toThrow();
    await expect
      .poll(async () => (await client.getTask({ id: taskId })).status?.state, { timeout: 10_000 })
      .toBe(TaskState.COMPLETED);
    const task = await client.getTask({ id: taskId });
    expect(messageText(task.artifacts[0] ?? { parts: [] })).toContain("going away");
    const next = await client.sendMessage({ message: userMessage("back", { contextId }) });
    expect((next.payload.value as Task).status?.state).toBe(TaskState.COMPLETED);
  });

  it("ends a task FAILED with a message when the agent times out, and frees the context", async () => {
    const slow = await startTestServer({
      agents: [{ name: "echo", type: "echo", options: { delayMs: 500 } }],
      limits: { agentStepTimeoutMs: 200 },
    });
    try {
      const client = slow.a2a("grpc");
      const res = await client.sendMessage({ message: userMessage("too slow", { contextId: "t" }) });
      const task = res.payload.value as Task;
      expect(task.status?.state).toBe(TaskState.FAILED);
      expect(messageText(task.status!.message!)).toMatch(/did not finish within 200 ms/);
      const again = await client.sendMessage({
        message: userMessage("again", { contextId: "t" }),
        configuration: { returnImmediately: true },
      });
      expect((again.payload.value as Task).status?.state).toBe(TaskState.SUBMITTED);
    } finally {
      await slow.close();
    }
  });
});
