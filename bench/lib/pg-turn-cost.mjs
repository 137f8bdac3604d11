// What one turn costs in PostgreSQL mode, counted rather than timed: statements, parameter bytes, bytes on the
// wire each way and replica CPU per send, for N sends in one process (bridge over loopback HTTP, as
// bench/turn-cost.mjs does for LevelDB), plus the CPU the database's processes spent.
//
//   node bench/lib/pg-turn-cost.mjs [--root=DIR] [--sends=N] [--warm=N] [--reply=auto|task|message] [--reuse]
//                                   [--inflight=N]
//
// Under `valgrind --tool=callgrind --instr-atstart=no` with BENCH_TURN_COST_CALLGRIND=1 the "Collected" count over
// --sends is the replica's instructions per send (the database runs outside valgrind). --root measures another
// checkout's build with the same script. The counting wrapper lives here, never in shipped code.
import { createRequire } from "node:module";
import { join, resolve } from "node:path";
import { loaderOf, parseFlags, startSendingParley } from "./embedded.mjs";
import { createBenchDatabase } from "./pg-database.mjs";

const args = parseFlags(process.argv.slice(2));
const root = resolve(args.root ?? new URL("../..", import.meta.url).pathname);
const sends = Number(args.sends ?? 2000);
const warm = Number(args.warm ?? 200);
const reply = args.reply ?? "task";
const reuse = args.reuse === "true";
const inflight = Number(args.inflight ?? 1);
// --store=leveldb runs the same sends on the embedded store: the difference is what the PostgreSQL path costs.
const onPg = (args.store ?? "postgres") === "postgres";

const load = loaderOf(root);
const require = createRequire(join(root, "packages/store/package.json"));
const pg = require("pg");

const counts = { statements: 0, paramBytes: 0, params: 0 };
const byName = new Map();
const sockets = new Set();
let counting = false;
const query = pg.Client.prototype.query;
pg.Client.prototype.query = function (config, values, callback) {
  if (counting) {
    counts.statements++;
    const text = typeof config === "string" ? config : (config?.name ?? config?.text ?? "?");
    const label = text.replace(/\s+/g, " ").slice(0, 60);
    byName.set(label, (byName.get(label) ?? 0) + 1);
    const vals = Array.isArray(values) ? values : config?.values;
    for (const v of vals ?? []) {
      counts.params++;
      if (Buffer.isBuffer(v) || v instanceof Uint8Array) counts.paramBytes += v.byteLength;
      else if (v !== null && v !== undefined) counts.paramBytes += String(v).length;
    }
  }
  const socket = this.connection?.stream;
  if (socket) sockets.add(socket);
  return query.call(this, config, values, callback);
};
const wire = () => {
  let read = 0;
  let written = 0;
  for (const s of sockets) {
    read += s.bytesRead;
    written += s.bytesWritten;
  }
  return { read, written };
};

const database = onPg ? await createBenchDatabase("parley_turn_cost", { synchronousCommit: "off" }) : undefined;
const { send, close } = await startSendingParley(load, {
  reply,
  reuse,
  sockets: inflight,
  env: {
    ...(database ? { PARLEY_STORE_URL: database.url } : {}),
    // No sweep and no renewal among the counted statements: those are not the turn's.
    PARLEY_SWEEP_MS: "3600000",
    PARLEY_LEASE_TTL_MS: "3600000",
  },
});
const run = async (n) => {
  let next = 0;
  await Promise.all(
    Array.from({ length: reuse ? 1 : inflight }, async () => {
      while (next < n) {
        next++;
        await send();
      }
    }),
  );
};

const callgrind = async (onOff) => {
  if (process.env.BENCH_TURN_COST_CALLGRIND !== "1") return;
  const { execFile } = await import("node:child_process");
  await new Promise((done, fail) =>
    execFile("callgrind_control", ["-i", onOff, String(process.pid)], (error) => (error ? fail(error) : done())),
  );
};
const settle = () => new Promise((r) => setTimeout(r, 100));
await run(warm);
await settle();
await callgrind("on");
const wire0 = wire();
await database?.meter.mark();
counting = true;
const cpu0 = process.cpuUsage();
await run(sends);
const cpu = process.cpuUsage(cpu0);
// The last turn's event-log flush and lease release land after its reply.
await settle();
counting = false;
const dbMs = (await database?.meter.read()) ?? 0;
await callgrind("off");
const wire1 = wire();
const per = (n) => (n / sends).toFixed(2);
console.log(
  JSON.stringify({
    root,
    store: onPg ? "postgres" : "leveldb",
    reply,
    reuse,
    inflight,
    sends,
    statementsPerSend: per(counts.statements),
    paramsPerSend: per(counts.params),
    paramBytesPerSend: per(counts.paramBytes),
    wireWrittenPerSend: per(wire1.written - wire0.written),
    wireReadPerSend: per(wire1.read - wire0.read),
    replicaCpuUsPerSend: ((cpu.user + cpu.system) / sends).toFixed(0),
    replicaSysUsPerSend: (cpu.system / sends).toFixed(0),
    dbCpuUsPerSend: ((dbMs * 1000) / sends).toFixed(0),
    statements: Object.fromEntries([...byName].map(([k, v]) => [k, per(v)])),
  }),
);
await close();
await database?.drop();
process.exit(0);
