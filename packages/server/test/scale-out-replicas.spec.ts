import { randomUUID } from "node:crypto";
import { ConnectError } from "@connectrpc/connect";
import { type StreamResponse, TaskState } from "@parley/proto";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "../../store/test/pg-helpers.js";
import { createReplicaSet, type Replica } from "./fixtures/replica-set.js";
import { sendRequest, streamedText } from "./harness.js";

// Real replicas: separate `node dist/main.js` processes on loopback sharing one PostgreSQL database.
// The local cluster `npm test`'s pretest step starts, unless PARLEY_TEST_PG_URL names another.
let database: TestDatabase;
const leaseTtlMs = 1500;

const replicaSet = createReplicaSet({ PARLEY_LEASE_TTL_MS: String(leaseTtlMs), PARLEY_ECHO_DELAY_MS: "120" });
const { replicas } = replicaSet;
const startReplica = () => replicaSet.start(database.url);

async function kill(replica: Replica): Promise<void> {
  replica.child.kill("SIGKILL");
  await replica.exited;
  replica.manager.abort();
}

/** Sends once the context is free again; bounded so a context that never frees fails the test. */
async function sendWhenFree(replica: Replica, contextId: string, text: string) {
  for (let i = 0; i < 300; i++) {
    try {
      return await replica.client.sendMessage(sendRequest(contextId, text));
    } catch (error) {
      if (!(error instanceof ConnectError) || !error.message.includes("busy")) throw error;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
  throw new Error(`context ${contextId} never became free`);
}

beforeAll(async () => {
  database = await createTestDatabase();
  // The first replica migrates alone so the other two start on a ready schema.
  await startReplica();
  await Promise.all([startReplica(), startReplica()]);
}, 60_000);

afterAll(async () => {
  await replicaSet.stopAll();
  await database?.drop();
});

describe("three replicas on one PostgreSQL database", () => {
  it("accepts exactly one of many concurrent sends to one context across replicas", async () => {
    const contextId = `ctx-${randomUUID()}`;
    const results = await Promise.allSettled(
      Array.from({ length: 30 }, (_, i) => replicas[i % 3]!.client.sendMessage(sendRequest(contextId, `hello ${i}`))),
    );
    const accepted = results.filter((r) => r.status === "fulfilled");
    const busy = results.filter(
      (r) => r.status === "rejected" && r.reason instanceof ConnectError && /busy/.test(r.reason.message),
    );
    expect(accepted).toHaveLength(1);
    expect(busy).toHaveLength(29);
  });

  it("resumes a stream on another replica after the subscriber's replica is killed, with the text complete", async () => {
    const [executor, watcher, spare] = [replicas[0]!, replicas[1]!, replicas[2]!];
    const contextId = `ctx-${randomUUID()}`;
    const stream = executor.client.sendStreamingMessage(
      sendRequest(contextId, "the quick brown fox jumps over the lazy dog"),
    );
    const first = (await stream[Symbol.asyncIterator]().next()).value as StreamResponse;
    const taskId = first.payload.case === "task" ? first.payload.value.id : "";
    expect(taskId).not.toBe("");

    const before: StreamResponse[] = [];
    let start = -1;
    const controller = new AbortController();
    try {
      for await (const event of watcher.client.subscribeToTask(
        { id: taskId },
        {
          signal: controller.signal,
          onHeader: (h) => {
            start = Number(h.get("parley-stream-start"));
          },
        },
      )) {
        before.push(event);
        if (before.length === 4) break;
      }
    } finally {
      controller.abort();
    }
    await kill(watcher);
    expect(start).toBe(0);

    const after: StreamResponse[] = [];
    let resumedAt = -1;
    for await (const event of spare.client.subscribeToTask(
      { id: taskId },
      {
        headers: { "parley-resume-after": String(start + before.length) },
        onHeader: (h) => {
          resumedAt = Number(h.get("parley-stream-start"));
        },
      },
    )) {
      after.push(event);
    }
    expect(resumedAt).toBe(start + before.length);
    const all = [...before, ...after];
    expect(all[0]!.payload.case).toBe("task");
    const last = all[all.length - 1]!;
    expect(last.payload.case === "statusUpdate" && last.payload.value.status?.state).toBe(TaskState.COMPLETED);
    const task = await spare.client.getTask({ id: taskId });
    const stored = task.artifacts[0]!.parts.map((p) => (p.content.case === "text" ? p.content.value : "")).join("");
    expect(streamedText(all)).toBe(stored);
    expect(stored).toContain("the quick brown fox jumps over the lazy dog");
    for await (const _ of stream) {
      // Drains the sender's own stream so its call ends.
    }
  });

  it("completes a task whose SendStreamingMessage was dropped, and resumes it on another replica after its end", async () => {
    const [executor, , spare] = [replicas[0]!, replicas[1]!, replicas[2]!];
    const text = "dropped by its caller, finished anyway";
    const abort = new AbortController();
    const before: StreamResponse[] = [];
    let start = -1;
    try {
      for await (const event of executor.client.sendStreamingMessage(sendRequest(`ctx-${randomUUID()}`, text), {
        signal: abort.signal,
        onHeader: (h) => {
          start = Number(h.get("parley-stream-start"));
        },
      })) {
        before.push(event);
        if (before.length === 3) abort.abort();
      }
    } catch {
      // The drop ends the read.
    }
    const taskId = before[0]!.payload.case === "task" ? before[0]!.payload.value.id : "";
    let task = await spare.client.getTask({ id: taskId });
    while (task.status?.state === TaskState.SUBMITTED || task.status?.state === TaskState.WORKING) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      task = await spare.client.getTask({ id: taskId });
    }
    expect(task.status?.state).toBe(TaskState.COMPLETED);
    const after: StreamResponse[] = [];
    for await (const event of spare.client.subscribeToTask(
      { id: taskId },
      { headers: { "parley-resume-after": String(start + before.length) } },
    )) {
      after.push(event);
    }
    const all = [...before, ...after];
    const last = all[all.length - 1]!;
    expect(last.payload.case === "statusUpdate" && last.payload.value.status?.state).toBe(TaskState.COMPLETED);
    const stored = task.artifacts[0]!.parts.map((p) => (p.content.case === "text" ? p.content.value : "")).join("");
    expect(streamedText(all)).toBe(stored);
    expect(stored).toContain(text);
  });

  it("ends the task of a killed executor as FAILED once its lease expires, and frees the context", async () => {
    const executor = await startReplica();
    const observer = replicas[0]!;
    const contextId = `ctx-${randomUUID()}`;
    const stream = executor.client.sendStreamingMessage(sendRequest(contextId, "a reply that will never finish"));
    const first = (await stream[Symbol.asyncIterator]().next()).value as StreamResponse;
    const taskId = first.payload.case === "task" ? first.payload.value.id : "";
    const events: StreamResponse[] = [];
    const following = (async () => {
      for await (const event of observer.client.subscribeToTask({ id: taskId })) events.push(event);
    })();
    await kill(executor);
    await expect(observer.client.sendMessage(sendRequest(contextId, "too early"))).rejects.toThrow(/busy/);
    await following;
    const last = events[events.length - 1]!;
    expect(last.payload.case === "statusUpdate" && last.payload.value.status?.state).toBe(TaskState.FAILED);
    const task = await observer.client.getTask({ id: taskId });
    expect(task.status?.state).toBe(TaskState.FAILED);
    expect(task.status?.message?.parts[0]?.content.value).toMatch(/executor lost/);
    const next = await sendWhenFree(observer, contextId, "again");
    expect(next.payload.case).toBe("task");
  });

  it("fences off a paused lease holder's late writes after another replica took its task over", async () => {
    const executor = await startReplica();
    const observer = replicas[0]!;
    const contextId = `ctx-${randomUUID()}`;
    const stream = executor.client.sendStreamingMessage(sendRequest(contextId, "paused mid-reply"));
    const first = (await stream[Symbol.asyncIterator]().next()).value as StreamResponse;
    const taskId = first.payload.case === "task" ? first.payload.value.id : "";
    const events: StreamResponse[] = [];
    const following = (async () => {
      for await (const event of observer.client.subscribeToTask({ id: taskId })) events.push(event);
    })();
    executor.child.kill("SIGSTOP");
    await following;
    expect(events[events.length - 1]!.payload.case).toBe("statusUpdate");
    executor.child.kill("SIGCONT");
    // The woken holder finishes its reply locally; nothing of it may land.
    for await (const _ of stream) {
      // Drains the paused holder's stream: its own view ends once its run ends.
    }
    const task = await observer.client.getTask({ id: taskId });
    expect(task.status?.state).toBe(TaskState.FAILED);
    const resumed: StreamResponse[] = [];
    for await (const event of observer.client.subscribeToTask(
      { id: taskId },
      { headers: { "parley-resume-after": String(events.length - 1) } },
    )) {
      resumed.push(event);
    }
    expect(resumed).toHaveLength(1);
    expect(resumed[0]!.payload.case === "statusUpdate" && resumed[0]!.payload.value.status?.state).toBe(
      TaskState.FAILED,
    );
    await kill(executor);
  });

  it("delivers every event to a cross-replica subscriber while its listener connections are killed", async () => {
    const [executor, observer] = [replicas[0]!, replicas[2]!];
    const contextId = `ctx-${randomUUID()}`;
    const stream = executor.client.sendStreamingMessage(sendRequest(contextId, "listen through the storm"));
    const first = (await stream[Symbol.asyncIterator]().next()).value as StreamResponse;
    const taskId = first.payload.case === "task" ? first.payload.value.id : "";
    const events: StreamResponse[] = [];
    const following = (async () => {
      for await (const event of observer.client.subscribeToTask({ id: taskId })) events.push(event);
    })();
    const admin = new pg.Client({ connectionString: database.url });
    await admin.connect();
    let terminated = 0;
    try {
      for (let i = 0; i < 3; i++) {
        await new Promise((resolve) => setTimeout(resolve, 200));
        const { rowCount } = await admin.query(
          "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND application_name = 'parley-listener'",
          [database.name],
        );
        terminated += rowCount ?? 0;
      }
    } finally {
      await admin.end();
    }
    const sent: StreamResponse[] = [first];
    for await (const event of stream) sent.push(event);
    await following;
    expect(events.map((e) => e.payload.case)).toEqual(sent.map((e) => e.payload.case));
    expect(streamedText(events)).toBe(streamedText(sent));
    expect(terminated).toBeGreaterThanOrEqual(3);
  });
});
