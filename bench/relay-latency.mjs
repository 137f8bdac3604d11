// How live a stream stays across a chain of a2a hops: separate Parley processes (the parley-bridge binary,
// embedded), the last one with an openai agent on a fake OpenAI-compatible model on loopback that streams --chunks
// chunks --interval-ms apart; the one before it forwards to it with an a2a agent, and so on. For a chain of 1, 2
// and 3 hops the caller sends SendStreamingMessage over JSON-RPC to the first server and this script measures, from
// the model's first chunk, when the caller received its first and its last chunk, how many chunk events and events
// it received in all, and when its first event (the task) came after the send.
//
//   node bench/relay-latency.mjs [--chunks=48] [--interval-ms=20] [--delay-ms=200] [--runs=5] [--peer=jsonrpc|grpc]
//                                [--root=DIR]
//
// Each figure is the median over --runs sends (after one warm-up send per chain). Loopback only; the run is bounded
// by its sends (3 x (runs + 1)) and ends by itself. After npm run build.
import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { countFlag, parseFlags } from "./lib/embedded.mjs";
import { startFakeModel } from "./lib/fake-model.mjs";

const tool = "relay-latency";
const args = parseFlags(process.argv.slice(2));
const known = new Set(["chunks", "interval-ms", "delay-ms", "runs", "peer", "root"]);
for (const key of Object.keys(args)) {
  if (!known.has(key)) {
    process.stderr.write(
      `${tool}: unknown flag --${key}; the flags are ${[...known].map((k) => `--${k}`).join(", ")}\n`,
    );
    process.exit(2);
  }
}
const chunks = countFlag(tool, "chunks", args.chunks, 48);
const intervalMs = countFlag(tool, "interval-ms", args["interval-ms"], 20, 0);
const delayMs = countFlag(tool, "delay-ms", args["delay-ms"], 200, 0);
const runs = countFlag(tool, "runs", args.runs, 5);
const peerProtocol = args.peer ?? "jsonrpc";
if (peerProtocol !== "jsonrpc" && peerProtocol !== "grpc") {
  process.stderr.write(`${tool}: --peer must be jsonrpc or grpc, got ${JSON.stringify(peerProtocol)}\n`);
  process.exit(2);
}
const root = resolve(args.root ?? new URL("..", import.meta.url).pathname);
const bridgeBin = join(root, "apps/bridge/bin/parley-bridge.js");
const work = mkdtempSync(join(tmpdir(), "parley-relay-latency-"));
const children = [];

/** Starts one Parley process with `config` and resolves with its JSON-RPC URL and gRPC address. */
function startServer(name, config) {
  const configFile = join(work, `${name}.json`);
  writeFileSync(configFile, JSON.stringify(config));
  const child = spawn(
    process.execPath,
    [bridgeBin, "--config", configFile, "--port", "0", "--grpc-port", "0", "--data-dir", join(work, name)],
    { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, LOG_LEVEL: "warn" } },
  );
  children.push(child);
  let out = "";
  let err = "";
  child.stderr.on("data", (d) => {
    err += d;
  });
  return new Promise((done, fail) => {
    const timer = setTimeout(() => fail(new Error(`${name} did not start within 30 s: ${err.slice(-2000)}`)), 30_000);
    child.once("exit", (code) => fail(new Error(`${name} exited with ${code}: ${err.slice(-2000)}`)));
    child.stdout.on("data", (d) => {
      out += d;
      const rpc = /JSON-RPC {4}(\S+)/.exec(out);
      const grpc = /gRPC {8}(\S+)/.exec(out);
      if (rpc && grpc && out.includes("Try: ")) {
        clearTimeout(timer);
        done({ url: rpc[1], grpc: grpc[1] });
      }
    });
  });
}

/** One SendStreamingMessage over JSON-RPC: when each event arrived, and which carried reply text. */
async function streamOnce(url) {
  const sentAt = performance.now();
  const response = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", "a2a-version": "1.0" },
    body: JSON.stringify({
      jsonrpc: "2.0",
      id: 1,
      method: "SendStreamingMessage",
      params: { message: { messageId: randomUUID(), role: "ROLE_USER", parts: [{ text: `go ${randomUUID()}` }] } },
    }),
  });
  const decoder = new TextDecoder();
  let buffer = "";
  const events = [];
  for await (const bytes of response.body) {
    buffer += decoder.decode(bytes, { stream: true });
    for (let end = buffer.indexOf("\n\n"); end >= 0; end = buffer.indexOf("\n\n")) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const data = block
        .split("\n")
        .filter((l) => l.startsWith("data: "))
        .map((l) => l.slice(6))
        .join("");
      if (data === "") continue;
      const result = JSON.parse(data).result ?? {};
      const text = result.artifactUpdate?.artifact?.parts?.map((p) => p.text ?? "").join("") ?? "";
      events.push({ at: performance.now(), text, state: result.statusUpdate?.status?.state });
    }
  }
  return { sentAt, events };
}

const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor((sorted.length - 1) / 2)];
};

let model;
try {
  model = await startFakeModel({ delayMs, chunks, intervalMs });
  const last = await startServer("hop-1", {
    agents: [{ name: "model", type: "openai", options: { baseUrl: model.baseUrl, model: "fake" } }],
  });
  const peerOf = (server, agent) =>
    peerProtocol === "grpc"
      ? { name: "next", url: `http://${server.grpc}`, protocol: "grpc", agent }
      : { name: "next", url: new URL(`agents/${agent}/`, server.url).href, protocol: "jsonrpc" };
  const second = await startServer("hop-2", {
    agents: [{ name: "relay", type: "a2a", options: { peer: "next" } }],
    peers: [peerOf(last, "model")],
  });
  const third = await startServer("hop-3", {
    agents: [{ name: "relay", type: "a2a", options: { peer: "next" } }],
    peers: [peerOf(second, "relay")],
  });
  const chains = [
    { hops: 1, url: new URL("agents/model/", last.url).href },
    { hops: 2, url: new URL("agents/relay/", second.url).href },
    { hops: 3, url: new URL("agents/relay/", third.url).href },
  ];
  const rows = [];
  for (const chain of chains) {
    const samples = [];
    for (let i = 0; i <= runs; i++) {
      const before = model.calls.length;
      const { sentAt, events } = await streamOnce(chain.url);
      const call = model.calls[before];
      const texts = events.filter((e) => e.text !== "");
      const end = events.at(-1)?.state;
      if (!call || call.sent !== chunks || texts.length === 0 || end !== "TASK_STATE_COMPLETED") {
        throw new Error(
          `${chain.hops} hops: the send ended ${end ?? "without a state"} after ${events.length} events (model sent ${call?.sent ?? 0} chunks)`,
        );
      }
      // The first send of each chain warms its processes up; it is not counted.
      if (i === 0) continue;
      samples.push({
        firstEvent: events[0].at - sentAt,
        firstChunk: texts[0].at - call.firstChunkAt,
        lastChunk: texts.at(-1).at - call.firstChunkAt,
        modelLast: call.lastChunkAt - call.firstChunkAt,
        chunkEvents: texts.length,
        events: events.length,
      });
    }
    const pick = (key) => median(samples.map((s) => s[key]));
    rows.push({
      hops: chain.hops,
      firstEvent: pick("firstEvent"),
      firstChunk: pick("firstChunk"),
      lastChunk: pick("lastChunk"),
      modelLast: pick("modelLast"),
      chunkEvents: pick("chunkEvents"),
      events: pick("events"),
    });
  }
  const ms = (v) => `${v.toFixed(1)} ms`.padStart(10);
  process.stdout.write(
    `relay latency: ${chunks} chunks ${intervalMs} ms apart after ${delayMs} ms, peers over ${peerProtocol}, ` +
      `median of ${runs} sends per chain (times from the model's first chunk unless said)\n\n` +
      "hops  first event (from send)  first chunk  last chunk  model's last  chunk events  events\n",
  );
  for (const r of rows) {
    process.stdout.write(
      `${String(r.hops).padStart(4)}  ${ms(r.firstEvent).padStart(23)}  ${ms(r.firstChunk).padStart(11)}  ` +
        `${ms(r.lastChunk)}  ${ms(r.modelLast).padStart(12)}  ${String(r.chunkEvents).padStart(12)}  ${String(r.events).padStart(6)}\n`,
    );
  }
} finally {
  for (const child of children) child.kill("SIGTERM");
  await Promise.all(children.map((c) => (c.exitCode !== null ? undefined : new Promise((r) => c.once("exit", r)))));
  await model?.close();
  rmSync(work, { recursive: true, force: true });
}
