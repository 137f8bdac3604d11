// Parley as it is deployed: durable history on (LevelDB in a temp dir), the
// h2c listener for gRPC and Connect, and, when the bridge package is built,
// the JSON-RPC bridge in embedded mode on top of the in-process transport.
import { randomUUID } from "node:crypto";
import { mkdtempSync, readdirSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { create, toBinary } from "@bufbuild/protobuf";
import { MessageSchema, Role, TaskSchema, TaskState } from "@parley/proto";
import { createParley, loadConfig, openModeTenant } from "@parley/server";
import { serveControl } from "../lib/child-ipc.mjs";
import { createBenchDatabase } from "../lib/pg-database.mjs";

const dataDir = mkdtempSync(join(tmpdir(), "parley-bench-"));
// BENCH_PARLEY_STORE=postgres: a replica on a fresh PostgreSQL database, whose CPU is metered too
// (synchronous_commit=off, as for the SDK anchor on PostgreSQL, so both pay for the same durability).
const database =
  process.env.BENCH_PARLEY_STORE === "postgres"
    ? await createBenchDatabase("parley_bench", { synchronousCommit: "off" })
    : undefined;
// The per-tenant rate limit (on by default with API keys) would cap every row at its rate: the benchmark measures the
// server, so it is off here unless the caller sets PARLEY_RATE_LIMIT itself. The echo agent gives the
// anchor's replies: one Message for a send, a task with 8 artifact chunks for a stream, each repeating
// the new message's text. The history is still read back and framed on every turn.
const config = loadConfig({
  argv: ["--port", "0", "--data-dir", dataDir, "--log-level", "warn"],
  env: {
    PARLEY_RATE_LIMIT: "0",
    PARLEY_ECHO_REPLY: "auto",
    PARLEY_ECHO_INPUT: "text",
    ...process.env,
    ...(database ? { PARLEY_STORE_URL: database.url } : {}),
  },
});
// BENCH_PARLEY_RPC_ROUTES=off: connect-node serves every gRPC and Connect call, without Parley's own routes.
const parley = await createParley(config, { rpcRoutes: process.env.BENCH_PARLEY_RPC_ROUTES !== "off" });
const { address } = await parley.listen();

let bridge;
let bridgeError;
try {
  const { createBridge, createBridgeLogger } = await import("@parley/bridge");
  bridge = await createBridge({
    upstream: parley.inProcessTransport(),
    cards: parley,
    host: "127.0.0.1",
    port: 0,
    grpcAddress: address,
    logger: createBridgeLogger("warn"),
  });
  bridge.server.keepAliveTimeout = 60_000;
} catch (error) {
  bridgeError = String(error?.message ?? error);
}

const store = parley.store;
const payloadOf = (text, role) =>
  toBinary(
    MessageSchema,
    create(MessageSchema, { messageId: randomUUID(), role, parts: [{ content: { case: "text", value: text } }] }),
  );

serveControl({
  // Fills a thread straight through the store, in batches, the way an import would.
  async fill({ contextId, count }) {
    const key = { tenant: openModeTenant, contextId };
    // One payload for every record: import skips retry detection, and building 100 000 messages would time the bench, not the store.
    const payloads = [payloadOf("x".repeat(100), Role.USER), payloadOf("x".repeat(100), Role.AGENT)];
    const started = performance.now();
    for (let done = 0; done < count; ) {
      const n = Math.min(10_000, count - done);
      const inputs = [];
      for (let i = 0; i < n; i++) {
        const user = (done + i) % 2 === 0;
        inputs.push({
          messageId: randomUUID(),
          provenance: user ? "user" : "agent",
          payload: payloads[user ? 0 : 1],
          createdAt: Date.now(),
        });
      }
      // The store's public import (one atomic batch per call); later batches go after the thread's own messages.
      await store.importThread(key, { messages: inputs, tasks: [], mode: "append" });
      done += n;
    }
    return { ms: performance.now() - started };
  },
  // Many finished conversations straight through the store, each as a turn leaves it: a user and an
  // agent message and a COMPLETED task (so every table and index a turn writes grows). Much faster
  // than sends through the network, which would time the load generator, not the store being filled.
  async fillThreads({ count, concurrency }) {
    const messages = [payloadOf("u".repeat(100), Role.USER), payloadOf("a".repeat(100), Role.AGENT)];
    let next = 0;
    const started = performance.now();
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (next < count) {
          next++;
          const contextId = randomUUID();
          const taskId = randomUUID();
          const key = { tenant: openModeTenant, contextId };
          const createdAt = Date.now();
          await store.importThread(key, {
            messages: [
              { messageId: randomUUID(), provenance: "user", taskId, payload: messages[0], createdAt },
              { messageId: randomUUID(), provenance: "agent", taskId, payload: messages[1], createdAt },
            ],
            tasks: [],
            mode: "empty",
          });
          const payload = toBinary(
            TaskSchema,
            create(TaskSchema, { id: taskId, contextId, status: { state: TaskState.COMPLETED } }),
          );
          await store.putTask({
            tenant: openModeTenant,
            taskId,
            contextId,
            state: TaskState.COMPLETED,
            updatedAt: Date.now(),
            payload,
            created: true,
          });
        }
      }),
    );
    const ms = performance.now() - started;
    // LevelDB compacts meanwhile: a table listed here may be gone by its stat (throwIfNoEntry: false).
    const storeBytes = readdirSync(dataDir, { recursive: true })
      .map((name) => statSync(join(dataDir, String(name)), { throwIfNoEntry: false }))
      .filter((st) => st?.isFile())
      .reduce((sum, st) => sum + st.size, 0);
    return { ms, storeBytes };
  },
  // The history a turn reads (the newest maxMessages+1 messages of the thread), from the store's tail cache (a
  // thread in use) and from LevelDB (the range read and decoding of the same messages, as after a restart or once
  // the thread left the cache); and from LevelDB the last `sameCount` messages, so that two threads of different
  // lengths are read for the same work. Each is the mean over `reps` reads: one cached read takes a few us, below
  // what single timings can tell apart.
  async historyRead({ contextId, reps, sameCount }) {
    const key = { tenant: openModeTenant, contextId };
    const count = config.history.maxMessages + 1;
    const perRead = async (read) => {
      for (let i = 0; i < 500; i++) await read();
      const t = performance.now();
      for (let i = 0; i < reps; i++) await read();
      return (performance.now() - t) / reps;
    };
    const cachedMs = await perRead(() => store.tail(key, count));
    const storedMs = await perRead(() => store.readMessages(key, { order: "newest-first", limit: count }));
    const sameMs = await perRead(() => store.readMessages(key, { order: "newest-first", limit: sameCount }));
    return { cachedMs, storedMs, sameMs, messages: (await store.tail(key, count)).length };
  },
  // Idle conversations made through the engine itself (no network), each with one completed turn.
  async conversations({ count, concurrency }) {
    const caller = { tenant: openModeTenant, agent: parley.agentNames()[0] };
    let next = 0;
    let failed = 0;
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (next < count) {
          next++;
          try {
            const outcome = await parley.engine.send(caller, {
              message: create(MessageSchema, {
                messageId: randomUUID(),
                contextId: `idle-${randomUUID()}`,
                role: Role.USER,
                parts: [{ content: { case: "text", value: "z".repeat(100) } }],
              }),
            });
            if (outcome.kind === "run") await outcome.run.settled;
          } catch {
            failed++;
          }
        }
      }),
    );
    return { created: count - failed, failed };
  },
  async storeAppends({ count, concurrency }) {
    const payload = payloadOf("y".repeat(100), Role.USER);
    let next = 0;
    const started = performance.now();
    await Promise.all(
      Array.from({ length: concurrency }, async (_, w) => {
        const key = { tenant: openModeTenant, contextId: `append-${w}-${randomUUID()}` };
        while (next < count) {
          next++;
          await store.append(key, { messageId: randomUUID(), provenance: "user", payload });
        }
      }),
    );
    const ms = performance.now() - started;
    return { perSecond: (count / ms) * 1000 };
  },
  // The LevelDB group commit's counters, read from this server's own /metrics (writes, batches, fsynced batches).
  async commits() {
    const text = await (await fetch(`http://${address}/metrics`)).text();
    const read = (pattern) => Number(pattern.exec(text)?.[1] ?? 0);
    return {
      writes: read(/^parley_store_writes_total (\d+)$/m),
      synced: read(/^parley_store_commits_total\{synced="true"\} (\d+)$/m),
      batches:
        read(/^parley_store_commits_total\{synced="true"\} (\d+)$/m) +
        read(/^parley_store_commits_total\{synced="false"\} (\d+)$/m),
    };
  },
  dbCpuMark: () => database?.meter.mark(),
  dbCpuRead: () => database?.meter.read() ?? 0,
  async stop() {
    await bridge?.close();
    await parley.close();
    await database?.drop();
    rmSync(dataDir, { recursive: true, force: true });
    setImmediate(() => process.exit(0));
  },
});

process.send({
  ready: true,
  grpcUrl: `http://${address}`,
  jsonRpcUrl: bridge?.url,
  bridgeError,
  dbCpu: Boolean(database),
  commits: !database,
});
