// ThreadRetention on both backends: idle threads go with their tasks, push configs and event logs; active ones stay.
import { Level } from "level";
import { afterAll, beforeAll } from "vitest";
import { createStore, type PostgresBackend, type StoreBackend } from "../src/index.js";
import { tempDir } from "./helpers.js";
import { createTestDatabase } from "./pg-helpers.js";
import { retentionContract } from "./retention-suite.js";

/** Keys of a LevelDB directory by table ("parley:v1:t:" -> "t"). */
export async function levelTables(dir: string): Promise<Record<string, number>> {
  const db = new Level<Uint8Array, Uint8Array>(dir, { keyEncoding: "view", valueEncoding: "view" });
  await db.open();
  try {
    const counts: Record<string, number> = {};
    for await (const k of db.keys()) {
      const table = Buffer.from(k.subarray(0, 12)).toString("latin1");
      counts[table] = (counts[table] ?? 0) + 1;
    }
    return counts;
  } finally {
    await db.close();
  }
}

const levelDirs = new WeakMap<StoreBackend, string>();

retentionContract(
  "LevelDB",
  async ({ now }) => {
    const dir = await tempDir();
    const backend = await createStore({ url: dir, ...(now ? { now } : {}) });
    levelDirs.set(backend, dir);
    return backend;
  },
  // The directory is locked while the store is open: close it, then read every key.
  async (backend) => {
    await backend.close();
    return levelTables(levelDirs.get(backend)!);
  },
);

let database: Awaited<ReturnType<typeof createTestDatabase>>;
beforeAll(async () => {
  database = await createTestDatabase();
});
afterAll(async () => {
  await database?.drop();
});

// Lease rows stay (a context's fencing token must never go back), so they are not counted.
const tables = ["parley_threads", "parley_messages", "parley_tasks", "parley_push_configs", "parley_task_events"];

retentionContract(
  "PostgreSQL",
  async ({ now }) => {
    const backend = await createStore({ url: database.url, pollMs: 200, ...(now ? { now } : {}) });
    const pool = (backend as PostgresBackend).pool;
    await pool.query([...tables, "parley_context_leases"].map((t) => `DELETE FROM ${t}`).join("; "));
    return backend;
  },
  async (backend) => {
    const pool = (backend as PostgresBackend).pool;
    const counts: Record<string, number> = {};
    for (const table of tables) {
      const { rows } = await pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${table}`);
      counts[table] = rows[0]!.n;
    }
    return counts;
  },
);
