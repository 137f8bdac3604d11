import { ByteReader, ByteWriter, lengthPrefixedUtf8, readU64, u64 } from "../core/bytes.js";
import { digestHex } from "../core/digests.js";
import { abortPromise, checkAfterSeq, checkEventBatch } from "../core/event-checks.js";
import { checkId } from "../core/ids.js";
import { RecentMap } from "../core/recent-map.js";
import type { Fence, TaskEvent, TaskEventLog } from "../replica-types.js";
import { StoreError } from "../types.js";
import { key, prefixEnd, T_EVENT, T_EVENT_HEAD, T_EVENTS_ENDED } from "./level-keys.js";
import type { LevelBatchOp, LevelKeyspace } from "./level-keyspace.js";
import type { LevelLeases } from "./level-leases.js";
import { decodeOrCorrupt } from "./level-records.js";

export interface LevelEventLogOptions {
  /** The thread store's database: the log's tables live beside the threads, under `parley:v1:`. */
  readonly keyspace: LevelKeyspace;
  /** Fences appends: the LevelDB backend's in-process leases. */
  readonly leases: LevelLeases;
  /** Wall clock for the retention sweep; Date.now by default. */
  readonly now?: () => number;
}

const RECORD_VERSION = 1;
const FLAG_FINAL = 1;
/** How many ended logs one sweep call drops at most; the next sweep takes the rest. */
const SWEEP_BATCH = 500;
/** Heads of recently appended tasks, so an append during a run needs no read at all. */
const HEAD_CACHE = 10_000;
/** Payload bytes past which an appended batch starts a new record. */
const RECORD_BYTES = 64 * 1024;
/** Records one range read of a follower takes at most (see readAfter): about 1 MiB. */
const READ_RECORDS = 16;
/** Events a follower reads ahead of its consumer: what a paused stream holds of its task's log. */
const FOLLOW_READ_EVENTS = 64;

// Tables (see level-keys.ts):
// e: tk lastSeq -> [version, count u32, then per event: flags u8, length u32, payload]: one record per
//    appended batch (split at RECORD_BYTES), keyed by the seq of its last event, so a read after seq n seeks to key n + 1 and the first
//    record found holds event n + 1. A streamed reply becomes a few records, not one per chunk.
// f: ended tk -> length-prefixed (tenant, taskId): logs by the time their last run ended, oldest first; the ids
//    are there for whoever inspects the database, the sweep needs only the key.
// g: tk -> [version 2, lastSeq u64, ended u64 (0 while a run is open), runStart u64]: the head of a task's log;
//    runStart is the seq of its last final event, so a subscriber finds where the latest run starts without
//    reading the log. Version 1 heads (no runStart) are still read; the next final event rewrites them.

interface Head {
  readonly lastSeq: number;
  /** When the log's last run ended (its last event is final); 0 while a run is open. */
  readonly ended: number;
  /** The seq of the log's last final event (0: none); undefined in a version 1 head while its run is open. */
  readonly runStart: number | undefined;
}

/** The head an empty log reads as (see startsEmpty): lastSeq 0, and latestRun as for no head at all. */
const emptyHead: Head = Object.freeze({ lastSeq: 0, ended: 0, runStart: 0 });

const HEAD_VERSION = 2;

function encodeHead(head: Head): Uint8Array {
  if (head.runStart === undefined) {
    return new ByteWriter(1 + 2 * 8).u8(RECORD_VERSION).u64(head.lastSeq).u64(head.ended).done();
  }
  return new ByteWriter(1 + 3 * 8).u8(HEAD_VERSION).u64(head.lastSeq).u64(head.ended).u64(head.runStart).done();
}

function decodeHead(k: Uint8Array, v: Uint8Array): Head {
  return decodeOrCorrupt("task event log head", k, () => {
    const r = new ByteReader(v);
    const version = r.u8();
    if (version !== RECORD_VERSION && version !== HEAD_VERSION) throw new RangeError("unknown record version");
    const lastSeq = r.u64();
    const ended = r.u64();
    // A version 1 head whose run has ended still says where the next one starts: after its last event.
    const runStart = version === HEAD_VERSION ? r.u64() : ended !== 0 ? lastSeq : undefined;
    const head: Head = { lastSeq, ended, runStart };
    r.end();
    return head;
  });
}

function encodeBatch(events: readonly TaskEvent[]): Uint8Array {
  let length = 1 + 4;
  for (const e of events) length += 1 + 4 + e.payload.length;
  const w = new ByteWriter(length).u8(RECORD_VERSION).u32(events.length);
  for (const e of events)
    w.u8(e.final ? FLAG_FINAL : 0)
      .u32(e.payload.length)
      .bytes(e.payload);
  return w.done();
}

/**
 * The events of one batch record with a seq above `afterSeq`, at most `limit` of them. Only those are copied
 * out of LevelDB's buffer: a record can hold hundreds of events, and a follower that wants a few of them must
 * not copy the rest (each read of every slow follower did, and its RSS grew by gigabytes).
 */
function decodeBatch(k: Uint8Array, v: Uint8Array, afterSeq = 0, limit = Number.POSITIVE_INFINITY): TaskEvent[] {
  return decodeOrCorrupt("task event batch", k, () => {
    const r = new ByteReader(v);
    if (r.u8() !== RECORD_VERSION) throw new RangeError("unknown record version");
    const count = r.u32();
    const first = readU64(k, k.length - 8) - count + 1;
    const events: TaskEvent[] = [];
    for (let i = 0; i < count; i++) {
      const flags = r.u8();
      const bytes = r.bytes(r.u32());
      if (first + i <= afterSeq) continue;
      if (events.length === limit) return events;
      // A copy: LevelDB hands out Buffers, and callers keep payloads after the read.
      events.push({ seq: first + i, payload: new Uint8Array(bytes), final: (flags & FLAG_FINAL) !== 0 });
    }
    r.end();
    return events;
  });
}

/** The seq of the last final event of a batch, undefined when none is. */
function lastFinalSeq(events: readonly TaskEvent[]): number | undefined {
  for (let i = events.length - 1; i >= 0; i--) if (events[i]!.final) return events[i]!.seq;
  return undefined;
}

interface Waiters {
  changed: Promise<void>;
  wake: () => void;
  count: number;
}

/**
 * The durable task event log of a single LevelDB server, with the same
 * contract and sequence numbers as the PostgreSQL one, so a stream can be
 * resumed while its task runs, after it ended (for the retention window) and
 * after a restart. Appends go through the thread store's group commit: the
 * events queued while one batch is written share the next, so a streamed
 * reply costs a few batches, not a write per chunk. Followers are woken in
 * process, as one process owns the directory.
 */
/** An append's ops, to be written in the caller's batch (LevelEventLog.prepare). */
export interface PreparedEvents {
  readonly ops: LevelBatchOp[];
  /** Call once the batch holding `ops` was written. */
  landed(): void;
}

/** The LevelDB event log, plus what the retention pass of the same database needs. */
export interface LevelEventLog extends TaskEventLog {
  /**
   * The ops of an append (checked as append checks them: fence, seqs), for a caller that writes them in its own
   * atomic batch (the fenced thread store, WriteOptions.events); `landed` must be called once that batch is
   * written: it moves the cached head and wakes the followers. Nothing may append to the task in between.
   */
  prepare(tenant: string, taskId: string, events: readonly TaskEvent[], fence: Fence): PreparedEvents;
  /** Forgets the cached head of a task whose log was deleted with its thread (level-retention.ts). */
  forget(tenant: string, taskId: string): void;
}

export function createLevelEventLog(options: LevelEventLogOptions): LevelEventLog {
  const { keyspace, leases } = options;
  const now = options.now ?? Date.now;
  const heads = new RecentMap<string, Head>(HEAD_CACHE);
  const waiters = new Map<string, Waiters>();
  let closed = false;
  let closeAll = () => {};
  const closing = new Promise<void>((resolve) => {
    closeAll = resolve;
  });

  const open = (name: string) => {
    if (closed) throw new StoreError("CLOSED", `${name} called after the event log at ${keyspace.path} was closed`);
  };
  const taskKey = (tenant: string, taskId: string) =>
    keyspace.taskDigest(checkId("tenant", tenant), checkId("taskId", taskId));
  const remember = (hex: string, head: Head | undefined) => {
    if (head) heads.set(hex, head);
    else heads.delete(hex);
  };
  /** The head of a task's log: from the cache, else one synchronous point read (no range scan). */
  const headOf = (tk: Uint8Array, hex = digestHex(tk)): Head | undefined => {
    const cached = heads.get(hex);
    if (cached) return cached;
    const k = key(T_EVENT_HEAD, tk);
    const raw = keyspace.get(k);
    const head = raw === undefined ? undefined : decodeHead(k, raw);
    remember(hex, head);
    return head;
  };
  const readAfter = async (tk: Uint8Array, afterSeq: number, limit: number): Promise<TaskEvent[]> => {
    // The head says where the log ends, so no read goes past it: LevelDB positions an iterator on the first key
    // at or after its target and reads that key's data block, and past the log's end that block can hold the
    // next table's multi-megabyte value (a task record, a reply), read anew and allocated natively by every
    // read of every follower (the key after a task's events is its head, which shares blocks with other
    // tables). A follower that has caught up reads nothing; a read takes at most as many records as there
    // are events left, so the iterator stops on the log's last record instead of stepping past it.
    const lastSeq = headOf(tk)?.lastSeq ?? 0;
    if (afterSeq >= lastSeq) return [];
    const prefix = key(T_EVENT, tk);
    const events: TaskEvent[] = [];
    let from = afterSeq;
    // A record is a batch of one or more events: read a few records at a time until `limit` events are there,
    // so a follower that asks for 64 events of a long finished log does not load the rest of it with them
    // (a record limit of `limit` did, for every read of every slow follower, and its RSS grew by gigabytes).
    while (events.length < limit) {
      if (from >= lastSeq) break;
      const records = Math.min(limit - events.length, READ_RECORDS, lastSeq - from);
      const entries = await keyspace.range(key(prefix, u64(from + 1)), prefixEnd(prefix), { limit: records });
      for (const [k, v] of entries) {
        if (events.length < limit) events.push(...decodeBatch(k, v, from, limit - events.length));
      }
      if (entries.length < records) break;
      const lastKey = entries[entries.length - 1]![0];
      from = readU64(lastKey, lastKey.length - 8);
    }
    return events;
  };
  /** Where the latest run starts, read from the events: only for logs whose head predates runStart. */
  const latestRunByReading = async (tk: Uint8Array): Promise<{ start: number; ended: boolean }> => {
    let start = 0;
    let ended = false;
    let after = 0;
    for (;;) {
      const batch = await readAfter(tk, after, FOLLOW_READ_EVENTS);
      for (const event of batch) {
        ended = event.final;
        if (event.final) start = event.seq;
      }
      if (batch.length < FOLLOW_READ_EVENTS) return { start, ended };
      after = batch[batch.length - 1]!.seq;
    }
  };
  const waitersOf = (hex: string): Waiters => {
    let w = waiters.get(hex);
    if (!w) {
      const fresh: Waiters = { changed: Promise.resolve(), wake: () => {}, count: 0 };
      fresh.changed = new Promise((resolve) => {
        fresh.wake = resolve;
      });
      waiters.set(hex, fresh);
      w = fresh;
    }
    return w;
  };
  const wake = (hex: string) => {
    const w = waiters.get(hex);
    if (!w) return;
    const resolve = w.wake;
    w.changed = new Promise((r) => {
      w.wake = r;
    });
    resolve();
  };

  /** The ops that append `events` (checked against the head now), and what to do once they landed. */
  const prepare = (tenant: string, taskId: string, events: readonly TaskEvent[], fence: Fence): PreparedEvents => {
    open("append");
    const tk = taskKey(tenant, taskId);
    if (fence.key.tenant !== tenant) throw new RangeError("the fence belongs to another tenant than the task");
    leases.check(fence);
    const hex = digestHex(tk);
    const before = headOf(tk, hex);
    checkEventBatch(taskId, events, before?.lastSeq ?? 0);
    const last = events[events.length - 1]!;
    const head: Head = {
      lastSeq: last.seq,
      ended: last.final ? now() : 0,
      runStart: lastFinalSeq(events) ?? (before ? before.runStart : 0),
    };
    const ops: LevelBatchOp[] = [];
    // Records of at most RECORD_BYTES (one event at least): a group commit under load can carry a whole long
    // reply, and every read of every follower would load that record whole to take a few of its events.
    let from = 0;
    let bytes = 0;
    for (let i = 0; i < events.length; i++) {
      bytes += events[i]!.payload.length;
      if (bytes < RECORD_BYTES && i < events.length - 1) continue;
      const part = from === 0 && i === events.length - 1 ? events : events.slice(from, i + 1);
      ops.push({ type: "put", key: key(T_EVENT, tk, u64(events[i]!.seq)), value: encodeBatch(part) });
      from = i + 1;
      bytes = 0;
    }
    ops.push({ type: "put", key: key(T_EVENT_HEAD, tk), value: encodeHead(head) });
    if (last.final) {
      // Only a run's end is indexed for the sweep: one record per run, none per chunk.
      ops.push({
        type: "put",
        key: key(T_EVENTS_ENDED, u64(head.ended), tk),
        value: lengthPrefixedUtf8([tenant, taskId]),
      });
    }
    return {
      ops,
      landed() {
        remember(hex, head);
        wake(hex);
      },
    };
  };

  return {
    async append(tenant, taskId, events, fence) {
      const prepared = prepare(tenant, taskId, events, fence);
      // The fence was checked synchronously in prepare; one process owns the leases, so no one can take it over
      // before the batch is issued (the same argument as the fenced thread store).
      await keyspace.write(prepared.ops);
      prepared.landed();
      // The in-process lease is not this log's to free: the coordinator frees it after the run's last batch.
      return { released: false };
    },
    prepare,
    async read(tenant, taskId, afterSeq, limit) {
      open("read");
      checkAfterSeq(afterSeq);
      return readAfter(taskKey(tenant, taskId), afterSeq, limit);
    },
    async latestRun(tenant, taskId) {
      open("latestRun");
      const tk = taskKey(tenant, taskId);
      const head = headOf(tk);
      if (!head) return { start: 0, ended: false };
      if (head.runStart !== undefined) return { start: head.runStart, ended: head.ended !== 0 };
      // A version 1 head of an open run: its start is found once by reading the log, then kept in the head.
      return latestRunByReading(tk);
    },
    async lastSeq(tenant, taskId) {
      open("lastSeq");
      const tk = taskKey(tenant, taskId);
      return headOf(tk)?.lastSeq ?? 0;
    },
    startsEmpty(tenant, taskId) {
      open("startsEmpty");
      // What the head of an empty log reads as (lastSeq and latestRun as for no head at all), cached: the task's
      // first append then checks its seqs against it instead of a point read that can only miss (time on the
      // JavaScript thread every streamed turn, and a seek charged to a table per miss).
      remember(digestHex(taskKey(tenant, taskId)), emptyHead);
    },
    subscribe(tenant, taskId, afterSeq, signal) {
      open("subscribe");
      const tk = taskKey(tenant, taskId);
      checkAfterSeq(afterSeq);
      const hex = digestHex(tk);
      return (async function* follow() {
        const abort = abortPromise(signal);
        const w = waitersOf(hex);
        w.count++;
        try {
          let last = afterSeq;
          while (!signal.aborted && !closed) {
            // Taken before the read, so an append that lands while it runs still wakes this loop.
            const changed = w.changed;
            const batch = await readAfter(tk, last, FOLLOW_READ_EVENTS);
            for (const event of batch) {
              last = event.seq;
              yield event;
              if (event.final) return;
            }
            if (batch.length === 0) await Promise.race([changed, abort.promise, closing]);
          }
        } finally {
          abort.dispose();
          if (--w.count === 0 && waiters.get(hex) === w) waiters.delete(hex);
        }
      })();
    },
    async sweep(olderThanMs) {
      open("sweep");
      const cutoff = now() - olderThanMs;
      if (cutoff <= 0) return 0;
      const due = await keyspace.range(T_EVENTS_ENDED, key(T_EVENTS_ENDED, u64(cutoff)), { limit: SWEEP_BATCH });
      let dropped = 0;
      for (const [k] of due) {
        const ended = readU64(k, T_EVENTS_ENDED.length);
        const tk = k.subarray(T_EVENTS_ENDED.length + 8);
        const hex = digestHex(tk);
        const ops: LevelBatchOp[] = [{ type: "del", key: k }];
        // A later run of the same task (a follow-up after INPUT_REQUIRED) moved or reopened the head's end:
        // only this stale index entry goes.
        if (headOf(tk, hex)?.ended === ended) {
          const prefix = key(T_EVENT, tk);
          for (const [eventKey] of await keyspace.range(prefix, prefixEnd(prefix))) {
            ops.push({ type: "del", key: eventKey });
          }
          ops.push({ type: "del", key: key(T_EVENT_HEAD, tk) });
          remember(hex, undefined);
          dropped++;
        }
        await keyspace.write(ops);
      }
      return dropped;
    },
    forget(tenant, taskId) {
      remember(digestHex(taskKey(tenant, taskId)), undefined);
    },
    async close() {
      closed = true;
      closeAll();
    },
  };
}
