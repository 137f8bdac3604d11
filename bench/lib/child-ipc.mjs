// The server side of the orchestrator's control channel. Each server runs in
// its own process, so CPU time and RSS read here belong to that server alone.
import { readFileSync } from "node:fs";
import { startGcRecord } from "./gc-record.mjs";

/**
 * CPU time of the JavaScript (main) thread in ms, from the scheduler's own count in nanoseconds
 * (/proc/thread-self/schedstat, read on the main thread, which runs these handlers); undefined where Linux does
 * not keep it. The rest of the process's CPU is its other threads: the libuv pool, V8's GC and compiler workers,
 * and, in Parley, LevelDB's compaction thread (Node 20 names them all "node", so they are not told apart).
 */
function mainThreadMs() {
  try {
    return Number(readFileSync("/proc/thread-self/schedstat", "utf8").split(" ")[0]) / 1e6;
  } catch {
    return undefined;
  }
}

export function serveControl(handlers) {
  let gcRecord;
  const builtin = {
    cpu: () => ({ usage: process.cpuUsage(), mainMs: mainThreadMs(), rss: process.memoryUsage.rss() }),
    // The GCs of a measured part: gcMark starts the record (again, if one runs), gcRead ends it with its sums.
    gcMark: () => {
      gcRecord?.stop();
      gcRecord = startGcRecord();
    },
    gcRead: () => {
      const record = gcRecord;
      gcRecord = undefined;
      if (!record) throw new Error("gcRead without gcMark");
      return record.stop();
    },
    gc: async () => {
      if (typeof globalThis.gc === "function") {
        // Several passes with pauses: weak callbacks and finalizers of one pass free more in the next.
        for (let i = 0; i < 3; i++) {
          globalThis.gc();
          await new Promise((r) => setTimeout(r, 50));
        }
      }
      const m = process.memoryUsage();
      return { rss: m.rss, heapUsed: m.heapUsed, external: m.external, arrayBuffers: m.arrayBuffers };
    },
    ...handlers,
  };
  process.on("message", async (msg) => {
    if (!msg || typeof msg !== "object" || msg.id === undefined) return;
    const handler = builtin[msg.type];
    try {
      if (!handler) throw new Error(`unknown control message ${msg.type}`);
      const value = await handler(msg);
      process.send({ id: msg.id, ok: true, value });
    } catch (error) {
      process.send({ id: msg.id, ok: false, error: String(error?.stack ?? error) });
    }
  });
  process.on("disconnect", () => process.exit(0));
}
