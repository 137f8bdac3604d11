import { checkId } from "../ids.js";
import type { MemoryLeases } from "../leases/memory-leases.js";
import { StoreError, type TaskEvent, type TaskEventLog } from "../types.js";
import { abortPromise, checkAfterSeq, checkEventBatch } from "./check-events.js";

export interface MemoryEventLogOptions {
  /** Fences appends; the LevelDB backend's in-process leases. */
  readonly leases: MemoryLeases;
  /** Wall clock for sweep ages; Date.now by default. */
  readonly now?: () => number;
}

interface Log {
  readonly events: TaskEvent[];
  /** When the last event was appended. */
  touchedAt: number;
  wake: () => void;
  changed: Promise<void>;
}

/**
 * The single-process task event log of the LevelDB backend. One process owns
 * the directory, so the log of a live task can only be followed here; it
 * lives in memory and the durable record is the task snapshot in the store.
 */
export function createMemoryEventLog(options: MemoryEventLogOptions): TaskEventLog {
  const now = options.now ?? Date.now;
  const logs = new Map<string, Log>();
  let closed = false;
  let closeAll = () => {};
  const closing = new Promise<void>((resolve) => {
    closeAll = resolve;
  });

  const id = (tenant: string, taskId: string) => `${checkId("tenant", tenant)}\u0000${checkId("taskId", taskId)}`;
  const open = (name: string) => {
    if (closed) throw new StoreError("CLOSED", `${name} called after the in-process event log was closed`);
  };
  const logOf = (key: string): Log => {
    let log = logs.get(key);
    if (!log) {
      const fresh: Log = { events: [], touchedAt: now(), wake: () => {}, changed: Promise.resolve() };
      fresh.changed = new Promise((resolve) => {
        fresh.wake = resolve;
      });
      logs.set(key, fresh);
      log = fresh;
    }
    return log;
  };
  const lastOf = (log: Log | undefined) => (log && log.events.length > 0 ? log.events[log.events.length - 1]!.seq : 0);

  return {
    async append(tenant, taskId, events, fence) {
      open("append");
      const key = id(tenant, taskId);
      if (fence.key.tenant !== tenant) throw new RangeError("the fence belongs to another tenant than the task");
      options.leases.check(fence);
      const log = logOf(key);
      checkEventBatch(taskId, events, lastOf(log));
      for (const e of events) log.events.push({ seq: e.seq, payload: e.payload.slice(), final: e.final });
      log.touchedAt = now();
      const wake = log.wake;
      log.changed = new Promise((resolve) => {
        log.wake = resolve;
      });
      wake();
    },
    async read(tenant, taskId, afterSeq, limit) {
      open("read");
      checkAfterSeq(afterSeq);
      const log = logs.get(id(tenant, taskId));
      if (!log) return [];
      const first = log.events.findIndex((e) => e.seq > afterSeq);
      return first < 0 ? [] : log.events.slice(first, first + limit);
    },
    async lastSeq(tenant, taskId) {
      open("lastSeq");
      return lastOf(logs.get(id(tenant, taskId)));
    },
    subscribe(tenant, taskId, afterSeq, signal) {
      open("subscribe");
      const key = id(tenant, taskId);
      checkAfterSeq(afterSeq);
      return (async function* follow() {
        const abort = abortPromise(signal);
        try {
          let last = afterSeq;
          while (!signal.aborted && !closed) {
            const log = logOf(key);
            const changed = log.changed;
            for (const event of log.events) {
              if (event.seq <= last) continue;
              last = event.seq;
              yield event;
              if (event.final) return;
            }
            await Promise.race([changed, abort.promise, closing]);
          }
        } finally {
          abort.dispose();
        }
      })();
    },
    async sweep(olderThanMs) {
      open("sweep");
      const cutoff = now() - olderThanMs;
      let dropped = 0;
      for (const [key, log] of logs) {
        const last = log.events[log.events.length - 1];
        if (last?.final && log.touchedAt < cutoff) {
          logs.delete(key);
          dropped++;
        }
      }
      return dropped;
    },
    async close() {
      closed = true;
      closeAll();
    },
  };
}
