// On a store one process owns (LevelDB), a streamed turn's task is written once, at its end: while it runs the
// store keeps only its turn-in-flight record, every reader asks the run, and a listing writes it first.
import { type StreamResponse, type Task, TaskState } from "@parley/proto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, type TestServer, userMessage } from "./harness.js";

const tenant = "default";

async function firstTask(events: AsyncIterator<StreamResponse>): Promise<Task> {
  const first = await events.next();
  if (first.done || first.value.payload.case !== "task") throw new Error("the stream did not open with its task");
  return first.value.payload.value;
}

async function drain(events: AsyncIterator<StreamResponse>): Promise<StreamResponse[]> {
  const rest: StreamResponse[] = [];
  for (let next = await events.next(); !next.done; next = await events.next()) rest.push(next.value);
  return rest;
}

describe("a streamed task on LevelDB", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({ agents: [{ name: "slow", type: "echo", options: { delayMs: 40, chunks: 6 } }] });
  });
  afterAll(async () => server.close());

  it("is answered from its run while it runs, and stored once, with its outcome", async () => {
    const client = server.a2a("grpc");
    const contextId = `stream-once-${crypto.randomUUID()}`;
    const events = client
      .sendStreamingMessage({ message: userMessage("six chunks", { contextId }) })
      [Symbol.asyncIterator]();
    const task = await firstTask(events);
    expect(await server.parley.store.getTask(tenant, task.id)).toBeUndefined();
    const running = await client.getTask({ id: task.id });
    expect([TaskState.SUBMITTED, TaskState.WORKING]).toContain(running.status?.state);
    const rest = await drain(events);
    expect(rest.at(-1)?.payload.case).toBe("statusUpdate");
    const stored = await server.parley.store.getTask(tenant, task.id);
    expect(stored?.state).toBe(TaskState.COMPLETED);
    expect((await client.getTask({ id: task.id })).artifacts.length).toBeGreaterThan(0);
    const listed = await client.listTasks({ contextId });
    expect(listed.tasks.map((t) => [t.id, t.status?.state])).toEqual([[task.id, TaskState.COMPLETED]]);
  });

  it("is written by a listing that runs while it does, and listed like any running task", async () => {
    const client = server.a2a("connect");
    const contextId = `stream-listed-${crypto.randomUUID()}`;
    const events = client
      .sendStreamingMessage({ message: userMessage("listed while it streams", { contextId }) })
      [Symbol.asyncIterator]();
    const task = await firstTask(events);
    const listed = await client.listTasks({ contextId });
    expect(listed.tasks.map((t) => t.id)).toEqual([task.id]);
    expect([TaskState.SUBMITTED, TaskState.WORKING]).toContain(listed.tasks[0]?.status?.state);
    expect((await server.parley.store.getTask(tenant, task.id))?.taskId).toBe(task.id);
    await drain(events);
    expect((await server.parley.store.getTask(tenant, task.id))?.state).toBe(TaskState.COMPLETED);
    const page = await client.listTasks({ contextId });
    expect(page.tasks.map((t) => [t.id, t.status?.state])).toEqual([[task.id, TaskState.COMPLETED]]);
    expect(page.totalSize).toBe(1);
  });
});
