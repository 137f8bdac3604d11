/*
 * Deleting threads in the LevelDB backend, one at a time or by age, through the purge retention uses
 * (level-retention.ts): an atomic batch removes the meta and the thread indexes and records a marker (the
 * thread is gone from that instant), then its messages, tasks (with push configs and event logs) and
 * conversations go, then the marker. Opening the store finishes any purge a crash interrupted, before the
 * store is used. `x:` markers of older versions (messages only) are finished too.
 */
import { lengthPrefixedUtf8, u64 } from "../core/bytes.js";
import { checkTime } from "../core/checks.js";
import { HASH_BYTES, tenantHash } from "../core/digests.js";
import type { DeleteThreadOptions, DeleteThreadResult, ThreadKey } from "../types.js";
import { clearRange, type LevelContext, remember, threadLock } from "./level-context.js";
import {
  EMPTY,
  inv,
  key,
  PURGE_CHUNK,
  prefixEnd,
  T_MESSAGE,
  T_MESSAGE_ID,
  T_META,
  T_PURGE,
  T_RETENTION,
  T_THREADS_BY_TENANT,
  T_THREADS_BY_UPDATED,
} from "./level-keys.js";
import { decodeMeta, decodeOrCorrupt, type LevelMeta } from "./level-records.js";
import { finish, type LevelRetentionHooks, purgeThread } from "./level-retention.js";

/**
 * Deletes a thread whose lock the caller holds. `sweepEntry` is the sweep
 * index entry a sweep found; the sweep index is moved lazily, so an entry may
 * sit at any time up to meta.updatedAt. An entry this delete does not know of
 * is left behind and removed by the next sweep that reaches it (no meta).
 */
async function deleteLocked(
  ctx: LevelContext,
  th: Uint8Array,
  meta: LevelMeta,
  sweepEntry?: Uint8Array,
): Promise<void> {
  remember(ctx, th, undefined);
  const tn = tenantHash(meta.tenant);
  await ctx.write([
    { type: "del", key: key(T_META, th) },
    { type: "del", key: key(T_THREADS_BY_TENANT, tn, inv(meta.listedAt), th) },
    { type: "del", key: key(T_THREADS_BY_UPDATED, u64(meta.updatedAt), th) },
    ...(sweepEntry ? [{ type: "del" as const, key: sweepEntry }] : []),
    { type: "put", key: key(T_RETENTION, th), value: lengthPrefixedUtf8([meta.tenant, meta.contextId]) },
  ]);
  await finish(ctx, th, meta.tenant, {});
}

async function purge(ctx: LevelContext, th: Uint8Array): Promise<void> {
  for (const prefix of [key(T_MESSAGE, th), key(T_MESSAGE_ID, th)]) {
    await clearRange(ctx, prefix, prefixEnd(prefix));
  }
  await ctx.write([{ type: "del", key: key(T_PURGE, th) }]);
}

/** Finishes the purges a crash interrupted; run on open, before the store is used. */
export async function finishPendingPurges(ctx: LevelContext): Promise<void> {
  const keys = await ctx.db.keys({ gte: T_PURGE, lt: prefixEnd(T_PURGE) }).all();
  for (const k of keys) {
    const th = k.slice(T_PURGE.length);
    await ctx.locks.run(threadLock(th), () => purge(ctx, th));
  }
}

export function deleteThread(
  ctx: LevelContext,
  threadKey: ThreadKey,
  options: DeleteThreadOptions = {},
  hooks: LevelRetentionHooks = {},
): Promise<DeleteThreadResult> {
  return purgeThread(ctx, threadKey, options ?? {}, hooks);
}

export async function sweepThreads(ctx: LevelContext, olderThanMs: number): Promise<number> {
  checkTime("olderThanMs", olderThanMs);
  const cutoff = ctx.now() - olderThanMs;
  if (cutoff <= 0) return 0;
  let deleted = 0;
  for (;;) {
    const keys = await ctx.db
      .keys({ gte: T_THREADS_BY_UPDATED, lt: key(T_THREADS_BY_UPDATED, u64(cutoff)), limit: PURGE_CHUNK })
      .all();
    if (keys.length === 0) return deleted;
    for (const k of keys) {
      const th = k.slice(k.length - HASH_BYTES);
      const gone = await ctx.locks.run(threadLock(th), async () => {
        const mk = key(T_META, th);
        const raw = await ctx.db.get(mk);
        if (raw === undefined) {
          // A stray index entry (no thread behind it) would otherwise be found by every sweep.
          await ctx.write([{ type: "del", key: k }]);
          return false;
        }
        const meta = decodeOrCorrupt("thread meta", mk, () => decodeMeta(raw));
        if (meta.updatedAt >= cutoff) {
          // Appends do not move the sweep index: the entry moves here, to the thread's current time,
          // out of this sweep's range. Two entries of one thread (one left by a delete) meet in one key.
          await ctx.write([
            { type: "del", key: k },
            { type: "put", key: key(T_THREADS_BY_UPDATED, u64(meta.updatedAt), th), value: EMPTY },
          ]);
          return false;
        }
        await deleteLocked(ctx, th, meta, k);
        return true;
      });
      if (gone) deleted += 1;
    }
  }
}

export const threadDeletes = { deleteThread, sweepThreads };
