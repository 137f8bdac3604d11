// What one turn allocates on the JavaScript heap, counted rather than timed: bytes per send in all, by source file
// and by allocating function, from V8's sampling heap profiler with the objects that scavenges and mark-compacts
// collected kept in the profile (so short-lived garbage counts, which is what a send's GC cost follows).
//
//   node bench/alloc-cost.mjs [--root=DIR] [--sends=N] [--warm=N] [--reply=auto|task|message]
//                             [--path=bridge|inproc|grpc|connect] [--stream] [--reuse] [--chunks=N]
//                             [--interval=BYTES] [--top=N] [--survivors]
//
// The flags are turn-cost.mjs's (bench/lib/embedded.mjs makes the same Parley and sends). With --path=bridge the
// JSON-RPC client runs in this process too, so node's HTTP client and this script's own frames are in the figures;
// --path=inproc leaves HTTP out; grpc and connect run connect-node's client in this process over HTTP/2.
// --interval is the profiler's mean sampling step (default 256 bytes): a sample stands for about that many bytes,
// so figures below a few hundred bytes per send are noise. --root measures another checkout's build with the same
// script, so two builds compare send for send. --survivors counts only what outlived a scavenge (the objects minor
// GCs collected are left out): what a send promotes to the old generation, which mark-compacts then pay for.
import { Session } from "node:inspector/promises";
import { relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { countFlag, loaderOf, parseFlags, pathFlag, startSendingParley } from "./lib/embedded.mjs";

const args = parseFlags(process.argv.slice(2));
const root = resolve(args.root ?? new URL("..", import.meta.url).pathname);
const sends = countFlag("alloc-cost", "sends", args.sends, 2_000);
const warm = countFlag("alloc-cost", "warm", args.warm, 3_000);
const interval = countFlag("alloc-cost", "interval", args.interval, 256);
const top = countFlag("alloc-cost", "top", args.top, 25);
const path = pathFlag("alloc-cost", args.path);
const reply = args.reply ?? "auto";
const streaming = args.stream === "true";
const survivors = args.survivors === "true";

const { send, close } = await startSendingParley(loaderOf(root), {
  path,
  reply,
  streaming,
  reuse: args.reuse === "true",
  chunks: args.chunks,
});
// Warm-up first: code compiled, caches and pools filled, so the profile holds a steady send's garbage.
for (let i = 0; i < warm; i++) await send();

const session = new Session();
session.connect();
await session.post("HeapProfiler.startSampling", {
  samplingInterval: interval,
  includeObjectsCollectedByMajorGC: true,
  includeObjectsCollectedByMinorGC: !survivors,
});
for (let i = 0; i < sends; i++) await send();
const { profile } = await session.post("HeapProfiler.stopSampling");
session.disconnect();

/** A frame's source as a short name: the checkout's own files relative to it, packages by name, node's modules. */
function sourceOf(url) {
  if (url === "") return "(native)";
  const file = url.startsWith("file:") ? fileURLToPath(url) : url;
  const dep = /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(file);
  if (dep) return `dep:${dep[1]}`;
  return file.startsWith(root) ? relative(root, file).replace("/dist/", "/") : file;
}
const byFile = new Map();
const byFunction = new Map();
let total = 0;
const add = (map, k, bytes) => map.set(k, (map.get(k) ?? 0) + bytes);
const walk = (node) => {
  const { functionName, url, lineNumber } = node.callFrame;
  total += node.selfSize;
  const source = sourceOf(url);
  add(byFile, source, node.selfSize);
  add(byFunction, `${functionName || "(anonymous)"} ${source}:${lineNumber + 1}`, node.selfSize);
  for (const child of node.children) walk(child);
};
walk(profile.head);
const perSend = (map) =>
  Object.fromEntries(
    [...map]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([k, bytes]) => [k, Math.round(bytes / sends)]),
  );
console.log(
  JSON.stringify(
    {
      root,
      path,
      reply,
      streaming,
      sends,
      ...(survivors ? { counted: "survivors of a scavenge" } : {}),
      bytesPerSend: Math.round(total / sends),
      byFile: perSend(byFile),
      byFunction: perSend(byFunction),
    },
    null,
    1,
  ),
);
await close();
process.exit(0);
