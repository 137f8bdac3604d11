// The load generator: one process for every target, so each server is driven
// by the same client code. Controlled by the orchestrator over IPC; every loop
// is bounded by both a request count and a deadline.
import { randomUUID } from "node:crypto";
import { Agent, request } from "node:http";
import { performance } from "node:perf_hooks";
import { create } from "@bufbuild/protobuf";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import { A2AService, Role, SendMessageRequestSchema } from "@parley/proto";
import { jsonRpcHeaders, openSseStreams } from "./lib/held-sse.mjs";

export const TEXT =
  "Parley benchmark payload: a short user turn of about one hundred bytes, the size of a chat line....";

const a2aHeaders = { "a2a-version": "1.0" };

function percentile(sorted, p) {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

function jsonRpcBody(method, contextId) {
  const message = { messageId: randomUUID(), role: "ROLE_USER", parts: [{ text: TEXT }] };
  if (contextId) message.contextId = contextId;
  return JSON.stringify({ jsonrpc: "2.0", id: 1, method, params: { message } });
}

function protoRequest(contextId) {
  return create(SendMessageRequestSchema, {
    message: {
      messageId: randomUUID(),
      role: Role.USER,
      contextId: contextId ?? "",
      parts: [{ content: { case: "text", value: TEXT } }],
    },
  });
}

/** One JSON-RPC call over keep-alive HTTP/1.1; resolves to the time of the first event and of the end. */
function jsonRpcCall(agent, url, body, streaming) {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const req = request(
      url,
      {
        method: "POST",
        agent,
        headers: jsonRpcHeaders(body, streaming),
      },
      (res) => {
        let first;
        let events = 0;
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (chunk) => {
          if (first === undefined) first = performance.now() - started;
          text += chunk;
        });
        res.on("end", () => {
          const total = performance.now() - started;
          if (res.statusCode !== 200) return reject(new Error(`HTTP ${res.statusCode}: ${text.slice(0, 200)}`));
          if (streaming) {
            // An event may start with `id:` (Parley's resumable streams) or `event:` before its data line.
            events = text.split("\n\n").filter((e) => /^data:/m.test(e)).length;
            if (text.includes("event: error") || events < 2)
              return reject(new Error(`bad stream: ${text.slice(0, 300)}`));
          } else if (!text.includes('"result"')) {
            return reject(new Error(`JSON-RPC error: ${text.slice(0, 300)}`));
          }
          resolve({ first, total, events });
        });
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

function rpcClients(kind, url, connections) {
  return Array.from({ length: connections }, () => {
    const transport =
      kind === "grpc"
        ? createGrpcTransport({ baseUrl: url })
        : createConnectTransport({ baseUrl: url, httpVersion: "2", useBinaryFormat: true });
    return createClient(A2AService, transport);
  });
}

function makeCaller(spec) {
  const streaming = spec.op === "stream";
  if (spec.protocol === "jsonrpc") {
    const agent = new Agent({ keepAlive: true, maxSockets: spec.concurrency, keepAliveMsecs: 10_000 });
    const method = streaming ? "SendStreamingMessage" : "SendMessage";
    return {
      call: (_w, contextId) => jsonRpcCall(agent, spec.url, jsonRpcBody(method, contextId), streaming),
      close: () => agent.destroy(),
    };
  }
  const clients = rpcClients(spec.protocol, spec.url, spec.connections ?? 4);
  return {
    async call(w, contextId) {
      const client = clients[w % clients.length];
      const started = performance.now();
      if (!streaming) {
        const res = await client.sendMessage(protoRequest(contextId), { headers: a2aHeaders });
        if (res.payload.case === undefined) throw new Error("empty SendMessageResponse");
        const total = performance.now() - started;
        return { first: total, total, events: 1 };
      }
      let first;
      let events = 0;
      for await (const _ of client.sendStreamingMessage(protoRequest(contextId), { headers: a2aHeaders })) {
        if (first === undefined) first = performance.now() - started;
        events++;
      }
      if (events < 2) throw new Error(`stream ended after ${events} events`);
      return { first, total: performance.now() - started, events };
    },
    close() {},
  };
}

async function drive(caller, spec, durationMs, maxRequests, record) {
  const deadline = performance.now() + durationMs;
  let issued = 0;
  const runTag = randomUUID().slice(0, 8);
  await Promise.all(
    Array.from({ length: spec.concurrency }, async (_, w) => {
      // Reused contexts: one per worker, because Parley runs one task per context at a time.
      const ownContext = `bench-${runTag}-${w}`;
      while (issued < maxRequests && performance.now() < deadline) {
        issued++;
        // A bare UUID: the SDK's PostgreSQL schema keeps context ids in varchar(36).
        const contextId = spec.contexts === "reused" ? ownContext : randomUUID();
        try {
          record(await caller.call(w, contextId));
        } catch (error) {
          record(undefined, error);
        }
      }
    }),
  );
}

async function run(spec, phase) {
  const caller = makeCaller(spec);
  try {
    await drive(caller, spec, spec.warmupMs, spec.maxRequests, () => {});
    await phase();
    const totals = [];
    const firsts = [];
    let errors = 0;
    let sampleError;
    let events = 0;
    const started = performance.now();
    // This process's own CPU over the measured part: the client's share of the machine, which a 2-core run shares.
    const cpuBefore = process.cpuUsage();
    await drive(caller, spec, spec.durationMs, spec.maxRequests, (r, error) => {
      if (!r) {
        errors++;
        sampleError ??= String(error?.message ?? error);
        return;
      }
      totals.push(r.total);
      firsts.push(r.first);
      events += r.events;
    });
    const elapsed = performance.now() - started;
    const cpu = process.cpuUsage(cpuBefore);
    totals.sort((a, b) => a - b);
    firsts.sort((a, b) => a - b);
    return {
      requests: totals.length,
      errors,
      sampleError,
      elapsedMs: elapsed,
      rps: (totals.length / elapsed) * 1000,
      p50: percentile(totals, 50),
      p99: percentile(totals, 99),
      firstP50: percentile(firsts, 50),
      firstP99: percentile(firsts, 99),
      eventsPerRequest: totals.length ? events / totals.length : 0,
      loadCpuMs: (cpu.user + cpu.system) / 1000,
    };
  } finally {
    caller.close();
  }
}

// Streams held open for the memory figures.
let held;

async function openStreams({ url, count }) {
  held = openSseStreams(url, count, () => jsonRpcBody("SendStreamingMessage", `held-${randomUUID()}`));
  const timeout = new Promise((r) => setTimeout(r, 30_000, "timeout"));
  const outcome = await Promise.race([held.firstEvents, timeout]);
  return { open: held.opened(), timedOut: outcome === "timeout" };
}

async function awaitStreams() {
  const results = await held.ended();
  held = undefined;
  return results;
}

/** Sequential sends on one context: the per-turn latency a long thread adds. */
async function sequentialSends({ url, contextId, reps }) {
  const [client] = rpcClients("grpc", url, 1);
  const times = [];
  for (let i = 0; i < reps + 10; i++) {
    const t = performance.now();
    await client.sendMessage(protoRequest(contextId), { headers: a2aHeaders });
    if (i >= 10) times.push(performance.now() - t);
  }
  times.sort((a, b) => a - b);
  return { medianMs: percentile(times, 50) };
}

/** Many short conversations, each left idle after one completed turn. */
async function conversations({ url, count, concurrency }) {
  const clients = rpcClients("grpc", url, 4);
  let next = 0;
  let failed = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async (_, w) => {
      while (next < count) {
        next++;
        try {
          await clients[w % clients.length].sendMessage(protoRequest(`idle-${randomUUID()}`), { headers: a2aHeaders });
        } catch {
          failed++;
        }
      }
    }),
  );
  return { created: count - failed, failed };
}

const waiting = new Map();
process.on("message", async (msg) => {
  if (msg.type === "go") {
    waiting.get(msg.id)?.();
    return;
  }
  const handlers = {
    run: (m) =>
      run(
        m.spec,
        () =>
          new Promise((resolve) => {
            waiting.set(m.id, resolve);
            process.send({ id: m.id, phase: "measure" });
          }),
      ),
    openStreams: (m) => openStreams(m.spec),
    awaitStreams,
    sequentialSends: (m) => sequentialSends(m.spec),
    conversations: (m) => conversations(m.spec),
    stop: async () => setImmediate(() => process.exit(0)),
  };
  try {
    const value = await handlers[msg.type](msg);
    process.send({ id: msg.id, ok: true, value });
  } catch (error) {
    process.send({ id: msg.id, ok: false, error: String(error?.stack ?? error) });
  }
});
process.on("disconnect", () => process.exit(0));
process.send({ ready: true });
