import { afterAll, beforeAll } from "vitest";
import { createStore, type PostgresBackend } from "../src/index.js";
import { replicaContract } from "./contract-replicas.js";
import { storeContract } from "./contract-suite.js";
import { createTestDatabase } from "./pg-helpers.js";

let database: Awaited<ReturnType<typeof createTestDatabase>>;
beforeAll(async () => {
  database = await createTestDatabase();
});
afterAll(async () => {
  await database?.drop();
});

const tables = [
  "parley_conversations",
  "parley_threads",
  "parley_tasks",
  "parley_push_configs",
  "parley_context_leases",
  "parley_task_events",
];

/** A backend on the file's own database, its tables emptied (DELETE: tiny tables, cheaper than TRUNCATE). */
async function openEmpty({ now }: { now?: () => number }): Promise<PostgresBackend> {
  const backend = await createStore({ url: database.url, pollMs: 200, ...(now ? { now } : {}) });
  if (backend.kind !== "postgres") throw new Error(`createStore opened ${backend.kind} for a postgres:// URL`);
  await backend.pool.query(tables.map((t) => `DELETE FROM ${t}`).join("; "));
  return backend;
}

storeContract("PostgreSQL", openEmpty);
replicaContract("PostgreSQL", openEmpty);
