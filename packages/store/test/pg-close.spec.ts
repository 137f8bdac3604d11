// close() of the PostgreSQL backend ends every connection it opened: the pool's and the LISTEN client's,
// also when it is called with statements in flight.
import { randomUUID } from "node:crypto";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createPostgresBackend } from "../src/backends.js";
import { adminUrl, createTestDatabase } from "./pg-helpers.js";

let database: Awaited<ReturnType<typeof createTestDatabase>>;
beforeAll(async () => {
  database = await createTestDatabase();
});
afterAll(async () => {
  await database?.drop();
});

/** This test database's sessions, by application_name, seen from another database. */
async function sessions(): Promise<string[]> {
  const admin = new pg.Client({ connectionString: adminUrl() });
  await admin.connect();
  try {
    const { rows } = await admin.query<{ application_name: string }>(
      "SELECT application_name FROM pg_stat_activity WHERE datname = $1 ORDER BY 1",
      [new URL(database.url).pathname.slice(1)],
    );
    return rows.map((r) => r.application_name);
  } finally {
    await admin.end();
  }
}

/** The sessions left once PostgreSQL has processed the closed connections' goodbyes (a backend exits just after). */
async function sessionsLeft(): Promise<string[]> {
  let left = await sessions();
  for (let i = 0; i < 40 && left.length > 0; i++) {
    await new Promise((resolve) => setTimeout(resolve, 50));
    left = await sessions();
  }
  return left;
}

describe("PostgreSQL backend close()", () => {
  it("leaves no connection behind, with appends in flight", async () => {
    const backend = await createPostgresBackend({ url: database.url, poolSize: 5 });
    await backend.listener.ready();
    expect(await sessions()).toContain("parley-listener");
    expect(await sessions()).toContain("parley");
    const payload = new TextEncoder().encode("x");
    const inFlight = Array.from({ length: 40 }, (_, i) =>
      backend.store
        .append({ tenant: "t", contextId: `close-${i}` }, { messageId: randomUUID(), provenance: "user", payload })
        .catch(() => undefined),
    );
    await backend.close();
    await Promise.all(inFlight);
    expect(await sessionsLeft()).toEqual([]);
  });

  it("leaves no connection behind when closed while its listener is still connecting", async () => {
    const backend = await createPostgresBackend({ url: database.url, poolSize: 2 });
    await backend.close();
    expect(await sessionsLeft()).toEqual([]);
  });
});
