// The durable anchor: @a2a-js/sdk's own server with its DatabaseTaskStore (Kysely),
// over JSON-RPC (express), the same echo agent as the in-memory anchor replying with
// a COMPLETED task and one artifact. The tables are made by the SDK's own
// `a2a-db upgrade --url ...`.
// ANCHOR_DB=sqlite: better-sqlite3 in a temp dir, WAL, synchronous=NORMAL.
// ANCHOR_DB=postgres: a fresh database on BENCH_PG_URL's server, synchronous_commit=off;
// the CPU of its PostgreSQL processes is reported through the `dbCpu*` control messages.
import { execFile } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { AGENT_CARD_PATH, Role, TaskState } from "@a2a-js/sdk";
import { AgentEvent, DefaultRequestHandler } from "@a2a-js/sdk/server";
import { DatabaseTaskStore, TASK_TABLE } from "@a2a-js/sdk/server/database";
import { agentCardHandler, jsonRpcHandler, UserBuilder } from "@a2a-js/sdk/server/express";
import Database from "better-sqlite3";
import express from "express";
import { Kysely, PostgresDialect, SqliteDialect, sql } from "kysely";
import pg from "pg";
import { createEchoExecutor, echoCard, listenJsonRpc } from "../lib/anchor-echo.mjs";
import { serveControl } from "../lib/child-ipc.mjs";
import { createBenchDatabase } from "../lib/pg-database.mjs";

const run = promisify(execFile);
const a2aDb = fileURLToPath(new URL("node_modules/@a2a-js/sdk/dist/cli/a2a_db.js", import.meta.url));
const kind = process.env.ANCHOR_DB ?? "sqlite";

async function migrate(url) {
  await run(process.execPath, [a2aDb, "upgrade", "--url", url], { env: { ...process.env, DATABASE_URL: url } });
}

async function openSqlite() {
  const dir = mkdtempSync(join(tmpdir(), "anchor-sqlite-"));
  const file = join(dir, "a2a.db");
  await migrate(`sqlite:${file}`);
  const database = new Database(file);
  database.pragma("journal_mode = WAL");
  database.pragma("synchronous = NORMAL");
  return {
    db: new Kysely({ dialect: new SqliteDialect({ database }) }),
    afterWarmup: async () => {},
    close: async () => rmSync(dir, { recursive: true, force: true }),
  };
}

// pg-pool's end() resolves before its clients' sockets close, and the database is dropped right after: a pool
// without an error listener would then crash the anchor on the cut connection.
function anchorPool(url) {
  const pool = new pg.Pool({ connectionString: url, max: 10 });
  pool.on("error", () => {});
  return pool;
}

async function openPostgres() {
  const database = await createBenchDatabase("parley_anchor", { synchronousCommit: "off" });
  await migrate(database.url);
  const db = new Kysely({
    dialect: new PostgresDialect({ pool: anchorPool(database.url) }),
  });
  return {
    db,
    meter: database.meter,
    // Autovacuum is off on this machine: without statistics the anchor's primary-key lookups scan.
    afterWarmup: async () => {
      await sql.raw(`VACUUM (ANALYZE) ${TASK_TABLE}`).execute(db);
    },
    close: async () => {
      await db.destroy();
      await database.drop();
    },
  };
}

const store = kind === "postgres" ? await openPostgres() : await openSqlite();
const executor = createEchoExecutor({ AgentEvent, Role, TaskState }, { replyMode: "task", newId: randomUUID });
const handler = new DefaultRequestHandler(echoCard, new DatabaseTaskStore(store.db), executor);
const http = await listenJsonRpc({ express, AGENT_CARD_PATH, agentCardHandler, jsonRpcHandler, UserBuilder }, handler);

serveControl({
  afterWarmup: () => store.afterWarmup(),
  dbCpuMark: () => store.meter?.mark(),
  dbCpuRead: () => store.meter?.read() ?? 0,
  stop: async () => {
    http.close();
    await store.close();
    setImmediate(() => process.exit(0));
  },
});
process.send({
  ready: true,
  jsonRpcUrl: `http://127.0.0.1:${http.address().port}/`,
  dbCpu: Boolean(store.meter),
  afterWarmup: true,
});
