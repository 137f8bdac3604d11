// Reading threads in the LevelDB backend: the tail (cached), message pages, one meta, a tenant's thread list.
import { readU64, toHex, u64 } from "../core/bytes.js";
import { checkLimit, checkListThreads, checkReadMessages, checkThreadKey } from "../core/checks.js";
import { cursorKinds, encodeCursor } from "../core/cursors.js";
import { HASH_BYTES, tenantHash, threadHash } from "../core/digests.js";
import type { MessagePage, PageOrder, StoredMessage, ThreadKey, ThreadMeta, ThreadPage } from "../types.js";
import { type LevelContext, readMeta } from "./level-context.js";
import { key, prefixEnd, SEQ_BYTES, T_MESSAGE, T_META, T_THREADS_BY_TENANT } from "./level-keys.js";
import { decodeMessage, decodeMeta, decodeOrCorrupt } from "./level-records.js";

async function readRange(
  ctx: LevelContext,
  th: Uint8Array,
  range: { gte: number; lte: number },
  reverse: boolean,
  limit: number,
): Promise<StoredMessage[]> {
  if (range.gte > range.lte || limit === 0) return [];
  const entries = await ctx.db
    .iterator({
      gte: key(T_MESSAGE, th, u64(range.gte)),
      lte: key(T_MESSAGE, th, u64(range.lte)),
      reverse,
      limit,
    })
    .all();
  return entries.map(([k, v]) => {
    const sequence = readU64(k, k.length - SEQ_BYTES);
    return decodeOrCorrupt("message", k, () => decodeMessage(sequence, v));
  });
}

export async function tail(ctx: LevelContext, threadKey: ThreadKey, count: number): Promise<StoredMessage[]> {
  const { tenant, contextId } = checkThreadKey(threadKey);
  checkLimit("count", count, true);
  const th = threadHash(tenant, contextId);
  const meta = readMeta(ctx, th, tenant, contextId);
  if (!meta || count === 0) return [];
  const hex = toHex(th);
  const cached = ctx.tails.get(hex, meta.lastSequence, count);
  if (cached) return cached;
  // Bounded by lastSequence: the meta is the commit point, so anything above it is not part of the thread.
  const newest = (await readRange(ctx, th, { gte: 1, lte: meta.lastSequence }, true, count)).reverse();
  // Cached only if no write changed the thread during the read.
  if (ctx.metas.get(hex) === meta) ctx.tails.put(hex, newest);
  return newest;
}

export async function readMessages(
  ctx: LevelContext,
  threadKey: ThreadKey,
  options: { readonly order: PageOrder; readonly limit: number; readonly cursor?: string },
): Promise<MessagePage> {
  const { tenant, contextId, th, order, limit, tag, afterSequence: after } = checkReadMessages(threadKey, options);
  const meta = readMeta(ctx, th, tenant, contextId);
  if (!meta) return { messages: [] };
  const newestFirst = order === "newest-first";
  const range = newestFirst
    ? { gte: 1, lte: Math.min(meta.lastSequence, (after ?? meta.lastSequence + 1) - 1) }
    : { gte: (after ?? 0) + 1, lte: meta.lastSequence };
  const messages = await readRange(ctx, th, range, newestFirst, limit + 1);
  if (messages.length <= limit) return { messages };
  messages.length = limit;
  const last = messages[limit - 1]!.sequence;
  return { messages, nextCursor: encodeCursor(cursorKinds.messages, tag, u64(last)) };
}

export async function getThread(ctx: LevelContext, threadKey: ThreadKey): Promise<ThreadMeta | undefined> {
  const { tenant, contextId } = checkThreadKey(threadKey);
  return readMeta(ctx, threadHash(tenant, contextId), tenant, contextId);
}

export async function listThreads(
  ctx: LevelContext,
  tenant: string,
  options: { readonly limit: number; readonly cursor?: string },
): Promise<ThreadPage> {
  const { limit, tag, after } = checkListThreads(tenant, options);
  const prefix = key(T_THREADS_BY_TENANT, tenantHash(tenant));
  const gt = after && key(prefix, after);
  const snapshot = ctx.db.snapshot();
  try {
    const keys = await ctx.db
      .keys({ ...(gt ? { gt } : { gte: prefix }), lt: prefixEnd(prefix), limit: limit + 1, snapshot })
      .all();
    const page = keys.slice(0, limit);
    const metaKeys = page.map((k) => key(T_META, k.subarray(k.length - HASH_BYTES)));
    const raws = await ctx.db.getMany(metaKeys, { snapshot });
    const threads: ThreadMeta[] = [];
    raws.forEach((raw, i) => {
      // An index entry without its meta, or whose meta names another tenant, was not written by
      // this store's batches (planted or foreign data): it is never listed.
      if (raw === undefined) return;
      const meta = decodeOrCorrupt("thread meta", metaKeys[i]!, () => decodeMeta(raw));
      if (meta.tenant !== tenant) return;
      threads.push(meta);
    });
    if (keys.length <= limit) return { threads };
    const lastKey = page[page.length - 1]!;
    return { threads, nextCursor: encodeCursor(cursorKinds.threads, tag, lastKey.subarray(prefix.length)) };
  } finally {
    await snapshot.close();
  }
}

export const threadReads = { tail, readMessages, getThread, listThreads };
