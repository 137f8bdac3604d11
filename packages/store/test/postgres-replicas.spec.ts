import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createPostgresBackend, type LeaseGrant, migrations, type TaskEvent } from "../src/backends.js";
import { createStore, type PostgresBackend, type TaskRecord } from "../src/index.js";
import { text } from "./helpers.js";
import { createTestDatabase } from "./pg-helpers.js";

let database: Awaited<ReturnType<typeof createTestDatabase>>;
const backends: PostgresBackend[] = [];

beforeAll(async () => {
  database = await createTestDatabase();
});
afterAll(async () => {
  for (const b of backends) await b.close();
  await database?.drop();
});

/** One "replica": its own pool and its own listener connection on the shared database. */
async function replica(): Promise<PostgresBackend> {
  const backend = await createPostgresBackend({ url: database.url, poolSize: 5, pollMs: 5000 });
  backends.push(backend);
  return backend;
}

const ev = (seq: number, final = false): TaskEvent => ({ seq, payload: text(`chunk ${seq}`), final });
const taskOf = (key: { tenant: string; contextId: string }, taskId: string): TaskRecord => ({
  ...key,
  taskId,
  state: 2,
  updatedAt: 1,
  payload: text(taskId),
});

describe("PostgreSQL shared by several replicas", () => {
  it("migrates once when replicas start together", async () => {
    const fresh = await createTestDatabase();
    try {
      const started = await Promise.all([1, 2, 3].map(() => createStore({ url: fresh.url })));
      const { rows } = await (started[0] as PostgresBackend).pool.query(
        "SELECT version FROM parley_migrations ORDER BY version",
      );
      expect(rows.map((r) => r.version)).toEqual(migrations.map((m) => m.version));
      expect(migrations.length).toBeGreaterThanOrEqual(3);
      await Promise.all(started.map((b) => b.close()));
    } finally {
      await fresh.drop();
    }
  });

  it("numbers one thread gaplessly and answers retries through either replica with the original seq", async () => {
    const [a, b] = [await replica(), await replica()];
    const key = { tenant: "acme", contextId: "shared" };
    const sends = Array.from({ length: 60 }, (_, i) => i).flatMap((i) => {
      const input = { messageId: `m${i}`, provenance: "user" as const, payload: text(`body ${i}`) };
      return [a.store.append(key, input), b.store.append(key, input)];
    });
    const results = await Promise.all(sends);
    for (let i = 0; i < results.length; i += 2) {
      expect(results[i]!.message.sequence).toBe(results[i + 1]!.message.sequence);
      expect([results[i]!.duplicate, results[i + 1]!.duplicate].sort()).toEqual([false, true]);
    }
    const all = await a.store.readMessages(key, { order: "oldest-first", limit: 100 });
    expect(all.messages.map((m) => m.sequence)).toEqual(Array.from({ length: 60 }, (_, i) => i + 1));
    expect(await b.store.getThread(key)).toMatchObject({ messageCount: 60, lastSequence: 60 });
  });

  it("grants one lease across replicas and carries a cancel to the holder's replica", async () => {
    const [a, b] = [await replica(), await replica()];
    const key = { tenant: "acme", contextId: "leased" };
    const grants = await Promise.all(
      Array.from({ length: 40 }, (_, i) => (i % 2 === 0 ? a : b).leases.tryAcquire(key, `t${i}`, 30_000)),
    );
    const winners = grants.filter((g) => g !== null);
    expect(winners).toHaveLength(1);
    const heard = new Promise<string>((resolve) => a.leases.onCancel((_, taskId) => resolve(taskId)));
    expect(await b.leases.requestCancel(key, winners[0]!.taskId)).toBe(true);
    expect(await heard).toBe(winners[0]!.taskId);
  });

  it("streams a task written on one replica to a subscriber on another, across listener kills", async () => {
    const [writer, reader] = [await replica(), await replica()];
    const key = { tenant: "acme", contextId: "streamed" };
    const fence = (await writer.leases.tryAcquire(key, "task-s", 30_000))!;
    // As the engine does: the task's record is stored before its first event (a follower finds its context by it).
    await writer.store.putTask(taskOf(key, "task-s"), { fence });
    await writer.events.append("acme", "task-s", [ev(1)], fence);
    const received: number[] = [];
    const done = (async () => {
      for await (const e of reader.events.subscribe("acme", "task-s", 0, new AbortController().signal)) {
        received.push(e.seq);
      }
    })();
    const admin = new pg.Client({ connectionString: database.url });
    await admin.connect();
    try {
      for (let seq = 2; seq <= 120; seq++) {
        await writer.events.append("acme", "task-s", [ev(seq, seq === 120)], fence);
        if (seq === 30 || seq === 70) {
          await reader.listener.ready();
          const { rows } = await admin.query("SELECT pg_terminate_backend($1) AS ok", [reader.listener.pid]);
          expect(rows[0].ok).toBe(true);
        }
      }
    } finally {
      await admin.end();
    }
    await done;
    expect(received).toEqual(Array.from({ length: 120 }, (_, i) => i + 1));
    expect(reader.listener.pid).toBeDefined();
  });

  it("sends a NOTIFY only while some replica follows the task's context", async () => {
    const [writer, reader] = [await replica(), await replica()];
    const key = { tenant: "acme", contextId: "watched" };
    const admin = new pg.Client({ connectionString: database.url });
    await admin.connect();
    const heard: string[] = [];
    admin.on("notification", (n) => heard.push(n.payload ?? ""));
    await admin.query("LISTEN parley_ev");
    // Notifications arrive in commit order: once the sentinel is in, every earlier one is counted.
    const settle = async (sentinel: string) => {
      await admin.query("SELECT pg_notify('parley_ev', $1)", [sentinel]);
      for (let i = 0; i < 500 && !heard.includes(sentinel); i++) await new Promise((r) => setTimeout(r, 10));
      return heard.filter((p) => !p.startsWith("sentinel")).length;
    };
    try {
      const fence = (await writer.leases.tryAcquire(key, "task-w", 30_000))!;
      await writer.store.putTask(taskOf(key, "task-w"), { fence });
      await writer.events.append("acme", "task-w", [ev(1)], fence);
      await writer.events.append("acme", "task-w", [ev(2)], fence);
      expect(await settle("sentinel-1")).toBe(0);
      const received: number[] = [];
      const following = (async () => {
        for await (const e of reader.events.subscribe("acme", "task-w", 0, new AbortController().signal)) {
          received.push(e.seq);
        }
      })();
      // The follower has marked the context once it has read what was there.
      for (let i = 0; i < 500 && received.length < 2; i++) await new Promise((r) => setTimeout(r, 10));
      await writer.events.append("acme", "task-w", [ev(3)], fence);
      await writer.events.append("acme", "task-w", [ev(4, true)], fence, { endsRun: true });
      await following;
      expect(received).toEqual([1, 2, 3, 4]);
      expect(await settle("sentinel-2")).toBe(2);
    } finally {
      await admin.end();
    }
  });

  it("takes the context's lease in the inbound append's statement: granted, busy (nothing written), retries, orphans", async () => {
    const [a, b] = [await replica(), await replica()];
    expect(a.store.acquiresInAppend).toBe(true);
    const key = { tenant: "acme", contextId: "acquired" };
    const grants: LeaseGrant[] = [];
    const acquire = (taskId: string, ttlMs = 30_000) => ({
      acquire: {
        taskId,
        ttlMs,
        granted: (grant: LeaseGrant) => grants.push(grant),
        busy: (holder: string) => new Error(`busy, held by ${holder}`),
      },
    });
    const first = { messageId: "m1", provenance: "user" as const, taskId: "t1", payload: text("hello") };
    const appended = await a.store.append(key, first, taskOf(key, "t1"), acquire("t1"));
    expect(appended).toMatchObject({ duplicate: false, message: { sequence: 1 } });
    expect(grants).toEqual([{ key, taskId: "t1", token: 1 }]);
    expect(await b.leases.holder(key)).toEqual({ taskId: "t1", token: 1 });
    expect((await a.store.getTask("acme", "t1"))?.taskId).toBe("t1");
    // Held: another replica's append for another task is refused with the holder named, and writes nothing.
    const second = { messageId: "m2", provenance: "user" as const, taskId: "t2", payload: text("again") };
    await expect(b.store.append(key, second, taskOf(key, "t2"), acquire("t2"))).rejects.toThrow("busy, held by t1");
    expect((await a.store.getThread(key))?.messageCount).toBe(1);
    expect(await a.store.getTask("acme", "t2")).toBeUndefined();
    // The grant fences: a write under it lands, and after the release a retry is answered (and granted anew).
    expect(await a.leases.release(grants[0]!)).toBe(true);
    const retry = await b.store.append(key, first, taskOf(key, "t1"), acquire("t1", 20));
    expect(retry).toMatchObject({ duplicate: true, message: { sequence: 1 } });
    expect(grants[1]).toEqual({ key, taskId: "t1", token: 2 });
    // A lease left to expire (its replica died) is taken over by the next append, which names the orphan.
    await new Promise((resolve) => setTimeout(resolve, 50));
    await b.store.append(key, second, taskOf(key, "t2"), acquire("t2"));
    expect(grants[2]).toEqual({ key, taskId: "t2", token: 3, orphan: { taskId: "t1", token: 2 } });
    await expect(a.store.append(key, second, undefined, { fence: grants[1]!, ...acquire("t3") })).rejects.toThrow(
      /either holds a fence or takes the lease/,
    );
  });

  it("fails with a message naming the server when PostgreSQL is unreachable", async () => {
    await expect(createStore({ url: "postgres://postgres@127.0.0.1:1/none" })).rejects.toThrow(
      /cannot reach PostgreSQL at postgres:\/\/postgres@127\.0\.0\.1:1\/none/,
    );
  });
});
