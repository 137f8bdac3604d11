import { afterAll, beforeAll } from "vitest";
import { createStore } from "../src/index.js";
import { storeContract } from "./contract-suite.js";
import { createTestDatabase } from "./pg-helpers.js";

let database: Awaited<ReturnType<typeof createTestDatabase>>;
beforeAll(async () => {
  database = await createTestDatabase();
});
afterAll(async () => {
  await database?.drop();
});

const tables = ["parley_threads", "parley_tasks", "parley_push_configs", "parley_context_leases", "parley_task_events"];

storeContract("PostgreSQL", async ({ now }) => {
  const backend = await createStore({ url: database.url, pollMs: 200, ...(now ? { now } : {}) });
  // Each test starts from empty tables in the file's own database (DELETE: tiny tables, cheaper than TRUNCATE).
  if (backend.kind === "postgres") {
    const { pool } = backend as unknown as { pool: import("pg").Pool };
    await pool.query(tables.map((t) => `DELETE FROM ${t}`).join("; "));
  }
  return backend;
});
