import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "../../store/test/pg-helpers.js";
import { type PgWireCounter, startPgWireCounter, type WireCounts } from "./fixtures/pg-wire-counter.js";
import { type SpawnedServer, spawnServer } from "./fixtures/spawn-server.js";
import { sendRequest } from "./harness.js";

// What one turn costs PostgreSQL, counted on the wire: a real parley-server process whose store URL points at a
// relay that reads the protocol (fixtures/pg-wire-counter.ts). Counts are deterministic, so the budget is asserted.

/** Issue 16: at most 6 round trips to PostgreSQL per turn, with leases, fencing and the event log kept. */
const roundTripBudget = 6;

let database: TestDatabase;
let counter: PgWireCounter;
/** A client of the test's database, for the checks that read it directly. */
let admin: pg.Client;
/** A LISTENer of its own on the replicas' channels: counts the NOTIFYs sent, whatever the number of replicas. */
let watcher: pg.Client;
let notified = 0;
let sentinels = 0;
const sentinelSeen = new Map<string, () => void>();
const servers: SpawnedServer[] = [];
const dirs: string[] = [];
const report: string[] = [];

async function startServer(reply: "auto" | "task"): Promise<SpawnedServer> {
  const dataDir = mkdtempSync(join(tmpdir(), "parley-rt-"));
  dirs.push(dataDir);
  const server = await spawnServer({
    dataDir,
    env: {
      PARLEY_STORE_URL: counter.url,
      PARLEY_ECHO_REPLY: reply,
      PARLEY_ECHO_INPUT: "text",
      PARLEY_RATE_LIMIT: "0",
      // No sweep and no renewal inside a counted turn: those are not the turn's statements.
      PARLEY_SWEEP_MS: "3600000",
      PARLEY_LEASE_TTL_MS: "3600000",
    },
  });
  servers.push(server);
  return server;
}

/** Waits until the context's lease is released (the last thing a turn does), then until the wire is quiet. */
async function turnDone(contextId: string): Promise<void> {
  for (let i = 0; i < 500; i++) {
    const { rows } = await admin.query<{ released: boolean }>(
      "SELECT expires_at = '-infinity'::timestamptz AS released FROM parley_context_leases WHERE context_id = $1",
      [Buffer.from(contextId, "utf8")],
    );
    if (rows[0]?.released) {
      await counter.quiet();
      // Notifications arrive in commit order: once this one is in, every NOTIFY of the turn has been counted.
      const sentinel = `sentinel:${++sentinels}`;
      const seen = new Promise<void>((resolve) => sentinelSeen.set(sentinel, resolve));
      await admin.query("SELECT pg_notify('parley_ev', $1)", [sentinel]);
      await seen;
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  throw new Error(`the lease of ${contextId} was never released`);
}

/** Counts one whole turn: from the send until its lease is released and every answer is in. */
async function countTurn(server: SpawnedServer, contextId: string, label: string): Promise<WireCounts> {
  await counter.quiet();
  counter.reset();
  notified = 0;
  await server.a2a().sendMessage(sendRequest(contextId, `hello ${randomUUID()}`));
  await turnDone(contextId);
  const counts = { ...counter.counts(), notifications: notified };
  report.push(
    `${label.padEnd(34)} round trips ${counts.roundTrips}, statements ${counts.statements}, ` +
      `commits ${counts.commits} (${counts.writeCommits} writing), NOTIFYs ${counts.notifications}, ` +
      `new connections ${counts.connections}\n    ${counts.sql.join("\n    ")}`,
  );
  return counts;
}

beforeAll(async () => {
  database = await createTestDatabase();
  const dbUrl = database.url;
  admin = new pg.Client({ connectionString: dbUrl });
  await admin.connect();
  counter = await startPgWireCounter(dbUrl);
  watcher = new pg.Client({ connectionString: dbUrl });
  await watcher.connect();
  watcher.on("notification", (n) => {
    const payload = n.payload ?? "";
    const seen = sentinelSeen.get(payload);
    if (seen) {
      sentinelSeen.delete(payload);
      seen();
    } else notified++;
  });
  await watcher.query("LISTEN parley_ev; LISTEN parley_ctl");
}, 60_000);

afterAll(async () => {
  for (const server of servers) {
    server.closeClients();
    server.child.kill("SIGKILL");
  }
  await Promise.all(servers.map((s) => s.exited));
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  await counter?.close();
  await admin?.end();
  await watcher?.end();
  await database?.drop();
  console.log(`PostgreSQL per turn (counted on the wire):\n${report.join("\n")}`);
});

describe.each(["auto", "task"] as const)("one turn on PostgreSQL, echo reply %s", (reply) => {
  const kind = reply === "auto" ? "Message reply" : "Task reply";
  let server: SpawnedServer;
  beforeAll(async () => {
    server = await startServer(reply);
    // Warm-up: the pool's connections are open and every statement has been seen once.
    for (let i = 0; i < 3; i++) {
      const contextId = `ctx-${randomUUID()}`;
      await server.a2a().sendMessage(sendRequest(contextId, "warm-up"));
      await turnDone(contextId);
      await server.a2a().sendMessage(sendRequest(contextId, "warm-up again"));
      await turnDone(contextId);
    }
  }, 60_000);

  it(`a send on a fresh context stays within ${roundTripBudget} round trips`, async () => {
    const counts = await countTurn(server, `ctx-${randomUUID()}`, `${kind}, fresh context`);
    expect(counts.connections).toBe(0);
    expect(counts.roundTrips).toBeLessThanOrEqual(roundTripBudget);
    // Nobody follows this task through the event log: no NOTIFY (and no commit waiting on NOTIFY's lock).
    expect(counts.notifications).toBe(0);
  });

  it(`a send on a reused context stays within ${roundTripBudget} round trips`, async () => {
    const contextId = `ctx-${randomUUID()}`;
    await server.a2a().sendMessage(sendRequest(contextId, "first turn"));
    await turnDone(contextId);
    const counts = await countTurn(server, contextId, `${kind}, reused context`);
    expect(counts.roundTrips).toBeLessThanOrEqual(roundTripBudget);
    expect(counts.notifications).toBe(0);
  });
});
