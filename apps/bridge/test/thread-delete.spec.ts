// DeleteThread removes everything of a thread, seen from outside: real parley-bridge processes (JSON-RPC and the
// embedded server's gRPC port), on LevelDB across a restart, and on PostgreSQL from a second replica and after
// both restart. Every id of the thread (its task ids, its contextId) answers not-found on both protocols.
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import { A2AService, ThreadService } from "@parley/proto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "../../../packages/store/test/pg-helpers.js";
import { postRaw, rpc } from "./harness.js";
import { type SpawnedBridge, spawnBridge } from "./spawn-bridge.js";

const v1 = { "A2A-Version": "1.0" };
const secret = "my card is 4111 1111 1111 1111";

interface Running {
  readonly bridge: SpawnedBridge;
  readonly managers: Http2SessionManager[];
}

async function start(dir: string, env: Record<string, string> = {}): Promise<Running> {
  const bridge = await spawnBridge({ dir, config: { agents: [{ name: "echo", type: "echo" }] }, env });
  return { bridge, managers: [] };
}

async function stop(running: Running): Promise<void> {
  for (const m of running.managers) m.abort();
  running.bridge.child.kill("SIGTERM");
  await running.bridge.exited;
}

function grpc(running: Running) {
  const manager = new Http2SessionManager(`http://${running.bridge.grpcAddress}`);
  running.managers.push(manager);
  const baseUrl = `http://${running.bridge.grpcAddress}`;
  return {
    // The gRPC interface speaks A2A 1.0 only, and no header means 0.3.
    a2a: createClient(
      A2AService,
      createGrpcTransport({
        baseUrl,
        sessionManager: manager,
        interceptors: [
          (next) => (req) => {
            req.header.set("a2a-version", "1.0");
            return next(req);
          },
        ],
      }),
    ),
    threads: createClient(
      ThreadService,
      createConnectTransport({ baseUrl, httpVersion: "2", sessionManager: manager }),
    ),
  };
}

async function send(url: string, contextId: string, text: string): Promise<string> {
  const { json } = await postRaw(
    url,
    rpc("SendMessage", {
      message: { messageId: randomUUID(), contextId, role: "ROLE_USER", parts: [{ text }] },
    }),
    v1,
  );
  const task = (json.result as { task?: { id?: string } } | undefined)?.task;
  if (!task?.id) throw new Error(`SendMessage did not answer with a task: ${JSON.stringify(json)}`);
  return task.id;
}

async function codeOf(work: Promise<unknown> | AsyncIterable<unknown>): Promise<Code | "ok"> {
  try {
    if (Symbol.asyncIterator in work) for await (const _ of work as AsyncIterable<unknown>);
    else await work;
    return "ok";
  } catch (error) {
    return ConnectError.from(error).code;
  }
}

/** Every id of the deleted thread answers not-found on JSON-RPC and gRPC; the kept thread is whole. */
async function expectGone(running: Running, contextId: string, taskIds: readonly string[], keptTask: string) {
  const { a2a, threads } = grpc(running);
  for (const id of taskIds) {
    const { json } = await postRaw(running.bridge.url, rpc("GetTask", { id }), v1);
    expect((json.error as { code?: number } | undefined)?.code, `JSON-RPC GetTask ${id}`).toBe(-32001);
    expect(JSON.stringify(json)).not.toContain("4111");
    expect(await codeOf(a2a.getTask({ id })), `gRPC GetTask ${id}`).toBe(Code.NotFound);
    expect(await codeOf(a2a.subscribeToTask({ id })), `gRPC SubscribeToTask ${id}`).toBe(Code.NotFound);
  }
  const listed = await postRaw(running.bridge.url, rpc("ListTasks", { contextId }), v1);
  expect((listed.json.result as { tasks?: unknown[] }).tasks ?? []).toEqual([]);
  expect((await a2a.listTasks({ contextId })).tasks).toEqual([]);
  const all = await a2a.listTasks({});
  expect(all.tasks.map((t) => t.id)).toEqual([keptTask]);
  expect(JSON.stringify((await postRaw(running.bridge.url, rpc("ListTasks", {}), v1)).json)).not.toContain("4111");
  expect(await codeOf(threads.getThreadHistory({ contextId })), "GetThreadHistory").toBe(Code.NotFound);
  expect(await codeOf(threads.exportThread({ contextId })), "ExportThread").toBe(Code.NotFound);
  expect((await threads.listThreads({})).threads.map((t) => t.contextId)).not.toContain(contextId);
  const { json } = await postRaw(running.bridge.url, rpc("GetTask", { id: keptTask }), v1);
  expect((json.result as { id?: string }).id).toBe(keptTask);
}

/** Two tasks in the doomed thread, one in a kept one; deletes the doomed one through `deleter`. */
async function populateAndDelete(writer: Running, deleter: Running) {
  const contextId = `doomed-${randomUUID()}`;
  const taskIds = [await send(writer.bridge.url, contextId, secret), await send(writer.bridge.url, contextId, "again")];
  const keptTask = await send(writer.bridge.url, `kept-${randomUUID()}`, "keep me");
  const { a2a, threads } = grpc(deleter);
  expect((await a2a.getTask({ id: taskIds[0]! })).id).toBe(taskIds[0]);
  const deleted = await threads.deleteThread({ contextId });
  expect(deleted).toMatchObject({ deleted: true, deletedMessageCount: 4n, deletedTaskCount: 2n });
  return { contextId, taskIds, keptTask };
}

describe("DeleteThread on LevelDB, through JSON-RPC and gRPC, across a restart", () => {
  const dir = mkdtempSync(join(tmpdir(), "parley-delete-level-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("leaves no id of the thread answering, before and after a restart", async () => {
    let running = await start(dir);
    let gone: Awaited<ReturnType<typeof populateAndDelete>>;
    try {
      gone = await populateAndDelete(running, running);
      await expectGone(running, gone.contextId, gone.taskIds, gone.keptTask);
    } finally {
      await stop(running);
    }
    running = await start(dir);
    try {
      await expectGone(running, gone.contextId, gone.taskIds, gone.keptTask);
    } finally {
      await stop(running);
    }
  }, 180_000);
});

describe("DeleteThread on PostgreSQL, seen from a second replica and after a restart", () => {
  let database: TestDatabase;
  const dirs = [mkdtempSync(join(tmpdir(), "parley-delete-pg-a-")), mkdtempSync(join(tmpdir(), "parley-delete-pg-b-"))];
  beforeAll(async () => {
    database = await createTestDatabase();
  });
  afterAll(async () => {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
    await database?.drop();
  });

  it("leaves no id of the thread answering on the other replica, and after both restart", async () => {
    const env = { PARLEY_STORE_URL: database.url };
    const a = await start(dirs[0]!, env);
    const b = await start(dirs[1]!, env);
    let gone: Awaited<ReturnType<typeof populateAndDelete>>;
    try {
      // Written through replica A, deleted through replica B, checked on both.
      gone = await populateAndDelete(a, b);
      await expectGone(a, gone.contextId, gone.taskIds, gone.keptTask);
      await expectGone(b, gone.contextId, gone.taskIds, gone.keptTask);
    } finally {
      await stop(a);
      await stop(b);
    }
    const again = await start(dirs[1]!, env);
    try {
      await expectGone(again, gone.contextId, gone.taskIds, gone.keptTask);
    } finally {
      await stop(again);
    }
  }, 240_000);
});
