// What one turn costs, counted rather than timed: LevelDB batches, records and bytes per send (in all and by table),
// and (under callgrind) instructions per send, for N sequential sends in one process.
//
//   node bench/turn-cost.mjs [--root=DIR] [--sends=N] [--warm=N] [--reply=auto|task|message]
//                            [--path=bridge|inproc|grpc|connect] [--stream] [--reuse] [--blocks=K] [--chunks=N]
//
// Measured: `BENCH_TURN_COST_CALLGRIND=1 valgrind --tool=callgrind --instr-atstart=no node bench/turn-cost.mjs ...`
// (the "Collected" count over --sends is instructions per send, LevelDB's threads included).
// --root runs another checkout's built packages (its dist/ and node_modules), so two builds are compared with
// the same script. --path=bridge posts JSON-RPC to the embedded bridge over loopback HTTP (client and server in
// this process); inproc calls the A2A service through the in-process transport; grpc and connect call Parley's
// port with connect-node's gRPC or Connect client over one HTTP/2 connection (the client in this process too).
// --reuse sends every message to one context. --chunks sets the echo agent's artifact chunks per task reply
// (PARLEY_ECHO_CHUNKS; default 8). The counts cover the measured sends only (after --warm sends).
import { createRequire } from "node:module";
import { join, resolve } from "node:path";
import { loaderOf, parseFlags, pathFlag, startSendingParley } from "./lib/embedded.mjs";

const args = parseFlags(process.argv.slice(2));
const root = resolve(args.root ?? new URL("..", import.meta.url).pathname);
const sends = Number(args.sends ?? 2000);
const warm = Number(args.warm ?? 200);
const reply = args.reply ?? "auto";
const path = pathFlag("turn-cost", args.path);
const streaming = args.stream === "true";
const reuse = args.reuse === "true";

const load = loaderOf(root);
const require = createRequire(join(root, "package.json"));
const { ClassicLevel } = require("classic-level");

const counts = { batches: 0, reads: 0 };
// Puts, deletes and bytes per table (the totals are their sums): the letter after "parley:v1:" names the table
// (packages/store/src/level/level-keys.ts).
const byTable = {};
const tableOf = (k) => (k.length > 10 ? String.fromCharCode(k[10]) : "?");
let counting = false;
const batch = ClassicLevel.prototype.batch;
ClassicLevel.prototype.batch = function (ops, ...rest) {
  if (counting && Array.isArray(ops)) {
    counts.batches++;
    for (const op of ops) {
      const table = tableOf(op.key);
      byTable[table] ??= { puts: 0, dels: 0, bytes: 0 };
      const t = byTable[table];
      if (op.type === "put") {
        t.puts++;
        t.bytes += op.key.length + op.value.length;
      } else {
        t.dels++;
        t.bytes += op.key.length;
      }
    }
  }
  return batch.call(this, ops, ...rest);
};
const getSync = ClassicLevel.prototype.getSync;
if (getSync) {
  ClassicLevel.prototype.getSync = function (...a) {
    if (counting) counts.reads++;
    return getSync.apply(this, a);
  };
}
const get = ClassicLevel.prototype.get;
ClassicLevel.prototype.get = function (...a) {
  if (counting) counts.reads++;
  return get.apply(this, a);
};

const { send, close } = await startSendingParley(load, { path, reply, streaming, reuse, chunks: args.chunks });

// Under `valgrind --tool=callgrind --instr-atstart=no`, BENCH_TURN_COST_CALLGRIND=1 switches instrumentation on for the
// measured sends only, so the instruction count is theirs (startup and warm-up run uninstrumented, and fast).
const callgrind = async (onOff) => {
  if (process.env.BENCH_TURN_COST_CALLGRIND !== "1") return;
  const { execFile } = await import("node:child_process");
  await new Promise((done, fail) =>
    execFile("callgrind_control", ["-i", onOff, String(process.pid)], (error) => (error ? fail(error) : done())),
  );
};
for (let i = 0; i < warm; i++) await send();
await callgrind("on");
counting = true;
const cpu0 = process.cpuUsage();
// --blocks=K splits the measured sends into K blocks and prints each block's CPU per send as the store fills.
const blocks = Number(args.blocks ?? 1);
const growth = [];
for (let b = 0; b < blocks; b++) {
  const start = process.cpuUsage();
  const n = Math.floor(sends / blocks);
  for (let i = 0; i < n; i++) await send();
  const used = process.cpuUsage(start);
  growth.push(Math.round((used.user + used.system) / n));
}
const cpu = process.cpuUsage(cpu0);
counting = false;
await callgrind("off");
// Let the last turn's event-log flush land before the figures are read.
await new Promise((r) => setTimeout(r, 50));
const per = (n) => (n / sends).toFixed(2);
const tables = Object.values(byTable);
const total = (field) => tables.reduce((sum, t) => sum + t[field], 0);
console.log(
  JSON.stringify({
    root,
    path,
    reply,
    streaming,
    reuse,
    sends,
    batchesPerSend: per(counts.batches),
    recordsPerSend: per(total("puts") + total("dels")),
    putsPerSend: per(total("puts")),
    delsPerSend: per(total("dels")),
    bytesPerSend: per(total("bytes")),
    readsPerSend: per(counts.reads),
    cpuUsPerSend: ((cpu.user + cpu.system) / sends).toFixed(0),
    ...(blocks > 1 ? { cpuUsPerSendByBlock: growth } : {}),
    // Per send, by table: "puts/dels bytes".
    byTable: Object.fromEntries(
      Object.entries(byTable)
        .sort(([a], [b]) => (a < b ? -1 : 1))
        .map(([t, c]) => [t, `${per(c.puts)}/${per(c.dels)} ${per(c.bytes)}`]),
    ),
  }),
);
await close();
process.exit(0);
