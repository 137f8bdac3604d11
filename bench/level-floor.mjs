// The floor of Parley's LevelDB write path: what bare classic-level (no Parley code) costs per turn for a turn's
// record mix, written as Parley's group commit writes it: the records of --group turns merged into one batch, two
// batches per group (every turn's inbound records, then every turn's reply records), each `await db.batch(ops)`
// without an options object, on a fresh store in a temp dir, keys and values as Uint8Array.
//
//   node bench/level-floor.mjs [--turns=N] [--warm=N] [--group=N] [--rounds=N] [--only=today,messages-only]
//
// Layouts (rows): today = a Message reply on a new thread as Parley writes it now (inbound m t l u i r; reply m t,
// del r); no-turn-marker = today without the turn-in-flight entry (inbound m t l u i; reply m t); no-reply-meta =
// inbound m t l u i; reply m; messages-only = inbound m i; reply m. th, tk and the message id's hash digest a
// per-turn counter; the l: key's tenant hash is one digest (one tenant) for every turn.
// cpuUsPerTurn: process CPU over the --turns measured turns (after --warm turns), building the ops included, plus a
// 500 ms settle after the last batch so LevelDB's compaction thread is counted; levelUsPerTurn subtracts the CPU of
// building as many turns' ops without writing them. Each round runs every layout on its own fresh store, in
// alternating order; the table gives medians over --rounds, then one JSON line has every figure.
import { hash, randomFillSync } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { countFlag, parseFlags } from "./lib/embedded.mjs";

const LAYOUTS = ["today", "no-turn-marker", "no-reply-meta", "messages-only"];
const FLAGS = ["turns", "warm", "group", "rounds", "only"];
const refuse = (message) => {
  process.stderr.write(`level-floor: ${message}\n`);
  process.exit(2);
};
// Every flag is checked before any work, so a mistyped one stops the run.
for (const arg of process.argv.slice(2)) {
  const name = /^--([^=]+)=/.exec(arg)?.[1];
  if (!FLAGS.includes(name))
    refuse(`unknown flag ${JSON.stringify(arg)}; the flags are --${FLAGS.join("=..., --")}=...`);
}
const args = parseFlags(process.argv.slice(2));
const count = (name, fallback, min) => countFlag("level-floor", name, args[name], fallback, min);
const TURNS = count("turns", 40_000);
const WARM = count("warm", 5_000, 0);
const GROUP = count("group", 24);
const ROUNDS = count("rounds", 3);
const only = args.only === undefined ? LAYOUTS : [...new Set(args.only.split(","))];
for (const name of only)
  if (!LAYOUTS.includes(name)) refuse(`--only names ${JSON.stringify(name)}; the layouts are ${LAYOUTS.join(", ")}`);

const require = createRequire(new URL("../package.json", import.meta.url));
const { ClassicLevel } = require("classic-level");

const utf8 = new TextEncoder();
const table = (name) => utf8.encode(`parley:v1:${name}:`);
const [M, T, L, U, I, R] = ["m", "t", "l", "u", "i", "r"].map(table);
const EMPTY = new Uint8Array(0);
function key(...parts) {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}
/** u64 big-endian, as Parley's core/bytes.ts writes it. */
function u64(value) {
  const out = new Uint8Array(8);
  const view = new DataView(out.buffer);
  view.setUint32(0, Math.floor(value / 0x1_0000_0000));
  view.setUint32(4, value >>> 0);
  return out;
}
const digest = (tag, n) => hash("sha256", `${tag}:${n}`, "buffer");
// Values are fresh copies of consecutive slices of 1 MiB of random bytes (randomFillSync per value costs ~4 us,
// which would swamp the build-CPU subtraction); incompressible like fresh random bytes, within any LevelDB block.
const POOL = randomFillSync(new Uint8Array(1 << 20));
let poolAt = 0;
function random(size) {
  if (poolAt + size > POOL.length) poolAt = 0;
  poolAt += size;
  return POOL.slice(poolAt - size, poolAt);
}
const put = (k, value) => ({ type: "put", key: k, value });
const TENANT = digest("tenant", 0);

// One record each; a layout is a turn's inbound records, then (after the inbound batch) its reply records.
const records = {
  m1: (t) => put(key(M, t.th, u64(1)), random(235)),
  t: (t) => put(key(T, t.th), random(96)),
  l: (t) => put(key(L, TENANT, u64(Number.MAX_SAFE_INTEGER - t.now), t.th), EMPTY),
  u: (t) => put(key(U, u64(t.now), t.th), EMPTY),
  i: (t) => put(key(I, t.th, digest("mid", t.n)), random(40)),
  r: (t) => put(key(R, t.tk), random(108)),
  m2: (t) => put(key(M, t.th, u64(2)), random(426)),
  delR: (t) => ({ type: "del", key: key(R, t.tk) }),
};
const layoutOf = (inbound, reply) => ({ inbound: inbound.map((r) => records[r]), reply: reply.map((r) => records[r]) });
const layouts = {
  today: layoutOf(["m1", "t", "l", "u", "i", "r"], ["m2", "t", "delR"]),
  "no-turn-marker": layoutOf(["m1", "t", "l", "u", "i"], ["m2", "t"]),
  "no-reply-meta": layoutOf(["m1", "t", "l", "u", "i"], ["m2"]),
  "messages-only": layoutOf(["m1", "i"], ["m2"]),
};
// A layout's turns hash a tk only if it writes an r record.
for (const layout of Object.values(layouts)) layout.task = layout.inbound.includes(records.r);
const turnOf = (layout, n) => ({ n, th: digest("th", n), tk: layout.task && digest("tk", n), now: Date.now() });

/**
 * Turns `from`..`from + count - 1` in groups of GROUP: one batch of the group's inbound records, then one of its
 * replies. Without `db` the same ops are built and dropped (the build CPU that levelUsPerTurn leaves out).
 */
async function turns(db, layout, from, count) {
  for (let g = 0; g < count; g += GROUP) {
    const group = [];
    const inbound = [];
    for (let n = from + g; n < from + Math.min(g + GROUP, count); n++) {
      const t = turnOf(layout, n);
      group.push(t);
      for (const record of layout.inbound) inbound.push(record(t));
    }
    if (db) await db.batch(inbound);
    const replies = [];
    for (const t of group) for (const record of layout.reply) replies.push(record(t));
    if (db) await db.batch(replies);
  }
}
/** Process CPU (all threads) since `since`, in microseconds. */
const cpuUs = (since) => Object.values(process.cpuUsage(since)).reduce((a, b) => a + b);

const base = mkdtempSync(join(tmpdir(), "parley-level-floor-"));
async function run(name, round) {
  const layout = layouts[name];
  const dir = join(base, `${name}-${round}`);
  const db = new ClassicLevel(dir, { keyEncoding: "view", valueEncoding: "view" });
  await db.open();
  await turns(db, layout, 0, WARM);
  const cpu0 = process.cpuUsage();
  const wall0 = performance.now();
  await turns(db, layout, WARM, TURNS);
  const wallMs = performance.now() - wall0;
  await new Promise((r) => setTimeout(r, 500));
  const cpu = cpuUs(cpu0) / TURNS;
  await db.close();
  rmSync(dir, { recursive: true, force: true });
  await turns(null, layout, 0, WARM);
  const build0 = process.cpuUsage();
  await turns(null, layout, WARM, TURNS);
  const build = cpuUs(build0) / TURNS;
  const [cpuUsPerTurn, buildUsPerTurn, levelUsPerTurn] = [cpu, build, cpu - build].map((x) => Math.round(x * 10) / 10);
  return { layout: name, round, cpuUsPerTurn, buildUsPerTurn, levelUsPerTurn, wallMs: Math.round(wallMs) };
}

const runs = [];
try {
  for (let round = 0; round < ROUNDS; round++) {
    const order = round % 2 === 0 ? only : [...only].reverse();
    for (const name of order) runs.push(await run(name, round));
  }
} finally {
  rmSync(base, { recursive: true, force: true });
}

const rows = only.map((name) => {
  const s = runs.filter((r) => r.layout === name).map((r) => r.levelUsPerTurn);
  s.sort((a, b) => a - b);
  const median = s.length % 2 ? s[s.length >> 1] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
  // Records and bytes (keys + values) of one turn.
  const t = turnOf(layouts[name], 0);
  const ops = [...layouts[name].inbound, ...layouts[name].reply].map((record) => record(t));
  const bytes = ops.reduce((n, op) => n + op.key.length + (op.value?.length ?? 0), 0);
  return { name, records: ops.length, bytes, median, min: s[0], max: s[s.length - 1] };
});
const today = rows.find((r) => r.name === "today");
console.log(`${TURNS} turns after ${WARM} warm-up, ${GROUP} turns per group, ${ROUNDS} round(s)\n`);
console.log("| layout | records/turn | bytes/turn | level us/turn (median) | min-max | vs today |");
console.log("|---|--:|--:|--:|--:|--:|");
for (const r of rows) {
  const ratio = today ? (r.median / today.median).toFixed(2) : "-";
  const range = `${r.min.toFixed(1)}-${r.max.toFixed(1)}`;
  console.log(`| ${r.name} | ${r.records} | ${r.bytes} | ${r.median.toFixed(1)} | ${range} | ${ratio} |`);
}
console.log(JSON.stringify({ turns: TURNS, warm: WARM, group: GROUP, rounds: ROUNDS, rows, runs }));
