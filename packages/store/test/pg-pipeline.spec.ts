// Single statements run on pipelined connections (postgres/pg-pipeline.ts): many in flight share them, a
// statement's own error leaves its connection in use, and a connection PostgreSQL ended is replaced.
import { randomUUID } from "node:crypto";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createPostgresBackend } from "../src/backends.js";
import { isDatabaseUnavailable, type PostgresBackend } from "../src/index.js";
import { adminUrl, createTestDatabase, type TestDatabase } from "./pg-helpers.js";

let database: TestDatabase;
let backend: PostgresBackend;
const payload = new TextEncoder().encode("x");
const key = () => ({ tenant: "t", contextId: `pipe-${randomUUID()}` });

/** The backend pids of this database's sessions named `parley` (the pool's and the pipelined ones). */
async function parleySessions(): Promise<number[]> {
  const admin = new pg.Client({ connectionString: adminUrl() });
  await admin.connect();
  try {
    const { rows } = await admin.query<{ pid: number }>(
      "SELECT pid FROM pg_stat_activity WHERE datname = $1 AND application_name = 'parley'",
      [database.name],
    );
    return rows.map((r) => r.pid);
  } finally {
    await admin.end();
  }
}

beforeAll(async () => {
  database = await createTestDatabase();
  backend = await createPostgresBackend({ url: database.url, poolSize: 2 });
});
afterAll(async () => {
  await backend?.close();
  await database?.drop();
});

describe("single statements on pipelined connections", () => {
  it("answers many statements in flight on a few connections, each with its own outcome", async () => {
    const k = key();
    const first = await backend.store.append(k, { messageId: "m-0", provenance: "user", payload });
    // 64 at once: retries of one message (each answered with the stored record), fresh messages, and reads.
    const results = await Promise.all(
      Array.from({ length: 64 }, (_, i) =>
        i % 3 === 0
          ? backend.store.append(k, { messageId: "m-0", provenance: "user", payload })
          : i % 3 === 1
            ? backend.store.append(k, { messageId: `m-${i}`, provenance: "user", payload })
            : backend.store.getThread(k),
      ),
    );
    for (let i = 0; i < results.length; i += 3) {
      expect(results[i]).toMatchObject({ duplicate: true, message: { sequence: first.message.sequence } });
    }
    const sequences = results
      .filter((_, i) => i % 3 === 1)
      .map((r) => (r as { message: { sequence: number } }).message.sequence);
    expect(new Set(sequences).size).toBe(sequences.length);
    expect((await backend.store.getThread(k))?.messageCount).toBe(1 + sequences.length);
    // The pool's connection plus at most the two pipelined ones: 64 statements in flight opened no more.
    expect((await parleySessions()).length).toBeLessThanOrEqual(3);
  });

  it("replaces a connection PostgreSQL ended: a statement on it fails as unavailable, the next ones run", async () => {
    await Promise.all(
      Array.from({ length: 8 }, () =>
        backend.store.append(key(), { messageId: randomUUID(), provenance: "user", payload }),
      ),
    );
    const admin = new pg.Client({ connectionString: adminUrl() });
    await admin.connect();
    try {
      const pids = await parleySessions();
      expect(pids.length).toBeGreaterThan(0);
      await admin.query("SELECT pg_terminate_backend(pid) FROM unnest($1::int[]) AS pid", [pids]);
    } finally {
      await admin.end();
    }
    // Whether a statement meets the ended session depends on when this process reads PostgreSQL's goodbye; one
    // that does fails as unavailable and retires its connection, so a few tries are enough, never a wait.
    const failures: unknown[] = [];
    let stored = false;
    for (let i = 0; i < 6 && !stored; i++) {
      try {
        await backend.store.append(key(), { messageId: randomUUID(), provenance: "user", payload });
        stored = true;
      } catch (error) {
        failures.push(error);
      }
    }
    expect(stored).toBe(true);
    expect(failures.length).toBeLessThanOrEqual(3);
    for (const error of failures) expect(isDatabaseUnavailable(error)).toBe(true);
  });
});
