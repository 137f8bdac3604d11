import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createPostgresBackend, createStore, type PostgresBackend, type TaskEvent } from "../src/index.js";
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

describe("PostgreSQL shared by several replicas", () => {
  it("migrates once when replicas start together", async () => {
    const fresh = await createTestDatabase();
    try {
      const started = await Promise.all([1, 2, 3].map(() => createStore({ url: fresh.url })));
      const { rows } = await (started[0] as PostgresBackend).pool.query(
        "SELECT version FROM parley_migrations ORDER BY version",
      );
      expect(rows.map((r) => r.version)).toEqual([1, 2]);
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

  it("fails with a message naming the server when PostgreSQL is unreachable", async () => {
    await expect(createStore({ url: "postgres://postgres@127.0.0.1:1/none" })).rejects.toThrow(
      /cannot reach PostgreSQL at postgres:\/\/postgres@127\.0\.0\.1:1\/none/,
    );
  });
});
