// A PostgreSQL outage as a replica sees it, made for real: a TCP relay between the replica (a real parley-server
// process) and the database that the test pauses (a silent network: connections stay open, no byte moves) or
// through which it lets the database's own termination of the replica's connections arrive.
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Code, ConnectError } from "@connectrpc/connect";
import { type StreamResponse, type Task, TaskState } from "@parley/proto";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type SpawnedServer, spawnServer } from "../../../packages/server/test/fixtures/spawn-server.js";
import { startTcpProxy, type TcpProxy } from "../../../packages/server/test/fixtures/tcp-proxy.js";
import { sendRequest, streamedText } from "../../../packages/server/test/harness.js";
import { adminUrl, createTestDatabase } from "../../../packages/store/test/pg-helpers.js";
import { type Bridge, createBridge } from "../src/bridge.js";
import { createBridgeLogger } from "../src/logger.js";
import { createRemoteUpstream, type RemoteUpstream } from "../src/upstream.js";
import { rpc } from "./harness.js";

const dbTimeoutMs = 1500;
const leaseTtlMs = 1500;
/** Each reply streams in 8 chunks this far apart: a run long enough to span the outage below. */
const echoDelayMs = 1000;
/** The outage with a task running: longer than the lease and than one statement's timeout. */
const outageMs = 3 * leaseTtlMs;
/** What the database says when its connections are cut, and what node-postgres says on a timeout. */
const databaseText =
  /terminating connection|administrator command|Query read timeout|timeout exceeded|Connection terminated/i;

const statusText = (task: Task) =>
  task.status?.message?.parts.map((p) => (p.content.case === "text" ? p.content.value : "")).join("") ?? "";

describe("a replica whose PostgreSQL goes away", () => {
  let db: { url: string; drop: () => Promise<void> };
  let proxy: TcpProxy;
  let server: SpawnedServer;
  let upstream: RemoteUpstream;
  let bridge: Bridge;
  const dataDir = mkdtempSync(join(tmpdir(), "parley-pg-outage-"));

  /** Ends this database's connections of the replica's pool, from PostgreSQL's side. */
  async function terminatePoolConnections(): Promise<number> {
    const admin = new pg.Client({ connectionString: adminUrl() });
    await admin.connect();
    try {
      const { rows } = await admin.query(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND application_name = 'parley'",
        [new URL(db.url).pathname.slice(1)],
      );
      return rows.length;
    } finally {
      await admin.end();
    }
  }

  beforeAll(async () => {
    db = await createTestDatabase();
    const target = new URL(db.url);
    proxy = await startTcpProxy(target.hostname, Number(target.port || 5432));
    server = await spawnServer({
      dataDir,
      env: {
        PARLEY_STORE_URL: proxy.url(db.url),
        PARLEY_DB_TIMEOUT_MS: String(dbTimeoutMs),
        PARLEY_LEASE_TTL_MS: String(leaseTtlMs),
        PARLEY_SWEEP_MS: "250",
        PARLEY_DB_OUTAGE_TOLERANCE_MS: "30000",
        PARLEY_ECHO_DELAY_MS: String(echoDelayMs),
        PARLEY_RATE_LIMIT: "0",
      },
    });
    upstream = createRemoteUpstream(server.baseUrl);
    bridge = await createBridge({
      upstream: upstream.transport,
      cards: upstream.cards,
      port: 0,
      logger: createBridgeLogger("silent"),
    });
  }, 60_000);

  afterAll(async () => {
    proxy?.resume();
    upstream?.close();
    await bridge?.close();
    server?.child.kill("SIGKILL");
    server?.closeClients();
    await server?.exited;
    await proxy?.close();
    await db?.drop();
    rmSync(dataDir, { recursive: true, force: true });
  }, 30_000);

  it("names PostgreSQL (not a LevelDB directory) in its start notice", () => {
    const target = new URL(db.url);
    expect(server.stdout()).toContain(`store: PostgreSQL at 127.0.0.1:${proxy.port}${target.pathname}`);
    expect(server.stdout()).not.toContain(dataDir);
  });

  it("answers UNAVAILABLE after PARLEY_DB_TIMEOUT_MS while the network is silent, without the database's text", async () => {
    proxy.pause();
    try {
      // The call's own deadline is far past the configured wait: an answer before it is the server's bound.
      const error = await server
        .a2a()
        .sendMessage(sendRequest(`ctx-${randomUUID()}`, "sent into a silent network"), { timeoutMs: 8 * dbTimeoutMs })
        .then(
          () => undefined,
          (e: unknown) => ConnectError.from(e),
        );
      expect(error, "the send must fail").toBeDefined();
      expect(Code[error!.code]).toBe("Unavailable");
      expect(error!.rawMessage).toMatch(/the database is unavailable or did not answer in time/);
      expect(error!.rawMessage).not.toMatch(databaseText);
    } finally {
      proxy.resume();
    }
  }, 30_000);

  it("maps a connection PostgreSQL terminated to UNAVAILABLE over JSON-RPC, without the database's text", async () => {
    // Warm: the pool has connections to terminate.
    const ok = await server.a2a().sendMessage(sendRequest(`ctx-${randomUUID()}`, "warm"));
    expect((ok.payload.value as Task).status?.state).toBe(TaskState.COMPLETED);
    proxy.pause();
    const answer = fetch(bridge.url, {
      method: "POST",
      headers: { "content-type": "application/json", "a2a-version": "1.0" },
      body: rpc("SendMessage", {
        message: {
          messageId: randomUUID(),
          contextId: `ctx-${randomUUID()}`,
          role: "ROLE_USER",
          parts: [{ text: "x" }],
        },
      }),
    }).then((r) => r.json() as Promise<{ error?: { code: number; message: string }; result?: unknown }>);
    // Once the send's statement is held on the network, PostgreSQL ends the connections, and the relay delivers that.
    for (let i = 0; i < 1_000 && proxy.heldFromServer() === 0; i++) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    expect(proxy.heldFromServer()).toBeGreaterThan(0);
    expect(await terminatePoolConnections()).toBeGreaterThan(0);
    proxy.resume();
    const body = await answer;
    expect(body.result, JSON.stringify(body)).toBeUndefined();
    expect(body.error?.code).toBe(-32603);
    expect(body.error?.message).toMatch(/Unavailable/);
    expect(body.error?.message).not.toMatch(databaseText);
    // And the replica serves again at once.
    const again = await server.a2a().sendMessage(sendRequest(`ctx-${randomUUID()}`, "after"));
    expect((again.payload.value as Task).status?.state).toBe(TaskState.COMPLETED);
  }, 30_000);

  it("completes a task that runs through an outage longer than its lease (not 'executor lost')", async () => {
    const text = "a reply that streams through a database outage";
    const stream = server.a2a().sendStreamingMessage(sendRequest(`ctx-${randomUUID()}`, text));
    const iterator = stream[Symbol.asyncIterator]();
    const head = (await iterator.next()).value as StreamResponse;
    const taskId = head.payload.case === "task" ? head.payload.value.id : "";
    expect(taskId).not.toBe("");
    const events: StreamResponse[] = [head];
    const reading = (async () => {
      for (let next = await iterator.next(); !next.done; next = await iterator.next()) events.push(next.value);
    })();
    proxy.pause();
    await new Promise((resolve) => setTimeout(resolve, outageMs));
    proxy.resume();
    await reading;
    const last = events[events.length - 1]!;
    const lastStatus = last.payload.case === "statusUpdate" ? last.payload.value.status : undefined;
    const lastText = lastStatus?.message?.parts.map((p) => (p.content.case === "text" ? p.content.value : "")).join("");
    const lossLog = server
      .stderr()
      .split("\n")
      .filter((l) => /lost the context lease|renew/.test(l))
      .map((l) => l.slice(0, 600))
      .join("\n");
    expect(TaskState[lastStatus?.state ?? 0], `${lastText}\n${lossLog}`).toBe("COMPLETED");
    expect(streamedText(events)).toBe(text);
    const task = await server.a2a().getTask({ id: taskId });
    expect(task.status?.state, statusText(task)).toBe(TaskState.COMPLETED);
    expect(statusText(task)).not.toMatch(/executor lost/);
  }, 60_000);
});
