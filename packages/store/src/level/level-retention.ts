/*
 * Retention in the LevelDB backend: deleting idle threads with their messages, tasks, push configs, task event
 * logs and conversations; DeleteThread (purgeThread) deletes one thread the same way.
 *
 * Which threads: each tenant's listing index (`l: H(tenant) inv(updated) th`, moved by every append, so exact) is
 * walked from its oldest end up to the tenant's cutoff; tenants are found by seeking from one tenant's group to the
 * next, so a pass reads one key per tenant plus the threads it deletes, never the live ones.
 *
 * Crash-safe, the way level-thread-deletes.ts deletes: one atomic batch removes the meta and the listing entry
 * and records a retention marker (`y: th`), so from that instant the thread is neither listed nor readable; then
 * its messages go, then its tasks in batches that each hold every record of a task (record, three indexes, push
 * configs, event log), then the marker. All of it runs under the thread's lock, so no append of the same
 * contextId interleaves; opening the store finishes a marker a crash left, before the store is used (a new thread
 * under the same contextId must not inherit old messages or see old tasks in its per-context index).
 */
import { ByteReader, bytesEqual, decodeUtf8, lengthPrefixedUtf8, readU64, toHex, u64 } from "../core/bytes.js";
import { checkLimit, checkThreadKey, checkTime, MAX_TIME } from "../core/checks.js";
import { digestHex, HASH_BYTES, taskHash, tenantHash, threadHash } from "../core/digests.js";
import {
  type DeleteThreadOptions,
  type DeleteThreadResult,
  type RetentionQuery,
  type RetentionResult,
  StoreError,
  type ThreadKey,
  type ThreadMeta,
} from "../types.js";
import { clearRange, type LevelContext, readMeta, remember, threadLock } from "./level-context.js";
import { purgeThreadConversations } from "./level-conversations.js";
import {
  type BatchOp,
  inv,
  key,
  prefixEnd,
  T_CONVERSATIONS_BY_THREAD,
  T_EVENT,
  T_EVENT_HEAD,
  T_EVENTS_ENDED,
  T_MESSAGE,
  T_MESSAGE_ID,
  T_META,
  T_PUSH,
  T_RETENTION,
  T_TASK,
  T_TASKS_BY_CONTEXT,
  T_TASKS_BY_TENANT,
  T_TASKS_UNFINISHED,
  T_THREADS_BY_TENANT,
  T_THREADS_BY_UPDATED,
} from "./level-keys.js";
import { decodeMeta, decodeOrCorrupt } from "./level-records.js";

/** What the retention pass needs from the components beside the store (leases, the event log). */
export interface LevelRetentionHooks {
  /** True when no task holds the context's lease, not even one that expired without being released. */
  readonly leaseFree?: (key: ThreadKey) => boolean;
  /** Drops whatever another component caches of a deleted task (the event log's heads). */
  readonly forgetTask?: (tenant: string, taskId: string) => void;
}

/** Index keys read per range call, and tasks deleted per batch. */
const CHUNK = 100;

/** Deletes every task of the thread (`c: th ...`) in batches that each hold whole tasks. */
async function purgeTasks(ctx: LevelContext, th: Uint8Array, tenant: string, hooks: LevelRetentionHooks) {
  const prefix = key(T_TASKS_BY_CONTEXT, th);
  const tn = tenantHash(tenant);
  let tasks = 0;
  for (;;) {
    const entries = await ctx.db.keys({ gte: prefix, lt: prefixEnd(prefix), limit: CHUNK }).all();
    if (entries.length === 0) return tasks;
    const ops: BatchOp[] = [];
    const done: { tkHex: string; taskId: string }[] = [];
    for (const k of entries) {
      const updatedInv = k.subarray(prefix.length, prefix.length + 8);
      const taskIdBytes = k.subarray(prefix.length + 8);
      const taskId = decodeOrCorrupt("task index", k, () => decodeUtf8(taskIdBytes));
      const tk = taskHash(tenant, taskId);
      ops.push(
        { type: "del", key: k },
        { type: "del", key: key(T_TASK, tk) },
        { type: "del", key: key(T_TASKS_BY_TENANT, tn, updatedInv, taskIdBytes) },
        { type: "del", key: key(T_TASKS_UNFINISHED, tk) },
      );
      for (const table of [T_PUSH, T_EVENT]) {
        const own = key(table, tk);
        for (const pk of await ctx.db.keys({ gte: own, lt: prefixEnd(own) }).all()) ops.push({ type: "del", key: pk });
      }
      const headKey = key(T_EVENT_HEAD, tk);
      const head = await ctx.db.get(headKey);
      if (head !== undefined) {
        ops.push({ type: "del", key: headKey });
        // [version u8, lastSeq u64, ended u64, (version 2) runStart u64]: ended keys the sweep index entry of the last run end.
        const ended = head.length >= 17 ? readU64(head, 9) : 0;
        if (ended > 0) ops.push({ type: "del", key: key(T_EVENTS_ENDED, u64(ended), tk) });
      }
      done.push({ tkHex: digestHex(tk), taskId });
    }
    await ctx.write(ops);
    for (const { tkHex, taskId } of done) {
      ctx.taskPositions.delete(tkHex);
      hooks.forgetTask?.(tenant, taskId);
    }
    tasks += done.length;
  }
}

/**
 * Everything after the first batch: messages, tasks, conversations, the marker. Idempotent, so a crash can
 * repeat it.
 */
export async function finish(ctx: LevelContext, th: Uint8Array, tenant: string, hooks: LevelRetentionHooks) {
  for (const prefix of [key(T_MESSAGE, th), key(T_MESSAGE_ID, th)]) {
    await clearRange(ctx, prefix, prefixEnd(prefix));
  }
  const tasks = await purgeTasks(ctx, th, tenant, hooks);
  const conversations = await purgeThreadConversations(ctx, th);
  await ctx.write([{ type: "del", key: key(T_RETENTION, th) }]);
  return { tasks, conversations };
}

function markerTenant(k: Uint8Array, v: Uint8Array): string {
  return decodeOrCorrupt("retention marker", k, () => new ByteReader(v).string());
}

/**
 * Finishes the retention deletions a crash interrupted: run on open, before the store is used, and at the start
 * of every pass (for a deletion that failed, say on a full disk, without the process dying).
 */
export async function finishPendingRetention(ctx: LevelContext, hooks: LevelRetentionHooks = {}): Promise<number> {
  const markers = await ctx.db.iterator({ gte: T_RETENTION, lt: prefixEnd(T_RETENTION) }).all();
  for (const [k, v] of markers) {
    const th = k.slice(T_RETENTION.length);
    const tenant = markerTenant(k, v);
    await ctx.locks.run(threadLock(th), () => finish(ctx, th, tenant, hooks));
  }
  return markers.length;
}

/**
 * Deletes one thread with everything of it (DeleteThread), the way a retention pass deletes an idle one: the
 * marker batch first (from then on nothing of the thread is listed or readable through its meta), then the
 * rest. Also finishes a thread whose meta is gone but whose tasks or conversations are left (a thread deleted
 * before deletes took them along). BUSY, with nothing written, while the context's lease is not free.
 */
export async function purgeThread(
  ctx: LevelContext,
  threadKey: ThreadKey,
  options: DeleteThreadOptions,
  hooks: LevelRetentionHooks = {},
): Promise<DeleteThreadResult> {
  const { tenant, contextId } = checkThreadKey(threadKey);
  const th = threadHash(tenant, contextId);
  return ctx.locks.run(threadLock(th), async () => {
    const meta = readMeta(ctx, th, tenant, contextId);
    if (!meta && !(await holdsAny(ctx, th))) return { deleted: false, messageCount: 0, tasks: 0, conversations: 0 };
    // Checked synchronously right before the batch is issued, as in purgeOne.
    if (options.busy?.(threadKey) || (hooks.leaseFree && !hooks.leaseFree(threadKey))) {
      throw new StoreError(
        "BUSY",
        `context ${JSON.stringify(contextId)} is busy: a task holds its lease; the thread was not deleted`,
      );
    }
    remember(ctx, th, undefined);
    const ops: BatchOp[] = [{ type: "put", key: key(T_RETENTION, th), value: lengthPrefixedUtf8([tenant, contextId]) }];
    if (meta) {
      ops.push(
        { type: "del", key: key(T_META, th) },
        { type: "del", key: key(T_THREADS_BY_TENANT, tenantHash(tenant), inv(meta.listedAt), th) },
        { type: "del", key: key(T_THREADS_BY_UPDATED, u64(meta.createdAt), th) },
        { type: "del", key: key(T_THREADS_BY_UPDATED, u64(meta.updatedAt), th) },
      );
    }
    await ctx.write(ops);
    const { tasks, conversations } = await finish(ctx, th, tenant, hooks);
    return { deleted: true, messageCount: meta?.messageCount ?? 0, tasks, conversations };
  });
}

/** True when tasks or conversations of the thread are stored (its meta may be gone). */
async function holdsAny(ctx: LevelContext, th: Uint8Array): Promise<boolean> {
  for (const prefix of [key(T_TASKS_BY_CONTEXT, th), key(T_CONVERSATIONS_BY_THREAD, th), key(T_MESSAGE, th)]) {
    const [first] = await ctx.db.keys({ gte: prefix, lt: prefixEnd(prefix), limit: 1 }).all();
    if (first) return true;
  }
  return false;
}

type Outcome =
  | { readonly kind: "purged"; readonly meta: ThreadMeta; readonly tasks: number }
  | { readonly kind: "kept" };

/** Deletes one thread found in tenant `tn`'s listing at `entry`, if it is still idle and free. */
async function purgeOne(
  ctx: LevelContext,
  tn: Uint8Array,
  entry: Uint8Array,
  cutoff: number,
  query: RetentionQuery,
  hooks: LevelRetentionHooks,
): Promise<Outcome | { readonly kind: "busy" }> {
  const th = entry.slice(entry.length - HASH_BYTES);
  return ctx.locks.run(threadLock(th), async () => {
    const mk = key(T_META, th);
    const raw = ctx.db.getSync(mk);
    if (raw === undefined) return { kind: "kept" } as const;
    const meta = decodeOrCorrupt("thread meta", mk, () => decodeMeta(raw));
    // Only a thread this index entry really belongs to, as it is now: never planted data, never a fresh append.
    if (!bytesEqual(tenantHash(meta.tenant), tn) || !bytesEqual(threadHash(meta.tenant, meta.contextId), th)) {
      return { kind: "kept" } as const;
    }
    if (meta.updatedAt >= cutoff) return { kind: "kept" } as const;
    const threadKey = { tenant: meta.tenant, contextId: meta.contextId };
    // Checked synchronously right before the batch is issued: a lease granted after this waits for the thread's
    // lock in its append, and then starts a new thread.
    if (query.busy?.(threadKey) || (hooks.leaseFree && !hooks.leaseFree(threadKey))) return { kind: "busy" } as const;
    remember(ctx, th, undefined);
    await ctx.write([
      { type: "del", key: mk },
      { type: "del", key: key(T_THREADS_BY_TENANT, tn, inv(meta.listedAt), th) },
      // The sweepThreads index entry sits where the thread's creation put it unless a sweepThreads call moved it
      // (the server never calls it); a moved one is a stray entry that sweepThreads itself removes.
      { type: "del", key: key(T_THREADS_BY_UPDATED, u64(meta.createdAt), th) },
      {
        type: "put",
        key: key(T_RETENTION, th),
        value: lengthPrefixedUtf8([meta.tenant, meta.contextId]),
      },
    ]);
    const { tasks } = await finish(ctx, th, meta.tenant, hooks);
    return { kind: "purged", meta, tasks } as const;
  });
}

export async function purgeIdleThreads(
  ctx: LevelContext,
  query: RetentionQuery,
  hooks: LevelRetentionHooks = {},
): Promise<RetentionResult> {
  const limit = checkLimit("limit", query?.limit);
  if (query.idleBefore !== undefined) checkTime("idleBefore", query.idleBefore);
  const cutoffs = new Map<string, number | undefined>();
  for (const [tenant, cutoff] of query.tenants ?? []) {
    if (cutoff !== undefined) checkTime(`the cutoff of tenant ${JSON.stringify(tenant)}`, cutoff);
    cutoffs.set(toHex(tenantHash(tenant)), cutoff);
  }
  const result = { threads: 0, messages: 0, tasks: 0, skipped: 0, more: false };
  await finishPendingRetention(ctx, hooks);
  const end = prefixEnd(T_THREADS_BY_TENANT);
  let from: Uint8Array = T_THREADS_BY_TENANT;
  for (;;) {
    // The next tenant group: one seek.
    const [first] = await ctx.db.keys({ gte: from, lt: end, limit: 1 }).all();
    if (!first) return result;
    const tn = first.slice(T_THREADS_BY_TENANT.length, T_THREADS_BY_TENANT.length + HASH_BYTES);
    const group = key(T_THREADS_BY_TENANT, tn);
    from = prefixEnd(group);
    const hex = toHex(tn);
    const cutoff = cutoffs.has(hex) ? cutoffs.get(hex) : query.idleBefore;
    if (cutoff === undefined || cutoff <= 0) continue;
    // An entry sits at its thread's listedAt <= updatedAt, so every thread with updatedAt < cutoff has
    // listedAt < cutoff  <=>  inv(listedAt) >= inv(cutoff) + 1 (one updated since is read and kept by purgeOne);
    // the oldest is the group's last key.
    const lowest = key(group, u64(MAX_TIME - Math.min(cutoff, MAX_TIME) + 1));
    let below = prefixEnd(group);
    for (;;) {
      const entries = await ctx.db.keys({ gte: lowest, lt: below, reverse: true, limit: CHUNK }).all();
      if (entries.length === 0) break;
      below = entries[entries.length - 1]!;
      for (const entry of entries) {
        if (result.threads >= limit) {
          result.more = true;
          return result;
        }
        const outcome = await purgeOne(ctx, tn, entry, cutoff, query, hooks);
        if (outcome.kind === "busy") result.skipped += 1;
        else if (outcome.kind === "purged") {
          result.threads += 1;
          result.messages += outcome.meta.messageCount;
          result.tasks += outcome.tasks;
        }
      }
    }
  }
}
