// The table of bench/run.mjs: every row in each round, each group of rows on a freshly started server, the round
// with the most requests/s kept per row.
import { taskReply } from "./run-settings.mjs";

const sc = (id, target, protocol, op, contexts, anchor) => ({ id, target, anchor, spec: { protocol, op, contexts } });

/**
 * Runs the table's rounds and returns each row's best measurement, in first-measured order. Marks in `matched`
 * the --only names that named a row or a group, and adds every row id to `rowIds`.
 */
export async function runTable({ settings, durableAnchors, startServer, measure, elapsed, matched, rowIds }) {
  const { only, baseDir, rounds } = settings;
  /** The best measurement of each row so far (most requests/s), by row id, in first-measured order. */
  const best = new Map();
  function keep(row) {
    const earlier = best.get(row.id);
    if (!earlier || earlier.skipped || (!row.skipped && row.rps > earlier.rps)) best.set(row.id, row);
  }
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
        process.stderr.write(
          ` ${r.rps.toFixed(0)} req/s${r.errors ? `, ${r.errors} errors (${r.sampleError})` : ""}\n`,
        );
        keep(r);
      }
    } finally {
      await server.stop();
    }
  }

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
  const parleyExecArgv = settings.profile ? ["--cpu-prof", "--cpu-prof-dir=bench/profiles"] : [];

  for (let round = 1; round <= rounds && !settings.scalingOnly; round++) {
    process.stderr.write(`throughput and latency, round ${round} of ${rounds}: [${elapsed()}]\n`);
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
    // The same gRPC and Connect calls served by connect-node alone, its ratios against Parley's own routes: what the
    // routes (@parley/serving's grpc-route.ts and connect-route.ts) still save.
    groups.push(() =>
      parleyGroup(round, "parley-connect-node", { env: { BENCH_PARLEY_RPC_ROUTES: "off" }, execArgv: parleyExecArgv }, [
        sc("grpc-send-node", "Parley gRPC, connect-node", "grpc", "send", "fresh", "grpc-send"),
        sc("grpc-stream-node", "Parley gRPC, connect-node", "grpc", "stream", "fresh", "grpc-stream"),
        sc("connect-send-node", "Parley Connect (h2), connect-node", "connect", "send", "fresh", "connect-send"),
        sc("connect-stream-node", "Parley Connect (h2), connect-node", "connect", "stream", "fresh", "connect-stream"),
      ]),
    );
    for (const measureGroup of round % 2 === 0 ? groups.reverse() : groups) await measureGroup();
  }
  return [...best.values()];
}
