// A retention pass cut by SIGKILL in the middle: the real server process on LevelDB is killed while it deletes
// hundreds of idle threads; what the killed process left is consistent (no thread listed or readable with parts
// missing), and the restarted server finishes the deletion, keeping the active threads whole.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { create, toBinary } from "@bufbuild/protobuf";
import { MessageSchema, Role, TaskSchema, TaskState } from "@parley/proto";
import { createStore, type StoreBackend } from "@parley/store";
import { Level } from "level";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "../../store/test/pg-helpers.js";
import { type SpawnedServer, spawnServer } from "./fixtures/spawn-server.js";

const day = 86_400_000;
const tenant = "acme";
const idleThreads = 600;
const tasksPerThread = 6;
const activeThreads = 4;
const env = { PARLEY_API_KEYS: "crash-key=acme", PARLEY_RETENTION_DAYS: "7", PARLEY_SWEEP_MS: "20" };
const headers = { authorization: "Bearer crash-key", "a2a-version": "1.0" };

async function populate(backend: StoreBackend, contextId: string, now: () => number) {
  const key = { tenant, contextId };
  for (let i = 1; i <= tasksPerThread; i++) {
    const taskId = `${contextId}-t${i}`;
    const task = create(TaskSchema, { id: taskId, contextId, status: { state: TaskState.COMPLETED } });
    const text = (s: string) =>
      toBinary(
        MessageSchema,
        create(MessageSchema, {
          messageId: `${taskId}-${s}`,
          role: Role.USER,
          parts: [{ content: { case: "text", value: s.repeat(200) } }],
        }),
      );
    await backend.store.append(
      key,
      { messageId: `${taskId}-in`, provenance: "user", taskId, payload: text("in") },
      { tenant, taskId, contextId, state: TaskState.COMPLETED, updatedAt: now(), payload: toBinary(TaskSchema, task) },
    );
    await backend.store.append(key, { messageId: `${taskId}-out`, provenance: "agent", taskId, payload: text("out") });
    await backend.store.putPushConfig({ tenant, taskId, configId: "hook", payload: new Uint8Array([1]) });
    const fence = await backend.leases.tryAcquire(key, taskId, 60_000);
    await backend.events.append(tenant, taskId, [{ seq: 1, payload: new Uint8Array([2]), final: true }], fence!);
    await backend.leases.release(fence!);
  }
}

/** Fills threads 8 at a time (each thread's own writes in order), so filling PostgreSQL takes less of the test. */
async function populateAll(backend: StoreBackend, contextIds: readonly string[], now: () => number) {
  for (let i = 0; i < contextIds.length; i += 8) {
    await Promise.all(contextIds.slice(i, i + 8).map((contextId) => populate(backend, contextId, now)));
  }
}

const ids = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => `${prefix}-${i}`);

const hex = (b: Uint8Array) => Buffer.from(b).toString("hex");

/**
 * Reads the directory key by key (without opening a store, which would finish an interrupted deletion) and checks
 * what a reader could see: every listed thread has its meta and all its messages; every task record comes with all
 * its indexes, its push config and its event log; nothing belongs to a thread that is gone, except to the one
 * thread whose deletion marker says it is being finished.
 */
async function inspect(dir: string) {
  const db = new Level<Uint8Array, Uint8Array>(dir, { keyEncoding: "view", valueEncoding: "view" });
  await db.open();
  const byTable = new Map<string, Uint8Array[]>();
  const values = new Map<string, Uint8Array>();
  try {
    for await (const [k, v] of db.iterator()) {
      const table = Buffer.from(k.subarray(0, 12)).toString("latin1");
      if (!byTable.has(table)) byTable.set(table, []);
      byTable.get(table)!.push(k.slice(12));
      if (table === "parley:v1:t:") values.set(hex(k.slice(12)), v.slice());
    }
  } finally {
    await db.close();
  }
  const rows = (t: string) => byTable.get(`parley:v1:${t}:`) ?? [];
  const metas = new Set(rows("t").map(hex));
  const markers = new Set(rows("y").map(hex));
  const th = (k: Uint8Array, at = 0) => hex(k.subarray(at, at + 32));
  const problems: string[] = [];
  // A listed thread has a meta; a meta is listed.
  const listed = new Set(rows("l").map((k) => th(k, 40)));
  for (const t of listed) if (!metas.has(t)) problems.push(`listed thread ${t} has no meta`);
  for (const t of metas) if (!listed.has(t)) problems.push(`thread ${t} is not listed`);
  // Every message of a thread is there: messageCount (u64 at offset 16 of the meta after the ids) is checked by count.
  const messages = new Map<string, number>();
  for (const k of rows("m")) messages.set(th(k), (messages.get(th(k)) ?? 0) + 1);
  for (const [t, count] of messages) {
    if (!metas.has(t) && !markers.has(t)) problems.push(`${count} messages of a deleted thread ${t}`);
  }
  for (const t of metas) {
    if (markers.has(t)) problems.push(`thread ${t} is readable while its deletion is pending`);
    if ((messages.get(t) ?? 0) !== 2 * tasksPerThread)
      problems.push(`thread ${t} has ${messages.get(t) ?? 0} messages`);
  }
  for (const k of rows("c")) {
    if (!metas.has(th(k)) && !markers.has(th(k))) problems.push(`a task of deleted thread ${th(k)} is indexed`);
  }
  // Whole tasks: each record with its two indexes and its push config. Event logs (head, batch, sweep entry) are
  // whole too, and at most one per task: the event log's own sweep drops those that ended over 10 minutes ago.
  const count = (t: string) => rows(t).length;
  const tasks = count("k");
  for (const t of ["c", "d", "p"]) if (count(t) !== tasks) problems.push(`${count(t)} ${t}: rows for ${tasks} tasks`);
  for (const t of ["e", "f"])
    if (count(t) !== count("g")) problems.push(`${count(t)} ${t}: rows for ${count("g")} logs`);
  if (count("g") > tasks) problems.push(`${count("g")} event logs for ${tasks} tasks`);
  if (rows("r").length !== 0) problems.push(`${rows("r").length} unfinished tasks`);
  return {
    problems,
    threads: metas.size,
    markers: markers.size,
    tasks,
    logs: count("g"),
    pendingMessages: [...markers].map((t) => messages.get(t) ?? 0),
  };
}

async function metric(server: SpawnedServer, name: string): Promise<number> {
  const text = await (await fetch(`${server.baseUrl}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith(`${name} `));
  return line ? Number(line.split(" ")[1]) : 0;
}

/** Idle threads written a month ago (the store's clock is injectable), then `activeThreads` active ones now. */
async function populateIdleAndActive(url: string, idle: number): Promise<void> {
  const monthAgo = Date.now() - 30 * day;
  const old = await createStore({ url, now: () => monthAgo });
  await populateAll(old, ids("idle", idle), () => monthAgo);
  await old.close();
  const fresh = await createStore({ url });
  await populateAll(fresh, ids("active", activeThreads), Date.now);
  await fresh.close();
}

/**
 * SIGKILLs the server once its purge counter shows 100 threads purged; the counter it saw last. The counter
 * moves per batch of 100 threads: the kill lands once a batch is done and before the last one.
 */
async function killMidPurge(server: SpawnedServer): Promise<number> {
  let seen = 0;
  for (let i = 0; i < 4000 && seen < 100; i++) {
    seen = await metric(server, "parley_retention_threads_purged_total");
    if (seen < 100) await new Promise((resolve) => setTimeout(resolve, 5));
  }
  server.child.kill("SIGKILL");
  server.closeClients();
  expect((await server.exited).signal).toBe("SIGKILL");
  return seen;
}

describe("retention across a crash", () => {
  const dataDir = mkdtempSync(join(tmpdir(), "parley-retention-crash-"));
  afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

  it("a SIGKILL in the middle of a large purge leaves nothing inconsistent, and the restarted server finishes it", async () => {
    await populateIdleAndActive(dataDir, idleThreads);
    const seen = await killMidPurge(await spawnServer({ dataDir, env }));
    expect(seen).toBeGreaterThanOrEqual(100);

    const cut = await inspect(dataDir);
    console.log(
      `retention crash: killed after ${seen} purged (metric); left ${cut.threads} threads, ${cut.markers} deletion marker(s) with ${cut.pendingMessages.join(",") || "-"} messages, ${cut.tasks} tasks, ${cut.logs} event logs`,
    );
    expect(cut.problems).toEqual([]);
    // The kill landed in the middle: some idle threads are gone, some are not.
    expect(cut.threads).toBeGreaterThan(activeThreads);
    expect(cut.threads).toBeLessThan(idleThreads + activeThreads - 99);

    const second = await spawnServer({ dataDir, env });
    try {
      const threads = second.threads(headers);
      for (let i = 0; i < 2000; i++) {
        const page = await threads.listThreads({ pageSize: 100 });
        if (page.threads.length === activeThreads) break;
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      const listed = (await threads.listThreads({ pageSize: 100 })).threads.map((t) => t.contextId).sort();
      expect(listed).toEqual(Array.from({ length: activeThreads }, (_, i) => `active-${i}`));
      for (const contextId of listed) {
        expect((await threads.getThreadHistory({ contextId, pageSize: 100 })).messages).toHaveLength(
          2 * tasksPerThread,
        );
      }
      expect((await second.a2a(headers).getTask({ id: "active-0-t1" })).id).toBe("active-0-t1");
      expect(await metric(second, "parley_retention_errors_total")).toBe(0);
    } finally {
      second.closeClients();
      second.child.kill("SIGTERM");
      await second.exited;
    }
    const done = await inspect(dataDir);
    expect(done).toEqual({
      problems: [],
      threads: activeThreads,
      markers: 0,
      tasks: activeThreads * tasksPerThread,
      // The active threads' logs ended minutes ago: still resumable.
      logs: activeThreads * tasksPerThread,
      pendingMessages: [],
    });
  }, 240_000);
});

// PostgreSQL: each thread is deleted in one transaction, so a kill can only roll one back whole.
/** Fewer than on LevelDB: every write is a transaction, and filling is most of the test's time. */
const pgIdleThreads = 220;
let database: TestDatabase;
let dbUrl: string;

/** The same checks in SQL: threads whole, nothing of a deleted thread or task left anywhere. */
async function inspectPg() {
  const client = new pg.Client({ connectionString: dbUrl });
  await client.connect();
  try {
    const one = async (sql: string) => Number((await client.query<{ n: string }>(sql)).rows[0]!.n);
    return {
      threads: await one("SELECT count(*) AS n FROM parley_threads"),
      partialThreads: await one(
        `SELECT count(*) AS n FROM parley_threads t
         WHERE t.message_count <> (SELECT count(*) FROM parley_messages m WHERE m.thread_key = t.thread_key)`,
      ),
      orphanTasks: await one(
        "SELECT count(*) AS n FROM parley_tasks k WHERE NOT EXISTS (SELECT 1 FROM parley_threads t WHERE t.thread_key = k.thread_key)",
      ),
      orphanPush: await one(
        "SELECT count(*) AS n FROM parley_push_configs p WHERE NOT EXISTS (SELECT 1 FROM parley_tasks k WHERE k.task_key = p.task_key)",
      ),
      orphanEvents: await one(
        "SELECT count(*) AS n FROM parley_task_events e WHERE NOT EXISTS (SELECT 1 FROM parley_tasks k WHERE k.task_key = e.task_key)",
      ),
      tasks: await one("SELECT count(*) AS n FROM parley_tasks"),
    };
  } finally {
    await client.end();
  }
}

describe("retention across a crash on PostgreSQL", () => {
  const dataDir = mkdtempSync(join(tmpdir(), "parley-retention-crash-pg-"));
  beforeAll(async () => {
    database = await createTestDatabase();
    dbUrl = database.url;
  });
  afterAll(async () => {
    rmSync(dataDir, { recursive: true, force: true });
    await database?.drop();
  });

  it("a SIGKILL in the middle of a large purge rolls back at most one thread, and the restarted server finishes it", async () => {
    await populateIdleAndActive(dbUrl, pgIdleThreads);
    const pgEnv = { ...env, PARLEY_STORE_URL: dbUrl };
    const seen = await killMidPurge(await spawnServer({ dataDir, env: pgEnv }));
    const cut = await inspectPg();
    console.log(`retention crash (PostgreSQL): killed after ${seen} purged (metric); left ${cut.threads} threads`);
    expect(cut).toMatchObject({ partialThreads: 0, orphanTasks: 0, orphanPush: 0, orphanEvents: 0 });
    expect(cut.threads).toBeGreaterThan(activeThreads);
    expect(cut.threads).toBeLessThan(pgIdleThreads + activeThreads - 99);
    expect(cut.tasks).toBe(cut.threads * tasksPerThread);

    const second = await spawnServer({ dataDir, env: pgEnv });
    try {
      const threads = second.threads(headers);
      for (let i = 0; i < 2000; i++) {
        if ((await threads.listThreads({ pageSize: 100 })).threads.length === activeThreads) break;
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      const listed = (await threads.listThreads({ pageSize: 100 })).threads.map((t) => t.contextId).sort();
      expect(listed).toEqual(Array.from({ length: activeThreads }, (_, i) => `active-${i}`));
    } finally {
      second.closeClients();
      second.child.kill("SIGTERM");
      await second.exited;
    }
    expect(await inspectPg()).toEqual({
      threads: activeThreads,
      partialThreads: 0,
      orphanTasks: 0,
      orphanPush: 0,
      orphanEvents: 0,
      tasks: activeThreads * tasksPerThread,
    });
  }, 240_000);
});
