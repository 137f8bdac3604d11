// What 1 000 open SSE streams hold in the embedded bridge's process, in detail: memory deltas (rss, heap, external,
// array buffers) after GC with the streams open and after they ended, and with --snapshot=DIR heap snapshots of
// both states plus a table of the retained objects per stream by constructor (the "streams" scaling part of
// bench/run.mjs measures the same thing against the anchor, without the breakdown).
//
//   node --expose-gc bench/held-streams.mjs [--root=DIR] [--count=1000] [--delay=700] [--chunks=8] [--snapshot=DIR]
//
// --delay is the echo agent's pause before each of its --chunks artifact chunks; a stream's first event (its task)
// comes at once, its first chunk after --delay. A delay longer than the opening and the snapshots take (--delay=12000 --chunks=2) holds every
// stream at the same event, so the per-stream bytes of two builds compare (--root=DIR measures another checkout).
//
// The server runs in this process; the clients run in a child process, so their memory is not counted.
import { fork } from "node:child_process";
import { mkdirSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import v8 from "node:v8";
import { loaderOf, parseFlags, startBenchParley } from "./lib/embedded.mjs";
import { openSseStreams } from "./lib/held-sse.mjs";

const args = parseFlags(process.argv.slice(2));
const root = resolve(args.root ?? new URL("..", import.meta.url).pathname);
const count = Number(args.count ?? 1000);
const delay = Number(args.delay ?? 700);
// Made up front: a missing --snapshot directory failed the run only after the streams were opened.
if (args.snapshot !== undefined && args.client !== "true") mkdirSync(args.snapshot, { recursive: true });

if (args.client === "true") {
  // The client side: opens streams on request and reports when every one has its first event.
  const { randomUUID } = await import("node:crypto");
  let held;
  process.on("message", async ({ type, url, n }) => {
    if (type === "open") {
      held = openSseStreams(url, n, () => {
        const message = { messageId: randomUUID(), role: "ROLE_USER", parts: [{ text: "x".repeat(100) }] };
        return JSON.stringify({ jsonrpc: "2.0", id: 1, method: "SendStreamingMessage", params: { message } });
      });
      await held.firstEvents;
      process.send({ type: "open" });
    } else if (type === "await") {
      process.send({ type: "ended", ok: (await held.ended()).ok });
    }
  });
} else {
  const load = loaderOf(root);
  const { createBridge, createBridgeLogger } = await load("apps/bridge/dist/index.js");
  const { parley, address, close } = await startBenchParley(load, {
    PARLEY_ECHO_REPLY: "auto",
    PARLEY_ECHO_DELAY_MS: String(delay),
    ...(args.chunks !== undefined ? { PARLEY_ECHO_CHUNKS: String(args.chunks) } : {}),
  });
  const bridge = await createBridge({
    upstream: parley.inProcessTransport(),
    cards: parley,
    host: "127.0.0.1",
    port: 0,
    grpcAddress: address,
    logger: createBridgeLogger("warn"),
  });
  const url = `http://127.0.0.1:${bridge.server.address().port}/`;
  // --path=inproc holds the streams through the in-process transport (no HTTP, no bridge): the server's share.
  const client =
    args.path === "inproc"
      ? await inProcessClient(parley, load)
      : fork(new URL(import.meta.url).pathname, ["--client"]);
  const ask = (msg) =>
    new Promise((done) => {
      client.once("message", done);
      client.send(msg);
    });
  const gc = async () => {
    for (let i = 0; i < 3; i++) {
      globalThis.gc?.();
      await new Promise((r) => setTimeout(r, 50));
    }
    const m = { ...process.memoryUsage(), ...mappings() };
    for (const space of v8.getHeapSpaceStatistics()) m[space.space_name] = space.space_size;
    return m;
  };
  const snap = (name) =>
    args.snapshot ? v8.writeHeapSnapshot(join(args.snapshot, `${name}.heapsnapshot`)) : undefined;
  // A few streams first, so lazily built code and pools are not counted as per-stream memory.
  await ask({ type: "open", url, n: 20 });
  await ask({ type: "await" });
  const base = await gc();
  const opening = performance.now();
  const baseSnap = snap("base");
  await ask({ type: "open", url, n: count });
  const openingMs = Math.round(performance.now() - opening);
  const t0 = performance.now();
  const open = await gc();
  const openMs = Math.round(performance.now() - t0);
  await new Promise((r) => setTimeout(r, Number(args.settle ?? 1000)));
  const settled = await gc();
  const openSnap = snap("open");
  const ended = await ask({ type: "await" });
  await new Promise((r) => setTimeout(r, 500));
  const after = await gc();
  const mb = (a, b, k) => +((a[k] - b[k]) / 1e6).toFixed(1);
  const delta = (m) => ({
    rss: mb(m, base, "rss"),
    heapUsed: mb(m, base, "heapUsed"),
    heapTotal: mb(m, base, "heapTotal"),
    external: mb(m, base, "external"),
    arrayBuffers: mb(m, base, "arrayBuffers"),
    newSpace: mb(m, base, "new_space"),
    brk: mb(m, base, "brk"),
    anonSmall: mb(m, base, "anonSmall"),
    anonLarge: mb(m, base, "anonLarge"),
    oldSpace: mb(m, base, "old_space"),
  });
  console.log(
    JSON.stringify({
      root,
      count,
      openingMs,
      completed: ended.ok,
      openMs,
      open: delta(open),
      settled: delta(settled),
      after: delta(after),
    }),
  );
  if (baseSnap && openSnap) printRetained(baseSnap, openSnap, count);
  client.kill();
  await bridge.close();
  await close();
  process.exit(0);
}

/** The same requests as the HTTP client's, through the in-process transport; reads each stream to its end. */
async function inProcessClient(parley, load) {
  const { EventEmitter } = await import("node:events");
  const { randomUUID } = await import("node:crypto");
  const { createClient } = await import(
    pathToFileURL(join(root, "node_modules/@connectrpc/connect/dist/esm/index.js")).href
  );
  const { A2AService } = await load("proto/dist/index.js");
  const a2a = createClient(A2AService, parley.inProcessTransport());
  const client = new EventEmitter();
  let ends = [];
  client.send = async ({ type, n }) => {
    if (type === "open") {
      const firsts = [];
      ends = Array.from({ length: n }, () => {
        let seen;
        firsts.push(new Promise((r) => (seen = r)));
        return (async () => {
          const message = {
            messageId: randomUUID(),
            role: 1,
            parts: [{ content: { case: "text", value: "x".repeat(100) } }],
          };
          let first = true;
          for await (const _ of a2a.sendStreamingMessage({ message }, { headers: { "a2a-version": "1.0" } })) {
            if (first) seen();
            first = false;
          }
          return true;
        })().catch(() => false);
      });
      await Promise.all(firsts);
      client.emit("message", { type: "open" });
    } else {
      const results = await Promise.all(ends);
      ends = [];
      client.emit("message", { type: "ended", ok: results.filter(Boolean).length });
    }
  };
  client.kill = () => {};
  return client;
}

/**
 * Resident bytes by kind of mapping: the brk heap (the main thread's malloc arena), anonymous mappings up to
 * 1 MiB (V8's pages, large mallocs) and larger ones (glibc's thread arenas of 64 MiB, V8's reservations).
 */
function mappings() {
  const out = { brk: 0, anonSmall: 0, anonLarge: 0 };
  let kind;
  for (const line of readFileSync("/proc/self/smaps", "utf8").split("\n")) {
    const head = /^([0-9a-f]+)-([0-9a-f]+) \S+ \S+ \S+ \S+\s*(.*)$/.exec(line);
    if (head) {
      const size = Number.parseInt(head[2], 16) - Number.parseInt(head[1], 16);
      const name = head[3];
      kind = name === "[heap]" ? "brk" : name === "" ? (size <= 1 << 20 ? "anonSmall" : "anonLarge") : undefined;
    } else if (kind && line.startsWith("Rss:")) out[kind] += Number(line.split(/\s+/)[1]) * 1024;
  }
  return out;
}

/** Objects (by type and constructor) more numerous with the streams open, with their self size per stream. */
function printRetained(baseFile, openFile, n) {
  const tally = (file) => {
    const snapshot = JSON.parse(readFileSync(file, "utf8"));
    const {
      node_fields: fields,
      node_types: [types],
    } = snapshot.snapshot.meta;
    const width = fields.length;
    const [typeAt, nameAt, sizeAt] = ["type", "name", "self_size"].map((f) => fields.indexOf(f));
    const byKey = new Map();
    const { nodes, strings } = snapshot;
    for (let i = 0; i < nodes.length; i += width) {
      const type = types[nodes[i + typeAt]];
      const name =
        type === "string" || type === "concatenated string" || type === "sliced string"
          ? ""
          : strings[nodes[i + nameAt]];
      const key = `${type} ${name.slice(0, 60)}`;
      const entry = byKey.get(key) ?? { count: 0, size: 0 };
      entry.count++;
      entry.size += nodes[i + sizeAt];
      byKey.set(key, entry);
    }
    return byKey;
  };
  const before = tally(baseFile);
  const opened = tally(openFile);
  const rows = [];
  for (const [key, o] of opened) {
    const b = before.get(key) ?? { count: 0, size: 0 };
    if (o.size - b.size > 0) rows.push({ key, perStream: (o.count - b.count) / n, bytes: (o.size - b.size) / n });
  }
  rows.sort((x, y) => y.bytes - x.bytes);
  const total = rows.reduce((s, r) => s + r.bytes, 0);
  console.log(`retained per open stream (self sizes): ${Math.round(total)} bytes`);
  for (const r of rows.slice(0, Number(args.top ?? 60)))
    console.log(`${r.bytes.toFixed(0).padStart(7)} B  ${r.perStream.toFixed(2).padStart(6)} x  ${r.key}`);
}
