// A turn answered with a Message keeps no task (only a turn-in-flight record while it runs): retries, crash
// recovery and listings still keep their promises.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Code } from "@connectrpc/connect";
import { messageText } from "@parley/domain";
import { HistoryOrder, type Message, Role, type Task, TaskState } from "@parley/proto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { spawnServer } from "./fixtures/spawn-server.js";
import { collect, failure, startTestServer, type TestServer, userMessage } from "./harness.js";

/** The taskId the thread records for its first message: the turn's, shown by GetThreadHistory. */
async function turnTaskId(server: { threads(): ReturnType<TestServer["threads"]> }, contextId: string) {
  const page = await server.threads().getThreadHistory({ contextId, order: HistoryOrder.OLDEST_FIRST, pageSize: 10 });
  return page.messages[0]!.message!.taskId;
}

describe("turns answered with a Message", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({
      agents: [
        { name: "echo", type: "echo", options: { reply: "message" } },
        { name: "slow", type: "echo", options: { reply: "message", delayMs: 300 } },
      ],
    });
  });
  afterAll(async () => server.close());

  it("answers a true retry with the same Message, stores nothing more, and keeps no task", async () => {
    const client = server.a2a("grpc");
    const contextId = `retry-${crypto.randomUUID()}`;
    const message = userMessage("hello", { contextId });
    const first = await client.sendMessage({ message });
    expect(first.payload.case).toBe("message");
    const second = await client.sendMessage({ message });
    expect(second.payload.case).toBe("message");
    expect(second.payload.value).toEqual(first.payload.value);
    const thread = await server.threads().getThreadHistory({ contextId });
    expect(thread.thread?.messageCount).toBe(2n);
    // Nobody was handed the task: it is neither listed nor kept.
    expect((await client.listTasks({ contextId })).tasks).toEqual([]);
    const taskId = await turnTaskId(server, contextId);
    expect(taskId).not.toBe("");
    expect((await failure(client.getTask({ id: taskId }))).code).toBe(Code.NotFound);
  });

  it("answers a true retry without a contextId with the same Message, in the same derived conversation", async () => {
    const client = server.a2a("connect");
    const message = userMessage("no context");
    const first = await client.sendMessage({ message });
    const second = await client.sendMessage({ message });
    expect(second.payload.case).toBe("message");
    expect((second.payload.value as Message).messageId).toBe((first.payload.value as Message).messageId);
    expect((second.payload.value as Message).contextId).toBe((first.payload.value as Message).contextId);
    // A streamed retry gets the same Message as its one event.
    const events = await collect(client.sendStreamingMessage({ message }));
    expect(events.map((e) => e.payload.case)).toEqual(["message"]);
    expect((events[0]!.payload.value as Message).messageId).toBe((first.payload.value as Message).messageId);
  });

  it("lists a running Message turn like any running task, and then keeps its task", async () => {
    const client = server.a2a("grpc", { "parley-agent": "slow" });
    const contextId = `listed-${crypto.randomUUID()}`;
    const sent = client.sendMessage({ message: userMessage("slow", { contextId }) });
    let listed: Task[] = [];
    for (let i = 0; i < 100 && listed.length === 0; i++) {
      listed = (await client.listTasks({ contextId })).tasks;
      if (listed.length === 0) await new Promise((resolve) => setTimeout(resolve, 5));
    }
    expect(listed.map((t) => t.status?.state)).toEqual([TaskState.SUBMITTED]);
    expect((await sent).payload.case).toBe("message");
    const kept = await client.getTask({ id: listed[0]!.id });
    expect(kept.status?.state).toBe(TaskState.COMPLETED);
    expect(messageText(kept.status!.message!)).toBe("slow");
  });

  it("keeps the task of a Message turn its caller was handed (returnImmediately), COMPLETED with the reply", async () => {
    const client = server.a2a("grpc");
    const contextId = `shown-${crypto.randomUUID()}`;
    const res = await client.sendMessage({
      message: userMessage("shown", { contextId }),
      configuration: { returnImmediately: true },
    });
    const task = res.payload.value as Task;
    let stored: Task | undefined;
    for (let i = 0; i < 200; i++) {
      stored = await client.getTask({ id: task.id });
      if (stored.status?.state === TaskState.COMPLETED) break;
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    expect(stored?.status?.state).toBe(TaskState.COMPLETED);
    expect(messageText(stored!.status!.message!)).toBe(messageText(stored!.history[stored!.history.length - 1]!));
    expect((await client.listTasks({ contextId })).tasks.map((t) => t.id)).toEqual([task.id]);
  });
});

describe("a Message turn cut off by a crash", () => {
  const dataDir = mkdtempSync(join(tmpdir(), "parley-message-crash-"));
  afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

  it("ends FAILED at the restart, answers the retry with that task and frees the context", async () => {
    // The agent takes a minute: the kill lands while the turn runs, after its message was stored.
    const env = { PARLEY_ECHO_REPLY: "message", PARLEY_ECHO_DELAY_MS: "60000", PARLEY_LOG_LEVEL: "error" };
    const first = await spawnServer({ dataDir, env });
    const contextId = `crash-${crypto.randomUUID()}`;
    const message = userMessage("cut off", { contextId });
    const pending = first.a2a().sendMessage({ message });
    pending.catch(() => {});
    for (let i = 0; i < 500; i++) {
      const thread = await first
        .threads()
        .getThreadHistory({ contextId, pageSize: 1 })
        .catch(() => undefined);
      if (thread?.thread?.messageCount === 1n) break;
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    first.closeClients();
    first.child.kill("SIGKILL");
    await first.exited;

    const second = await spawnServer({ dataDir, env: { ...env, PARLEY_ECHO_DELAY_MS: "0" } });
    try {
      const taskId = await turnTaskId(second, contextId);
      const retried = await second.a2a().sendMessage({ message });
      expect(retried.payload.case).toBe("task");
      const task = retried.payload.value as Task;
      expect(task.id).toBe(taskId);
      expect(task.status?.state).toBe(TaskState.FAILED);
      expect(messageText(task.status!.message!)).toMatch(/interrupted/);
      // The turn-in-flight record kept only ids, state and time: the task's history is rebuilt from the thread.
      const user = task.history.filter((m) => m.role === Role.USER);
      expect(user.map((m) => [m.messageId, m.contextId, m.taskId, messageText(m)])).toEqual([
        [message.messageId, contextId, taskId, "cut off"],
      ]);
      const listed = await second.a2a().listTasks({ contextId });
      expect(listed.tasks.map((t) => [t.id, t.status?.state])).toEqual([[taskId, TaskState.FAILED]]);
      expect((await second.a2a().listTasks({ status: TaskState.SUBMITTED })).tasks).toEqual([]);
      // The context takes a new message at once, answered with a Message again.
      const next = await second.a2a().sendMessage({ message: userMessage("after the crash", { contextId }) });
      expect(next.payload.case).toBe("message");
      expect(messageText(next.payload.value as Message)).toMatch(/after the crash$/);
    } finally {
      second.closeClients();
      second.child.kill("SIGTERM");
      await second.exited;
    }
  });
});
