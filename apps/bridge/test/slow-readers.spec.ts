// Issue 20, item 1: SSE clients that stop reading cannot grow the bridge's memory without bound. A real
// parley-bridge process (embedded server) is spawned, so its RSS (/proc) and JS heap (/metrics) are its own.
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import type { IncomingMessage } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { rpc } from "./harness.js";
import { metric, postOwnConnection, type SpawnedBridge, spawnBridge } from "./spawn-bridge.js";

const MiB = 1024 * 1024;
const clients = 100;
/** The task: 2 000 artifact chunks of 4 000 characters (8 MB), streamed 10 ms apart (so the subscribers join while its log is short). */
const chunks = 2_000;
const chunkChars = 4_000;
/** The configured bounds: 64 KiB per stream, 4 MiB for all streams together, cut after 4 s without reading. */
const streamBufferBytes = 64 * 1024;
const bufferBytes = 4 * MiB;
const stallMs = 4_000;
/**
 * What the bridge may hold beyond the configured buffers: per open stream, its connection (socket, parser,
 * the upstream's read batch of event-log events) and one event past its socket's high-water mark; for the
 * process, V8 garbage not collected yet. Without backpressure every stream held every event it was not read:
 * 100 x 8 MB, some 800 MB of strings (the audit saw 1 GB of RSS with 20 000 smaller events).
 */
const perStreamOverhead = 512 * 1024;
const processSlack = 64 * MiB;
const bound = bufferBytes + clients * perStreamOverhead + processSlack;
/**
 * Native memory the bridge may add beyond that, and keep after the clients leave: LevelDB range reads run on
 * the libuv pool (UV_THREADPOOL_SIZE, 4 by default), at most that many open at once (level-read-gate.ts), and
 * each pool thread allocates in its own glibc arena, whose heaps are 64 MiB and are given back only from their
 * top; so up to one arena heap per pool thread (LevelDB's 8 MiB block cache and 4 MiB memtables fit in that).
 * Measured: peak RSS +76 to +352 MiB, after they left (and the task ended) +147 to +392 MiB; the task's run
 * alone leaves +71. Before the gate all 100 subscribers' iterators were open at once and RSS jumped by about
 * 2 GB (30+ resident 64 MiB arena heaps) in about half the runs, and stayed there.
 */
const poolThreads = 4;
const nativeAllowance = poolThreads * 64 * MiB;

const dir = mkdtempSync(join(tmpdir(), "parley-slow-readers-"));
let bridge: SpawnedBridge;

beforeAll(async () => {
  bridge = await spawnBridge({
    dir,
    // So "after they left" compares live heaps (see settledHeap).
    collectGarbageOnSignal: true,
    config: {
      agents: [{ name: "big", type: "echo", options: { chunks, input: "text", repeat: chunks, delayMs: 10 } }],
      // Room for a loaded machine: the run itself is not what is measured.
      limits: { agentStepTimeoutMs: 600_000 },
      bridge: { sseStreamBufferBytes: streamBufferBytes, sseBufferBytes: bufferBytes, sseStallMs: stallMs },
    },
  });
}, 120_000);

afterAll(async () => {
  bridge?.child.kill("SIGKILL");
  await bridge?.exited;
  rmSync(dir, { recursive: true, force: true });
});

const resetMessage = "the bridge reset the stream before its last event";

/** The SSE events of a response, read on demand; only the count, the first and the last are kept. */
function sseTail(res: IncomingMessage) {
  let buffer = "";
  let count = 0;
  let first = "";
  let last = "";
  const done = new Promise<void>((resolve, reject) => {
    res.setEncoding("utf8");
    res.on("data", (chunk: string) => {
      buffer += chunk;
      let end = buffer.indexOf("\n\n");
      while (end >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        if (!block.startsWith(":")) {
          count++;
          if (count === 1) first = block;
          last = block;
        }
        end = buffer.indexOf("\n\n");
      }
    });
    res.once("end", resolve);
    res.once("error", reject);
    res.once("aborted", () => reject(new Error(resetMessage)));
  });
  return { done, count: () => count, first: () => first, last: () => last };
}

/** The JS heap in use plus the memory V8 tracks outside it (Buffers, ArrayBuffers): where SSE bytes live. */
async function heapUsed(): Promise<number> {
  const [heap, external] = await Promise.all([
    metric(bridge.url, "nodejs_heap_size_used_bytes"),
    metric(bridge.url, "nodejs_external_memory_bytes"),
  ]);
  return heap + external;
}

/**
 * The live heap once the bridge has finished what it was doing, after a full collection the test asks for: an idle
 * process may keep its garbage for minutes (a fresh-clone CI run saw the heap stay 52 MiB above idle for the 30 s
 * it was polled), and a stream's last event reaches its client before the run's final writes (the 8 MB task record,
 * the reply) are done, which hold tens of MiB for a moment. Collects and reads until a reading is within 1 MiB of
 * the one before it (at most 20 readings, 200 ms apart).
 */
async function settledHeap(): Promise<number> {
  await bridge.collectGarbage();
  let previous = await heapUsed();
  for (let i = 0; i < 20; i++) {
    await new Promise((resolve) => setTimeout(resolve, 200));
    await bridge.collectGarbage();
    const now = await heapUsed();
    if (Math.abs(now - previous) < MiB) return now;
    previous = now;
  }
  return previous;
}

const streamingSend = () =>
  rpc("SendStreamingMessage", {
    message: { messageId: randomUUID(), role: "ROLE_USER", parts: [{ text: "x".repeat(chunkChars) }] },
  });

describe(`${clients} SSE clients that stop reading a task of ${chunks} events (8 MB)`, () => {
  it(`keep the bridge's JS heap + external memory within ${bound / MiB} MiB of idle (sseBufferBytes 4 MiB + ${clients} x 512 KiB + 64 MiB) and its RSS within that + ${poolThreads} x 64 MiB of malloc arenas + one run of the task, are cut with an error event naming the limit, and the memory returns`, async () => {
    // A reader that keeps up gets every event: backpressure holds the producer back, it loses nothing.
    const startRss = bridge.rssBytes();
    const warm = sseTail(await postOwnConnection(bridge.url, streamingSend()));
    await warm.done;
    expect(warm.count()).toBeGreaterThan(chunks);
    expect(warm.last()).toContain("TASK_STATE_COMPLETED");
    const idleRss = bridge.rssBytes();
    // Read as the peak is below (garbage and all), so the growth compares like with like.
    const idleHeap = await heapUsed();
    const idleLiveHeap = await settledHeap();
    // The task itself costs memory (an 8 MB reply stored, its task record written): measured on that first run.
    const runCost = Math.max(0, idleRss - startRss);

    // The task of the test: its sender reads everything, 100 subscribers join while it runs and stop reading.
    const driverRes = await postOwnConnection(bridge.url, streamingSend());
    const driver = sseTail(driverRes);
    let taskId: string | undefined;
    while (taskId === undefined) {
      await new Promise((resolve) => setTimeout(resolve, 20));
      taskId = /"id":"([0-9a-f-]{36})"/.exec(driver.first())?.[1];
    }
    const responses = await Promise.all(
      Array.from({ length: clients }, () => postOwnConnection(bridge.url, rpc("SubscribeToTask", { id: taskId }))),
    );
    // Each client has its headers and reads nothing more: the kernel's socket buffers fill, then the bridge's.
    for (const res of responses) res.pause();
    let peakRss = 0;
    let peakHeap = 0;
    const cuts = () =>
      bridge
        .stderr()
        .split("\n")
        .filter((l) => l.includes("cut a slow SSE stream")).length;
    while (cuts() < clients) {
      peakRss = Math.max(peakRss, bridge.rssBytes());
      peakHeap = Math.max(peakHeap, await heapUsed());
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    const growth = peakHeap - idleHeap;
    // The task run itself (the driver's, as measured on the first run) is no cost of the subscribers.
    const rssBound = bound + nativeAllowance + runCost;
    console.log(
      `${clients} stalled SSE clients: heap+external ${(idleHeap / MiB).toFixed(0)} -> peak ` +
        `${(peakHeap / MiB).toFixed(0)} MiB (+${(growth / MiB).toFixed(0)} MiB, bound ${bound / MiB} MiB); RSS ` +
        `${(idleRss / MiB).toFixed(0)} -> peak ${(peakRss / MiB).toFixed(0)} MiB (+${((peakRss - idleRss) / MiB).toFixed(0)} MiB, ` +
        `bound ${(rssBound / MiB).toFixed(0)} MiB = ${bound / MiB} + arenas ${nativeAllowance / MiB} + one run of the task ` +
        `${(runCost / MiB).toFixed(0)} MiB)`,
    );
    expect(growth).toBeLessThan(bound);
    expect(peakRss - idleRss).toBeLessThan(rssBound);

    // Reading again, each client gets what the bridge held for it, then the cut with the limit's name. One that
    // still read nothing stallMs after its cut has its socket destroyed, the second stage of the same limit: the
    // clients resume only once all 100 are cut, and under CI's load the cuts spread over more than stallMs, so
    // the first ones may be reset by then (every cut was logged before the resume, so a reset came after its cut).
    const tails = responses.map((res) => sseTail(res));
    for (const res of responses) res.resume();
    const outcomes = await Promise.all(
      tails.map((t) =>
        t.done.then(
          () => "ended" as const,
          (error: Error) => {
            if (error.message !== resetMessage) throw error;
            return "reset" as const;
          },
        ),
      ),
    );
    const ended = tails.filter((_, i) => outcomes[i] === "ended");
    console.log(`after the cuts: ${ended.length} clients read the error event, ${clients - ended.length} were reset`);
    expect(ended.length).toBeGreaterThan(0);
    for (const tail of ended) {
      expect(tail.count()).toBeLessThan(warm.count());
      expect(tail.last()).toMatch(/^event: error\n/);
      expect(tail.last()).toMatch(/stream cut: the client read nothing for 4000 ms .*bridge\.sse(Stream)?BufferBytes/);
    }

    // The sender, reading all along, got the whole task while the others were held back and cut.
    await driver.done;
    expect(driver.last()).toContain("TASK_STATE_COMPLETED");

    // Once they are gone the bridge holds nothing for them: the live heap returns to where it was (sockets the
    // bridge destroyed may close a moment later, so it is read again for up to 10 s).
    let heapAfter = await settledHeap();
    for (let i = 0; i < 20 && heapAfter > idleLiveHeap + 16 * MiB; i++) {
      await new Promise((resolve) => setTimeout(resolve, 500));
      await bridge.collectGarbage();
      heapAfter = await heapUsed();
    }
    const rssAfter = bridge.rssBytes();
    console.log(
      `after they left: live heap ${(heapAfter / MiB).toFixed(0)} MiB (idle ${(idleLiveHeap / MiB).toFixed(0)} MiB), RSS ${(rssAfter / MiB).toFixed(0)} MiB ` +
        `(+${((rssAfter - idleRss) / MiB).toFixed(0)} MiB over idle, bound ${(rssBound / MiB).toFixed(0)} MiB)`,
    );
    expect(heapAfter).toBeLessThan(idleLiveHeap + 16 * MiB);
    // RSS after they left: what the driver's run added (as the first run did) plus what malloc keeps, bounded
    // the same way (glibc returns freed arena memory to the system only in part).
    expect(rssAfter - idleRss).toBeLessThan(rssBound);
  }, 300_000);
});
