#!/usr/bin/env node
// npm run bench [-- --scaling | --no-scaling | --only=NAME,... | --profile | --quick | --warmup-ms=N | --measure-ms=N
//                   | --rounds=N | --flat-threads=N | --base=DIR | --no-durable-anchors | --pin | --no-docs | --help]
// Starts every server in its own process, drives each with the same load
// generator (its own process), and prints one table plus the scaling figures.
import { readFileSync } from "node:fs";
import { cpus } from "node:os";
import { performance } from "node:perf_hooks";
import { ensureAnchorDeps } from "./anchors/install.mjs";
import { startChild } from "./lib/children.mjs";
import { writeBenchDocs } from "./lib/docs-table.mjs";
import { countFlag } from "./lib/embedded.mjs";
import { printReport } from "./lib/report.mjs";

const args = new Set(process.argv.slice(2));
if (args.has("--help") || args.has("-h")) {
  process.stdout.write(`npm run bench [-- FLAGS]   (or: node bench/run.mjs FLAGS, after npm run build)

Runs every server in its own process against one load generator and prints one table of req/s, latency and
CPU per request with each Parley row's ratio to its anchor, LevelDB's group commit and V8's garbage collector per
request under it, then the scaling figures.

  --no-scaling           only the table
  --scaling              only the scaling figures
  --quick                one shorter round, smaller scaling blocks
  --only=ID,...          a subset of rows (bridge-send, anchor-jsonrpc-send, ...; history, growth, flat,
                         streams name the scaling parts)
  --profile              node --cpu-prof profiles of the Parley server in bench/profiles/
  --no-durable-anchors   skip the SDK's DatabaseTaskStore rows (SQLite, PostgreSQL)
  --warmup-ms=N          each row's warm-up (default 1000, --quick 500)
  --measure-ms=N         each row's measured phase (default 3000, --quick 1500)
  --rounds=N             rounds of the table, each row on a fresh server per round, the best kept (default 2,
                         --quick 1)
  --flat-threads=N       stored threads for the flat-cost part (default 100000, --quick 20000)
  --base=DIR             also run every Parley row on another built checkout, in the same rounds
  --pin                  every server on CPU 0 (its helper threads too), the load generator on CPU 1
  --no-docs              do not write the table into docs/benchmarks.md (a run with the default rows, rounds
                         and phases writes it; --only, --quick, --scaling, --base and --pin runs never do)
  --help                 this text

docs/benchmarks.md explains the rows and the targets.
`);
  process.exit(0);
}
const switches = new Set([
  "--scaling",
  "--no-scaling",
  "--quick",
  "--profile",
  "--no-durable-anchors",
  "--pin",
  "--no-docs",
]);
const valued = ["--only=", "--base=", "--flat-threads=", "--warmup-ms=", "--measure-ms=", "--rounds="];
for (const arg of args) {
  if (switches.has(arg) || valued.some((prefix) => arg.startsWith(prefix))) continue;
  process.stderr.write(
    `bench: unknown flag ${JSON.stringify(arg)}; the flags are ${[...switches].join(", ")}, ` +
      `${valued.map((v) => `${v}...`).join(", ")} (--help lists them; see docs/benchmarks.md)\n`,
  );
  process.exit(2);
}
/** The text after `--name=` of that flag, or undefined without it. */
const flagValue = (name) => [...args].find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const onlyArg = flagValue("only");
const only = onlyArg !== undefined ? new Set(onlyArg.split(",")) : undefined;
const scalingOnly = args.has("--scaling");
const withScaling = !args.has("--no-scaling");
const quick = args.has("--quick");
const profile = args.has("--profile");
// --pin: as issue 16 measured its starting point, each server gets one core (LevelDB's and V8's threads share it
// with its event loop) and the load generator the other, so a server never competes with the client for a core.
const pin = args.has("--pin");
if (pin && cpus().length < 2) {
  process.stderr.write(
    `bench: --pin needs two CPUs (one for the servers, one for the load); this machine has ${cpus().length}\n`,
  );
  process.exit(2);
}
/** A server's child process: pinned to CPU 0 with --pin. */
const startServer = (script, options = {}) => startChild(script, { ...options, ...(pin ? { cpus: "0" } : {}) });
// --base=DIR: every Parley row also runs on the servers of another checkout (built, with node_modules),
// in the same rounds, so a change is measured against what it replaces under the same load.
const baseDir = flagValue("base")?.replace(/\/$/, "");

const count = (name, fallback) => countFlag("bench", name, flagValue(name), fallback);

// --warmup-ms and --measure-ms lengthen a row's phases: every server keeps compiling hot code in V8's worker
// threads for seconds after it starts, so the short defaults measure some of that work on both sides (figures in
// docs/benchmarks.md).
const WARMUP_MS = count("warmup-ms", quick ? 500 : 1_000);
// Every row is measured in each round, each time on a freshly started server, and the
// round with the most requests/s is kept: on a shared VM a neighbour can halve one
// row's figures, and taking the best of independent samples treats every server alike.
const ROUNDS = count("rounds", quick ? 1 : 2);
const MEASURE_MS = count("measure-ms", quick ? 1_500 : 3_000);
const MAX_REQUESTS = 200_000;
const CONCURRENCY = 64;
const HELD_STREAMS = 1_000;
const STREAM_DELAY_MS = 700;
const GROWTH_BLOCKS = quick ? 3 : 6;
const GROWTH_BLOCK = quick ? 2_000 : 10_000;
// Unmeasured sends before the first block: without them the first block also paid for compiling the send path,
// which made it the dearest and hid part of the growth the rows are there to show.
const GROWTH_WARMUP = quick ? 500 : 2_000;
// Flat cost: CPU per send on an empty store, then after this many stored threads (--flat-threads=N;
// issue 16's target names 1 000 000, which takes minutes to fill here, so the default run fills fewer).
const FLAT_THREADS = count("flat-threads", quick ? 20_000 : 100_000);
const FLAT_BLOCK = quick ? 1_000 : 4_000;
// After the flags are read, so a mistyped one stops the run before anything is installed. The durable anchors
// need better-sqlite3, which is compiled on first use (anchors/install.mjs).
const durableAnchors = !args.has("--no-durable-anchors") && (await ensureAnchorDeps());

// Task replies as the durable anchors give them: a COMPLETED task with the whole text in one artifact
// (PARLEY_ECHO_CHUNKS=1; the echo agent's default streams a task reply in 8 chunks, 12 events per send).
const taskReply = { PARLEY_ECHO_REPLY: "task", PARLEY_ECHO_CHUNKS: "1" };

const started = performance.now();
const elapsed = () => `${((performance.now() - started) / 1000).toFixed(0)} s`;
const load = await startChild("load.mjs", pin ? { cpus: "1" } : {});

async function measure(server, row) {
  const spec = {
    ...row.spec,
    warmupMs: WARMUP_MS,
    durationMs: MEASURE_MS,
    maxRequests: MAX_REQUESTS,
    concurrency: CONCURRENCY,
    ...row.overrides,
  };
  let before;
  let commitsBefore;
  // A --base checkout's servers may predate the GC record: their rows then have no GC figures.
  let gcMarked = false;
  const afterWarmup = async () => {
    if (server.info.afterWarmup) await server.request("afterWarmup");
    if (server.info.dbCpu) await server.request("dbCpuMark");
    if (server.info.commits) commitsBefore = await server.request("commits");
    gcMarked = await server.request("gcMark").then(
      () => true,
      () => false,
    );
    before = await server.request("cpu");
  };
  const result = await load.request("run", { spec }, { phase: afterWarmup });
  const after = await server.request("cpu");
  const gc = gcMarked ? await server.request("gcRead") : undefined;
  // LevelDB's group commit during the measured part: writes, batches and fsyncs per request.
  const commitsAfter = commitsBefore ? await server.request("commits") : undefined;
  const perRequest = (field) =>
    commitsAfter && result.requests ? (commitsAfter[field] - commitsBefore[field]) / result.requests : undefined;
  const dbCpuMs = server.info.dbCpu ? await server.request("dbCpuRead") : undefined;
  const cpuMs = (after.usage.user + after.usage.system - before.usage.user - before.usage.system) / 1000;
  const mainMs = after.mainMs !== undefined && before.mainMs !== undefined ? after.mainMs - before.mainMs : Number.NaN;
  return {
    ...row,
    ...result,
    cpuMsPerRequest: result.requests ? cpuMs / result.requests : Number.NaN,
    // The JavaScript thread's part of cpuMsPerRequest; the rest ran on the process's other threads.
    mainMsPerRequest: result.requests ? mainMs / result.requests : Number.NaN,
    // The load generator's CPU per request (the one process that drives every row).
    loadCpuMsPerRequest:
      result.requests && result.loadCpuMs !== undefined ? result.loadCpuMs / result.requests : undefined,
    dbCpuMsPerRequest: dbCpuMs !== undefined && result.requests ? dbCpuMs / result.requests : undefined,
    commits: commitsAfter
      ? { writes: perRequest("writes"), batches: perRequest("batches"), fsyncs: perRequest("synced") }
      : undefined,
    concurrency: spec.concurrency,
    serverCpuShare: cpuMs / result.elapsedMs,
    gc,
  };
}

/** The best measurement of each row so far (most requests/s), by row id, in first-measured order. */
const best = new Map();
function keep(row) {
  const earlier = best.get(row.id);
  if (!earlier || earlier.skipped || (!row.skipped && row.rps > earlier.rps)) best.set(row.id, row);
}
/** The --only names that named a row, a group or a scaling part, so a mistyped one is reported; and every row id. */
const matched = new Set();
const rowIds = new Set();
async function group(name, script, options, scenarios) {
  for (const s of scenarios) rowIds.add(s.baseOf ?? s.id);
  const wanted = scenarios.filter((s) => !only || only.has(s.baseOf ?? s.id) || only.has(name));
  for (const s of wanted) matched.add(s.baseOf ?? s.id);
  if (wanted.length > 0) matched.add(name);
  if (wanted.length === 0) return;
  const server = await startServer(script, options);
  try {
    for (const s of wanted) {
      const url = s.spec.protocol === "jsonrpc" ? server.info.jsonRpcUrl : server.info.grpcUrl;
      if (!url) {
        keep({ ...s, skipped: server.info.bridgeError ?? "no endpoint" });
        continue;
      }
      process.stderr.write(`  ${s.id} ...`);
      const r = await measure(server, { ...s, spec: { ...s.spec, url } });
      process.stderr.write(` ${r.rps.toFixed(0)} req/s${r.errors ? `, ${r.errors} errors (${r.sampleError})` : ""}\n`);
      keep(r);
    }
  } finally {
    await server.stop();
  }
}

const sc = (id, target, protocol, op, contexts, anchor) => ({ id, target, anchor, spec: { protocol, op, contexts } });
/** A Parley group, and with --base the same group on the base checkout's server (order alternating by round). */
async function parleyGroup(round, name, options, scenarios) {
  const own = () => group(name, "servers/parley.mjs", options, scenarios);
  if (!baseDir) return own();
  const base = () =>
    group(
      name,
      `${baseDir}/bench/servers/parley.mjs`,
      { ...options, execArgv: [] },
      scenarios.map((s) => ({ ...s, id: `${s.id}@base`, target: `${s.target} [base]`, baseOf: s.id })),
    );
  if (round % 2 === 1) {
    await base();
    await own();
  } else {
    await own();
    await base();
  }
}
const parleyExecArgv = profile ? ["--cpu-prof", "--cpu-prof-dir=bench/profiles"] : [];

for (let round = 1; round <= ROUNDS && !scalingOnly; round++) {
  process.stderr.write(`throughput and latency, round ${round} of ${ROUNDS}: [${elapsed()}]\n`);
  // Each round's servers in the opposite order of the last: a shared VM has slow spells of minutes, and one that
  // fell on every Parley row of a round (anchors first, then Parley) still left each row a round on the other side.
  const groups = [];
  groups.push(() =>
    group("bare", "servers/bare.mjs", {}, [
      sc("bare-send", "bare node:http JSON echo", "jsonrpc", "send", "fresh"),
      sc("bare-stream", "bare node:http JSON echo", "jsonrpc", "stream", "fresh"),
    ]),
  );
  groups.push(() =>
    group("durable-floor", "servers/durable-floor.mjs", {}, [
      sc("durable-floor-send", "durable floor (node:http + 2 LevelDB puts)", "jsonrpc", "send", "fresh"),
    ]),
  );
  groups.push(() =>
    group("connect-floor", "servers/connect-floor.mjs", {}, [
      sc("connect-floor-grpc-send", "connect-node floor (no engine)", "grpc", "send", "fresh"),
      // The same server and client library over the Connect protocol: what connect-node's gRPC path costs above it.
      sc("connect-floor-connect-send", "connect-node floor (no engine), Connect", "connect", "send", "fresh"),
    ]),
  );
  groups.push(() =>
    group("anchor", "servers/anchor.mjs", { env: { ANCHOR_REPLY: "message" } }, [
      sc("anchor-jsonrpc-send", "anchor JSON-RPC", "jsonrpc", "send", "fresh"),
      sc("anchor-jsonrpc-send-reused", "anchor JSON-RPC", "jsonrpc", "send", "reused"),
      sc("anchor-grpc-send", "anchor gRPC", "grpc", "send", "fresh"),
    ]),
  );
  groups.push(() =>
    group("anchor", "servers/anchor.mjs", { env: { ANCHOR_REPLY: "stream" } }, [
      sc("anchor-jsonrpc-stream", "anchor JSON-RPC", "jsonrpc", "stream", "fresh"),
      sc("anchor-grpc-stream", "anchor gRPC", "grpc", "stream", "fresh"),
    ]),
  );
  if (durableAnchors) {
    groups.push(() =>
      group("anchor-sqlite", "anchors/anchor-db.mjs", { env: { ANCHOR_DB: "sqlite" } }, [
        sc("anchor-sqlite-send", "anchor DatabaseTaskStore, SQLite", "jsonrpc", "send", "fresh"),
      ]),
    );
    groups.push(() =>
      group("anchor-pg", "anchors/anchor-db.mjs", { env: { ANCHOR_DB: "postgres" } }, [
        sc("anchor-pg-send", "anchor DatabaseTaskStore, PostgreSQL", "jsonrpc", "send", "fresh"),
      ]),
    );
  }
  groups.push(() =>
    parleyGroup(round, "parley-task", { env: taskReply, execArgv: parleyExecArgv }, [
      sc(
        "bridge-send-task",
        "Parley bridge, task replies",
        "jsonrpc",
        "send",
        "fresh",
        durableAnchors ? "anchor-sqlite-send" : undefined,
      ),
    ]),
  );
  groups.push(() =>
    parleyGroup(
      round,
      "parley-pg",
      { env: { ...taskReply, BENCH_PARLEY_STORE: "postgres" }, execArgv: parleyExecArgv },
      [
        sc(
          "bridge-send-pg",
          "Parley bridge on PostgreSQL, task replies",
          "jsonrpc",
          "send",
          "fresh",
          durableAnchors ? "anchor-pg-send" : undefined,
        ),
      ],
    ),
  );
  // PARLEY_DURABILITY=synced: the same send with every write fsynced before it is acknowledged, against the
  // default (its anchor is the default row); once at 64 in flight (group commit shares fsyncs) and once at 1.
  groups.push(() =>
    parleyGroup(round, "parley-synced", { env: { PARLEY_DURABILITY: "synced" }, execArgv: parleyExecArgv }, [
      sc("bridge-send-synced", "Parley bridge (embedded), synced", "jsonrpc", "send", "fresh", "bridge-send"),
      {
        ...sc(
          "bridge-send-synced-1",
          "Parley bridge (embedded), synced, 1 in flight",
          "jsonrpc",
          "send",
          "fresh",
          "bridge-send-1",
        ),
        overrides: { concurrency: 1 },
      },
    ]),
  );
  groups.push(() =>
    parleyGroup(round, "parley", { execArgv: parleyExecArgv }, [
      sc("bridge-send", "Parley bridge (embedded)", "jsonrpc", "send", "fresh", "anchor-jsonrpc-send"),
      {
        ...sc("bridge-send-1", "Parley bridge (embedded), 1 in flight", "jsonrpc", "send", "fresh"),
        overrides: { concurrency: 1 },
      },
      sc("bridge-send-reused", "Parley bridge (embedded)", "jsonrpc", "send", "reused", "anchor-jsonrpc-send-reused"),
      sc("bridge-stream", "Parley bridge (embedded)", "jsonrpc", "stream", "fresh", "anchor-jsonrpc-stream"),
      sc("grpc-send", "Parley gRPC", "grpc", "send", "fresh", "anchor-grpc-send"),
      sc("grpc-stream", "Parley gRPC", "grpc", "stream", "fresh", "anchor-grpc-stream"),
      sc("connect-send", "Parley Connect (h2)", "connect", "send", "fresh", "anchor-grpc-send"),
      sc("connect-stream", "Parley Connect (h2)", "connect", "stream", "fresh", "anchor-grpc-stream"),
    ]),
  );
  for (const measureGroup of round % 2 === 0 ? groups.reverse() : groups) await measureGroup();
}

const scaling = {};
// --only=history,growth,flat,streams picks scaling parts too (each part's name).
const part = (name) => {
  if (only?.has(name)) matched.add(name);
  return !only || only.has(name);
};
if (withScaling && (part("history") || part("growth") || part("flat") || part("streams"))) {
  process.stderr.write("scaling:\n");
  const gcArgv = ["--expose-gc"];
  const parley = part("history") ? await startServer("servers/parley.mjs", { execArgv: gcArgv }) : undefined;
  if (parley) {
    try {
      const url = parley.info.grpcUrl;
      process.stderr.write(`  history build (10 vs 100 000 messages) ... [${elapsed()}]\n`);
      // The small thread's whole is what both threads read for the same work (historyRead's sameCount).
      const small = 10;
      const reps = 5_000;
      await parley.request("fill", { contextId: "thread-10", count: small });
      const fill = await parley.request("fill", { contextId: "thread-100k", count: 100_000 });
      const read10 = await parley.request("historyRead", { contextId: "thread-10", reps, sameCount: small });
      const read100k = await parley.request("historyRead", { contextId: "thread-100k", reps, sameCount: small });
      // Alternating the two keeps drift (GC, compaction) from landing on one side only.
      const sendTimes = { small: [], big: [] };
      const sendCpu = { small: 0, big: 0 };
      const SEQUENTIAL_REPS = 40;
      // Sequential sends on one context; the server's CPU for them, per send (load's 10 warm-up sends included).
      const sequential = async (contextId, side) => {
        const before = await parley.request("cpu");
        const r = await load.request("sequentialSends", { spec: { url, contextId, reps: SEQUENTIAL_REPS } });
        const after = await parley.request("cpu");
        sendCpu[side] += (after.usage.user + after.usage.system - before.usage.user - before.usage.system) / 1000;
        sendTimes[side].push(r.medianMs);
      };
      for (let i = 0; i < 3; i++) {
        await sequential("thread-10", "small");
        await sequential("thread-100k", "big");
      }
      const med = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
      scaling.history = {
        fill100kMs: fill.ms,
        read10Ms: read10.storedMs,
        read100kMs: read100k.storedMs,
        cached10Ms: read10.cachedMs,
        cached100kMs: read100k.cachedMs,
        same10Ms: read10.sameMs,
        same100kMs: read100k.sameMs,
        sameMessages: small,
        reads: reps,
        readMessages10: read10.messages,
        readMessages100k: read100k.messages,
        send10Ms: med(sendTimes.small),
        send100kMs: med(sendTimes.big),
        // 3 rounds of SEQUENTIAL_REPS measured sends plus the load generator's 10 warm-up sends each.
        sendCpu10Ms: sendCpu.small / (3 * (SEQUENTIAL_REPS + 10)),
        sendCpu100kMs: sendCpu.big / (3 * (SEQUENTIAL_REPS + 10)),
      };
      process.stderr.write(`  10 000 idle conversations ... [${elapsed()}]\n`);
      const base = await parley.request("gc");
      const made = await parley.request("conversations", { count: 10_000, concurrency: 64 });
      const idle = await parley.request("gc");
      scaling.idle = {
        created: made.created,
        rssGrowth: idle.rss - base.rss,
        heapGrowth: idle.heapUsed - base.heapUsed,
      };
      process.stderr.write(`  store appends ... [${elapsed()}]\n`);
      scaling.appends = {
        concurrent: (await parley.request("storeAppends", { count: 4_000, concurrency: 64 })).perSecond,
        sequential: (await parley.request("storeAppends", { count: 1_000, concurrency: 1 })).perSecond,
      };
    } finally {
      await parley.stop();
    }
  }

  // CPU per send over successive blocks of fresh-context sends on one server, while its store fills.
  async function growth(label, script, env) {
    if (!part("growth")) return;
    process.stderr.write(`  growth: ${label} ... [${elapsed()}]\n`);
    const server = await startServer(script, { env });
    const blocks = [];
    const spec = { protocol: "jsonrpc", op: "send", contexts: "fresh", url: server.info.jsonRpcUrl };
    try {
      await measure(server, {
        id: "growth-warmup",
        spec,
        overrides: { warmupMs: 0, durationMs: 120_000, maxRequests: GROWTH_WARMUP },
      });
      for (let b = 0; b < GROWTH_BLOCKS; b++) {
        const r = await measure(server, {
          id: `growth-${b}`,
          spec,
          overrides: { warmupMs: 0, durationMs: 120_000, maxRequests: GROWTH_BLOCK },
        });
        blocks.push({ requests: r.requests, rps: r.rps, cpuMsPerRequest: r.cpuMsPerRequest });
      }
    } finally {
      await server.stop();
    }
    return blocks;
  }
  if (part("growth"))
    scaling.growth = {
      "Parley bridge, task replies": await growth("Parley bridge, task replies", "servers/parley.mjs", taskReply),
      ...(durableAnchors
        ? {
            "SDK DatabaseTaskStore on SQLite": await growth("SDK on SQLite", "anchors/anchor-db.mjs", {
              ANCHOR_DB: "sqlite",
            }),
          }
        : {}),
    };

  // Flat cost: CPU per fresh-context send on an empty store and on one that holds FLAT_THREADS stored threads.
  if (part("flat")) {
    process.stderr.write(`  flat cost: empty vs ${FLAT_THREADS} stored threads ... [${elapsed()}]\n`);
    // The echo agent's default task reply (8 chunks, 12 events logged per send): the heavier turn, kept as the
    // row was first measured, since this row compares Parley with itself. Two servers, one per side, whose
    // measured blocks alternate: a shared VM's speed drifts over minutes, and blocks run one side after the
    // other charged that drift to the store (the same build gave 1.27-1.29x in full runs and 1.01-1.08x alone).
    const start = () => startServer("servers/parley.mjs", { env: { PARLEY_ECHO_REPLY: "task" } });
    const emptyServer = await start();
    const fullServer = await start().catch(async (error) => {
      await emptyServer.stop();
      throw error;
    });
    const block = async (server, id) => {
      const spec = { protocol: "jsonrpc", op: "send", contexts: "fresh", url: server.info.jsonRpcUrl };
      // A short warm-up block first (JIT, pools; after the fill, the first compactions), not counted.
      await measure(server, { id, spec, overrides: { warmupMs: 0, durationMs: 60_000, maxRequests: FLAT_BLOCK / 4 } });
      const r = await measure(server, {
        id,
        spec,
        overrides: { warmupMs: 0, durationMs: 120_000, maxRequests: FLAT_BLOCK },
      });
      return {
        requests: r.requests,
        cpuMs: r.cpuMsPerRequest * r.requests,
        mainMs: r.mainMsPerRequest * r.requests,
        seconds: r.elapsedMs / 1000,
      };
    };
    /** Per-send figures of blocks taken together. */
    const perSend = (...blocks) => {
      const requests = blocks.reduce((n, b) => n + b.requests, 0);
      const cpuMs = blocks.reduce((n, b) => n + b.cpuMs, 0);
      const mainMs = blocks.reduce((n, b) => n + b.mainMs, 0);
      return {
        requests,
        rps: requests / blocks.reduce((n, b) => n + b.seconds, 0),
        cpuMsPerRequest: cpuMs / requests,
        mainMsPerRequest: mainMs / requests,
        othersMsPerRequest: (cpuMs - mainMs) / requests,
      };
    };
    try {
      const fill = await fullServer.request("fillThreads", { count: FLAT_THREADS, concurrency: 64 });
      // The fill wrote the whole store in one go; LevelDB compacts it in its own threads for a while after,
      // and that CPU would be charged to the sends measured next. A store that grew over time has no such
      // backlog, so the sends wait until the server is idle (under 5% of a core over a second, at most 5 min).
      const settleMs = await settle(fullServer, 300_000);
      // Each side's first block is reported apart and not compared: the empty store's also pays for V8 compiling
      // the send path, and the full store's for the seek compactions the fill left (LevelDB merges a table down
      // once enough reads missed in it; every fresh context's meta read is such a miss, and while level 0 holds
      // no table, as after a fill until the write buffer first fills, the misses are charged to the deeper
      // levels' tables). Then two blocks each, alternating.
      const emptyFirst = await block(emptyServer, "flat-empty");
      const fullFirst = await block(fullServer, "flat-full");
      const empty = [];
      const full = [];
      for (let round = 2; round <= 3; round++) {
        empty.push(await block(emptyServer, `flat-empty-${round}`));
        full.push(await block(fullServer, `flat-full-${round}`));
      }
      scaling.flat = {
        threads: FLAT_THREADS,
        fillMs: fill.ms,
        storeBytes: fill.storeBytes,
        settleMs,
        emptyFirst: perSend(emptyFirst),
        empty: perSend(...empty),
        fullFirst: perSend(fullFirst),
        full: perSend(...full),
      };
    } finally {
      await Promise.all([emptyServer.stop(), fullServer.stop()]);
    }
  }

  /** Waits until the server process uses under 5% of a core over one second; how long that took (ms). */
  async function settle(server, maxMs) {
    const started = performance.now();
    let before = await server.request("cpu");
    while (performance.now() - started < maxMs) {
      await new Promise((r) => setTimeout(r, 1_000));
      const now = await server.request("cpu");
      const usedMs = (now.usage.user + now.usage.system - before.usage.user - before.usage.system) / 1000;
      if (usedMs < 50) break;
      before = now;
    }
    return performance.now() - started;
  }

  async function heldStreams(label, script, env) {
    process.stderr.write(`  ${HELD_STREAMS} open streams: ${label} ... [${elapsed()}]\n`);
    const server = await startServer(script, { env, execArgv: gcArgv });
    try {
      const url = server.info.jsonRpcUrl;
      if (!url) return { skipped: server.info.bridgeError };
      // A few streams first, so lazily built code and pools are not counted as per-stream memory.
      await load.request("openStreams", { spec: { url, count: 20 } });
      await load.request("awaitStreams");
      const base = await server.request("gc");
      const opened = await load.request("openStreams", { spec: { url, count: HELD_STREAMS } });
      const open = await server.request("gc");
      const ended = await load.request("awaitStreams");
      await new Promise((r) => setTimeout(r, 500));
      const after = await server.request("gc");
      return {
        opened: opened.open,
        completed: ended.ok,
        failed: ended.failed,
        rssGrowth: open.rss - base.rss,
        heapGrowth: open.heapUsed - base.heapUsed,
        rssAfter: after.rss - base.rss,
        heapAfter: after.heapUsed - base.heapUsed,
      };
    } finally {
      await server.stop();
    }
  }
  if (part("streams"))
    scaling.streams = {
      parley: await heldStreams("Parley bridge", "servers/parley.mjs", {
        PARLEY_ECHO_DELAY_MS: String(STREAM_DELAY_MS),
      }),
      anchor: await heldStreams("anchor", "servers/anchor.mjs", {
        ANCHOR_REPLY: "stream",
        ANCHOR_DELAY_MS: String(STREAM_DELAY_MS),
      }),
      // The floor: what a Node server that holds the same streams and nothing else grows by.
      bare: await heldStreams("bare node:http", "servers/bare.mjs", { BENCH_BARE_DELAY_MS: String(STREAM_DELAY_MS) }),
    };
}

await load.stop();

const cpuModel =
  /model name\s*:\s*(.*)/.exec(readFileSync("/proc/cpuinfo", "utf8"))?.[1] ?? cpus()[0]?.model ?? "unknown";
const summary = printReport({
  machine: { nproc: cpus().length, cpuModel, node: process.version },
  settings: {
    warmupMs: WARMUP_MS,
    measureMs: MEASURE_MS,
    rounds: ROUNDS,
    concurrency: CONCURRENCY,
    heldStreams: HELD_STREAMS,
    growthWarmup: GROWTH_WARMUP,
    pinned: pin,
  },
  rows: [...best.values()],
  scaling,
  elapsedS: (performance.now() - started) / 1000,
});
// Only a run of every row with the default rounds and phases stands for "the latest run" in the documentation.
const defaultPhases =
  flagValue("rounds") === undefined && flagValue("warmup-ms") === undefined && flagValue("measure-ms") === undefined;
const fullRun = !only && !quick && !scalingOnly && !baseDir && !pin && defaultPhases && !args.has("--no-docs");
if (fullRun) {
  writeBenchDocs(summary);
  process.stdout.write("bench: the table is written into docs/benchmarks.md\n");
}
const unmatched = only ? [...only].filter((name) => !matched.has(name)) : [];
if (unmatched.length > 0) {
  process.stderr.write(
    `bench: --only named ${unmatched.map((n) => JSON.stringify(n)).join(", ")}, which matched no row or scaling part; ` +
      `${rowIds.size > 0 ? `the rows are ${[...rowIds].join(", ")}` : "no table row ran (--scaling)"}; ` +
      "the scaling parts are history, growth, flat, streams (not with --no-scaling)\n",
  );
  process.exit(2);
}
