#!/usr/bin/env node
// npm run bench:scale-out [-- --quick]
// Send and stream throughput of 1, 2 and 3 Parley replicas sharing one
// PostgreSQL database, beside the single LevelDB process, all driven over gRPC
// by bench/load.mjs. Each replica is its own `node packages/server/dist/main.js`;
// the load is split evenly across replicas (one load process per replica, each
// with several HTTP/2 connections). CPU comes from /proc, so it covers the
// replicas and the PostgreSQL processes doing their writes.
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { startChild } from "./lib/children.mjs";
import { cpuMsOf, pgPids as pgPidsOf } from "./lib/pg-cpu.mjs";

const quick = process.argv.includes("--quick");
const WARMUP_MS = quick ? 500 : 1_000;
const MEASURE_MS = quick ? 1_500 : 3_000;
const MAX_REQUESTS = 100_000;
const CONCURRENCY = 48;
const CONNECTIONS_PER_REPLICA = 4;
const adminUrl = process.env.PARLEY_TEST_PG_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";
const serverBinary = fileURLToPath(new URL("../packages/server/dist/main.js", import.meta.url));

const started = performance.now();
const startLoad = loadavg()[0].toFixed(1);
const elapsed = () => `${((performance.now() - started) / 1000).toFixed(0)} s`;

async function startServer(storeUrl) {
  const dataDir = mkdtempSync(join(tmpdir(), "parley-scale-"));
  const child = spawn(process.execPath, [serverBinary, "--grpc-port", "0", "--data-dir", dataDir], {
    env: {
      PATH: process.env.PATH ?? "",
      PARLEY_LOG_LEVEL: "error",
      PARLEY_RATE_LIMIT: "0",
      ...(storeUrl ? { PARLEY_STORE_URL: storeUrl } : {}),
    },
    stdio: ["ignore", "pipe", "inherit"],
  });
  const exited = new Promise((resolve) => child.once("exit", resolve));
  const address = await new Promise((resolve, reject) => {
    let stdout = "";
    child.stdout.setEncoding("utf8").on("data", (c) => {
      stdout += c;
      const match = /parley-server listening on (\S+) /.exec(stdout);
      if (match) resolve(match[1]);
    });
    void exited.then((code) => reject(new Error(`parley-server exited with ${code} before listening`)));
  });
  return {
    url: `http://${address}`,
    pid: child.pid,
    async stop() {
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
      await exited;
      clearTimeout(timer);
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

async function admin(sql, params) {
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    return await client.query(sql, params);
  } finally {
    await client.end();
  }
}

const pgPids = (dbName) => pgPidsOf(admin, dbName);

/** One configuration: its servers, a load process per server, CPU summed over every process named. */
async function measure(servers, op, dbName) {
  const loads = await Promise.all(servers.map(() => startChild("load.mjs")));
  try {
    const spec = (url) => ({
      protocol: "grpc",
      op,
      contexts: "fresh",
      url,
      connections: CONNECTIONS_PER_REPLICA,
      concurrency: Math.ceil(CONCURRENCY / servers.length),
      warmupMs: WARMUP_MS,
      durationMs: MEASURE_MS,
      maxRequests: Math.ceil(MAX_REQUESTS / servers.length),
    });
    let pgBefore = new Map();
    let serverBefore = [];
    let marked = 0;
    // Every load process pauses after its warm-up; CPU is read once all of them are there, then they go together.
    let release;
    const allThere = new Promise((resolve) => (release = resolve));
    const phase = async () => {
      if (++marked === loads.length) {
        serverBefore = servers.map((s) => cpuMsOf(s.pid));
        if (dbName) pgBefore = new Map((await pgPids(dbName)).map((pid) => [pid, cpuMsOf(pid)]));
        release();
      }
      await allThere;
    };
    const results = await Promise.all(
      loads.map((load, i) => load.request("run", { spec: spec(servers[i].url) }, { phase })),
    );
    const serverCpu = servers.reduce((sum, s, i) => sum + cpuMsOf(s.pid) - serverBefore[i], 0);
    let pgCpu = 0;
    if (dbName) {
      for (const pid of await pgPids(dbName)) pgCpu += cpuMsOf(pid) - (pgBefore.get(pid) ?? 0);
    }
    const requests = results.reduce((n, r) => n + r.requests, 0);
    const errors = results.reduce((n, r) => n + r.errors, 0);
    const elapsedMs = Math.max(...results.map((r) => r.elapsedMs));
    return {
      requests,
      errors,
      sampleError: results.find((r) => r.sampleError)?.sampleError,
      rps: (requests / elapsedMs) * 1000,
      // Percentiles of separate load processes cannot be merged exactly; the worst one is the honest bound.
      p50: Math.max(...results.map((r) => r.p50)),
      p99: Math.max(...results.map((r) => r.p99)),
      serverCpuMsPerReq: serverCpu / requests,
      pgCpuMsPerReq: dbName ? pgCpu / requests : Number.NaN,
    };
  } finally {
    await Promise.all(loads.map((l) => l.stop()));
  }
}

async function configuration(label, replicas) {
  let dbName;
  let storeUrl;
  if (replicas > 0) {
    dbName = `parley_bench_${randomBytes(5).toString("hex")}`;
    await admin(`CREATE DATABASE ${dbName}`);
    const u = new URL(adminUrl);
    u.pathname = `/${dbName}`;
    storeUrl = u.toString();
  }
  const servers = [];
  try {
    // The first replica creates the schema alone; the rest start on a ready one.
    servers.push(await startServer(storeUrl));
    servers.push(
      ...(await Promise.all(Array.from({ length: Math.max(0, replicas - 1) }, () => startServer(storeUrl)))),
    );
    const rows = [];
    for (const op of ["send", "stream"]) {
      process.stderr.write(`  ${label} ${op} ... [${elapsed()}]`);
      const r = await measure(servers, op, dbName);
      process.stderr.write(` ${r.rps.toFixed(0)} req/s${r.errors ? `, ${r.errors} errors (${r.sampleError})` : ""}\n`);
      rows.push({ label, op, ...r });
    }
    return rows;
  } finally {
    await Promise.all(servers.map((s) => s.stop()));
    if (dbName) await admin(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
  }
}

const rows = [];
process.stderr.write("scale-out:\n");
rows.push(...(await configuration("LevelDB, 1 process", 0)));
for (const n of [1, 2, 3]) rows.push(...(await configuration(`PostgreSQL, ${n} replica${n > 1 ? "s" : ""}`, n)));

const fmt = (x, d = 0) => (Number.isFinite(x) ? x.toFixed(d) : "-");
const ms = (x) => (Number.isFinite(x) ? (x < 10 ? x.toFixed(2) : x.toFixed(1)) : "-");
const header = [
  "configuration",
  "operation",
  "req/s",
  "p50 ms",
  "p99 ms",
  "replica CPU ms/req",
  "PostgreSQL CPU ms/req",
  "errors",
];
const lines = rows.map((r) => [
  r.label,
  r.op === "send" ? "SendMessage" : "SendStreamingMessage",
  fmt(r.rps),
  ms(r.p50),
  ms(r.p99),
  ms(r.serverCpuMsPerReq),
  ms(r.pgCpuMsPerReq),
  String(r.errors),
]);
const widths = header.map((h, i) => Math.max(h.length, ...lines.map((l) => l[i].length)));
const line = (cells) => `| ${cells.map((c, i) => c.padEnd(widths[i])).join(" | ")} |`;
const cpuModel = /model name\s*:\s*(.*)/.exec(readFileSync("/proc/cpuinfo", "utf8"))?.[1] ?? cpus()[0]?.model;
const pgVersion = (await admin("SHOW server_version")).rows[0].server_version;
process.stdout.write(
  [
    `Machine: ${cpus().length} cores (nproc), ${cpuModel}, Node ${process.version}, PostgreSQL ${pgVersion} on loopback. ` +
      `${CONCURRENCY} requests in flight split evenly over the replicas, gRPC, ${CONNECTIONS_PER_REPLICA} HTTP/2 connections per replica, ` +
      `a fresh context per request, ${WARMUP_MS / 1000} s warm-up + ${MEASURE_MS / 1000} s measured per row; ` +
      `load average at the start ${startLoad}, at the end ${loadavg()[0].toFixed(1)} (other work on the machine shows here).`,
    "",
    line(header),
    `|${widths.map((w) => "-".repeat(w + 2)).join("|")}|`,
    ...lines.map(line),
    "",
    "p50/p99: the highest of the per-replica load processes. CPU: /proc utime+stime of the replicas, and of this run's " +
      "PostgreSQL backends plus its WAL writer, checkpointer and background writer.",
    `Whole run: ${fmt((performance.now() - started) / 1000)} s.`,
    "",
  ].join("\n"),
);
