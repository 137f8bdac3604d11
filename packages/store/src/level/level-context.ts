// What every job of the LevelDB backend shares: the handle, the write path, the locks and the caches.
import { toHex } from "../core/bytes.js";
import { DigestFilter } from "../core/digest-filter.js";
import { digestHex } from "../core/digests.js";
import { RecentMap } from "../core/recent-map.js";
import { StoreError } from "../types.js";
import { createKeyedMutex } from "./keyed-mutex.js";
import { type BatchWriter, createBatchWriter } from "./level-batch-writer.js";
import type { LevelHealth } from "./level-health.js";
import { type Db, key, PURGE_CHUNK, prefixEnd, T_META } from "./level-keys.js";
import { decodeMeta, decodeOrCorrupt, type LevelMeta } from "./level-records.js";
import { RecentTails } from "./recent-tails.js";

/** Where a task's index entries sit: all a rewrite needs to remove them. */
export interface TaskIndexPosition {
  readonly tenant: string;
  readonly contextId: string;
  readonly updatedAt: number;
  /** The task is hidden: it has only its turn-in-flight record (`r:`), no task record and no listing entries. */
  readonly hidden?: boolean;
}

/** How many task index positions stay cached at least (RecentMap: up to twice that); a miss only costs one read. */
const TASK_POSITION_CACHE_SIZE = 10_000;
/** How many thread meta records stay cached at least (up to twice that). */
const META_CACHE_SIZE = 10_000;
/** Newest messages cached per thread: more than a turn's history read (20 + 1 by default). */
const TAIL_CACHE_MESSAGES = 64;
/** Payload bytes of cached tails across all threads. */
const TAIL_CACHE_BYTES = 16 * 1024 * 1024;

export interface LevelContext {
  readonly db: Db;
  readonly sync: boolean;
  /** Whether writes may reach the handle (level-health.ts); the batch writer keeps it. */
  readonly health: LevelHealth;
  readonly now: () => number;
  /**
   * Serialises the operations on one thread or task (keyed by its digest's hex: the two digests' tags keep them
   * apart) or push config (`p:` and its key's hex).
   */
  readonly locks: ReturnType<typeof createKeyedMutex>;
  /** Writes one atomic batch (group-committed with concurrent ones); `write.stats()` counts them. */
  readonly write: BatchWriter;
  /**
   * Index positions of recently written tasks, so rewriting a task (twice per
   * send) needs no read of the old record. Sound because this process is the
   * database's only owner (the LevelDB lock), and entries change only under
   * the task's lock, after their batch is written.
   */
  taskPositions: RecentMap<string, TaskIndexPosition>;
  /**
   * Meta records of recently written or read threads, for the same reason:
   * an append then needs at most the message-id read, and a history read
   * none. Every path that changes a meta record updates or drops its entry.
   */
  metas: RecentMap<string, LevelMeta>;
  /** The newest messages of recently used threads; same soundness argument as the metas. */
  tails: RecentTails;
  /**
   * The digests of every thread the store holds (and of some it no longer
   * does), once `scanThreads` has read the stored ones: a new conversation's
   * append then needs no read to learn that its thread does not exist, a
   * read that misses in every LevelDB level and costs more the larger the
   * store. Sound for the same reason as the caches: every thread is created
   * in this process, and added here before its batch is written.
   */
  readonly threads: DigestFilter;
}

export function createLevelContext(db: Db, sync: boolean, now: () => number, health: LevelHealth): LevelContext {
  return {
    db,
    sync,
    now,
    health,
    locks: createKeyedMutex(),
    write: createBatchWriter(db, sync, health),
    taskPositions: new RecentMap(TASK_POSITION_CACHE_SIZE),
    metas: new RecentMap(META_CACHE_SIZE),
    tails: new RecentTails(TAIL_CACHE_MESSAGES, TAIL_CACHE_BYTES),
    threads: new DigestFilter(),
  };
}

/**
 * Forgets the cached metas, tails and task positions: after the handle was reopened, since a batch that failed
 * may still have reached the log and be on disk now. (The thread filter may hold more than the store: it stays.)
 */
export function forgetCaches(ctx: LevelContext): void {
  ctx.taskPositions = new RecentMap(TASK_POSITION_CACHE_SIZE);
  ctx.metas = new RecentMap(META_CACHE_SIZE);
  ctx.tails = new RecentTails(TAIL_CACHE_MESSAGES, TAIL_CACHE_BYTES);
}

/** Deletes every key in [gte, lt) through the group commit, PURGE_CHUNK keys per batch (never around it). */
export async function clearRange(ctx: LevelContext, gte: Uint8Array, lt: Uint8Array): Promise<void> {
  for (;;) {
    const keys = await ctx.db.keys({ gte, lt, limit: PURGE_CHUNK }).all();
    if (keys.length === 0) return;
    await ctx.write(keys.map((k) => ({ type: "del" as const, key: k })));
  }
}

/** Reads the stored threads into `ctx.threads` and marks it complete; stops early (incomplete) once `stop()`. */
export async function scanThreads(ctx: LevelContext, stop: () => boolean): Promise<void> {
  // Whenever the iterator takes its snapshot, it holds every thread stored before the open; a thread created since
  // was added by threadIndexOps before its batch, whether or not the snapshot has it.
  const keys = ctx.db.keys({ gte: T_META, lt: prefixEnd(T_META) });
  try {
    for (;;) {
      if (stop()) return;
      const chunk = await keys.nextv(SCAN_CHUNK);
      if (chunk.length === 0) break;
      for (const k of chunk) ctx.threads.add(k.subarray(T_META.length));
    }
  } finally {
    await keys.close();
  }
  ctx.threads.complete();
}

/** Keys per step of the scan: large enough that its crossings are few, small enough to stop soon when closing. */
const SCAN_CHUNK = 1_000;

/**
 * Reads one small record synchronously: from LevelDB's cache that holds the
 * event loop for less than the asynchronous get's thread-pool hop, snapshot
 * and promise do; a read that misses the OS page cache holds it for one disk
 * read instead. Range reads stay asynchronous.
 */
export function pointRead(ctx: LevelContext, k: Uint8Array): Uint8Array | undefined {
  return ctx.db.getSync(k);
}

export const threadLock = (th: Uint8Array) => digestHex(th);

/** Caches the thread's new meta, or (undefined) forgets the thread's meta and tail. */
export function remember(ctx: LevelContext, th: Uint8Array, meta: LevelMeta | undefined): void {
  const hex = digestHex(th);
  if (meta) {
    ctx.metas.set(hex, meta);
    return;
  }
  ctx.metas.delete(hex);
  ctx.tails.drop(hex);
}

export function cachedMeta(ctx: LevelContext, th: Uint8Array, tenant: string, contextId: string) {
  const meta = ctx.metas.get(digestHex(th));
  return meta && meta.tenant === tenant && meta.contextId === contextId ? meta : undefined;
}

/** Remembers where a task's index entries now are, after its batch landed. */
export function rememberTask(ctx: LevelContext, tkHex: string, position: TaskIndexPosition): void {
  ctx.taskPositions.set(tkHex, position);
}

export function parseMeta(
  k: Uint8Array,
  raw: Uint8Array | undefined,
  tenant: string,
  contextId: string,
): LevelMeta | undefined {
  if (raw === undefined) return undefined;
  const meta = decodeOrCorrupt("thread meta", k, () => decodeMeta(raw));
  if (meta.tenant !== tenant || meta.contextId !== contextId) {
    throw new StoreError("CORRUPT", `thread meta at key ${toHex(k)} belongs to another conversation`);
  }
  return meta;
}

/** The meta of a thread, or undefined; CORRUPT if the record is not this thread's. */
export function readMeta(ctx: LevelContext, th: Uint8Array, tenant: string, contextId: string) {
  const cached = cachedMeta(ctx, th, tenant, contextId);
  if (cached) return cached;
  const k = key(T_META, th);
  return parseMeta(k, pointRead(ctx, k), tenant, contextId);
}
