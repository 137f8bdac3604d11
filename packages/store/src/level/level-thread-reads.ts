// Reading threads in the LevelDB backend: the tail (cached), message pages, one meta, a tenant's thread list.
import { compareBytes, concatBytes, readU64, u64 } from "../core/bytes.js";
import { checkLimit, checkListThreads, checkReadMessages, checkThreadKey, MAX_TIME } from "../core/checks.js";
import { cursorKinds, encodeCursor } from "../core/cursors.js";
import { digestHex, HASH_BYTES, tenantHash, threadHash } from "../core/digests.js";
import type { MessagePage, PageOrder, StoredMessage, ThreadKey, ThreadMeta, ThreadPage } from "../types.js";
import { type LevelContext, readMeta } from "./level-context.js";
import { inv, key, messageKey, prefixEnd, SEQ_BYTES, T_META, T_THREADS_BY_TENANT } from "./level-keys.js";
import { decodeMessage, decodeMeta, decodeOrCorrupt, publicMeta } from "./level-records.js";
import { LISTING_SLACK_MS } from "./level-thread-writes.js";

/** The time part of a listing entry after its tenant prefix (u64 inv(listedAt)). */
const TIME_BYTES = 8;

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
      gte: messageKey(th, range.gte),
      lte: messageKey(th, range.lte),
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
  const hex = digestHex(th);
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
  const meta = readMeta(ctx, threadHash(tenant, contextId), tenant, contextId);
  return meta && publicMeta(meta);
}

/** The listedAt under which a listing entry sits, or undefined for a key this store did not write. */
function listedAtOf(entry: Uint8Array, prefixLength: number): number | undefined {
  if (entry.length !== prefixLength + TIME_BYTES + HASH_BYTES) return undefined;
  const inverted = new DataView(entry.buffer, entry.byteOffset + prefixLength, TIME_BYTES).getBigUint64(0);
  return inverted > BigInt(MAX_TIME) ? undefined : MAX_TIME - Number(inverted);
}

/** How many listing entries one step of listThreads reads beyond a page (its metas in one multi-get). */
const LIST_CHUNK = 64;

/**
 * A tenant's threads by updatedAt, newest first (ties by thread digest), from
 * its listing entries. An entry sits at its thread's listedAt, which is at
 * most LISTING_SLACK_MS before updatedAt (level-thread-writes.ts), so the
 * entries come almost in order: the walk reads on until every thread not yet
 * read was listed more than LISTING_SLACK_MS below the page's last thread,
 * and could not have been updated after it. A page position (the cursor) is
 * inv(updatedAt) + digest, which is what the entry keys were when every
 * entry sat at updatedAt, so cursors of older builds still work.
 */
export async function listThreads(
  ctx: LevelContext,
  tenant: string,
  options: { readonly limit: number; readonly cursor?: string },
): Promise<ThreadPage> {
  const { limit, tag, after } = checkListThreads(tenant, options);
  const prefix = key(T_THREADS_BY_TENANT, tenantHash(tenant));
  const end = prefixEnd(prefix);
  // A thread after the cursor was updated at or before the cursor's time, so it is listed at or before it too.
  let from: { gte: Uint8Array } | { gt: Uint8Array } = {
    gte: after ? key(prefix, after.subarray(0, Math.min(TIME_BYTES, after.length))) : prefix,
  };
  const found: { position: Uint8Array; meta: ThreadMeta }[] = [];
  const snapshot = ctx.db.snapshot();
  try {
    for (;;) {
      const keys: Uint8Array[] = await ctx.db
        .keys({ ...from, lt: end, limit: Math.max(limit + 1, LIST_CHUNK), snapshot })
        .all();
      if (keys.length === 0) break;
      const metaKeys = keys.map((k) => key(T_META, k.subarray(k.length - HASH_BYTES)));
      const raws = await ctx.db.getMany(metaKeys, { snapshot });
      raws.forEach((raw, i) => {
        // An index entry without its meta, whose meta names another tenant, or that is not where the meta says
        // its entry is, was not written by this store's batches (planted or foreign data): it is never listed.
        if (raw === undefined) return;
        const meta = decodeOrCorrupt("thread meta", metaKeys[i]!, () => decodeMeta(raw));
        const entry = keys[i]!;
        if (meta.tenant !== tenant || listedAtOf(entry, prefix.length) !== meta.listedAt) return;
        const position = concatBytes([inv(meta.updatedAt), entry.subarray(entry.length - HASH_BYTES)]);
        if (after && compareBytes(position, after) <= 0) return;
        found.push({ position, meta: publicMeta(meta) });
      });
      // Every entry not read yet sorts after these, so it is listed at or before the last well-formed one
      // here and its thread was updated at most LISTING_SLACK_MS after that: a thread updated later is ahead.
      let lowest: number | undefined;
      for (let i = keys.length - 1; i >= 0 && lowest === undefined; i--) lowest = listedAtOf(keys[i]!, prefix.length);
      if (lowest !== undefined) {
        let settled = 0;
        for (const f of found) if (f.meta.updatedAt > lowest + LISTING_SLACK_MS) settled += 1;
        if (settled >= limit && found.length > limit) break;
      }
      from = { gt: keys[keys.length - 1]! };
    }
  } finally {
    await snapshot.close();
  }
  found.sort((a, b) => compareBytes(a.position, b.position));
  const threads = found.slice(0, limit).map((f) => f.meta);
  if (found.length <= limit) return { threads };
  return { threads, nextCursor: encodeCursor(cursorKinds.threads, tag, found[limit - 1]!.position) };
}

export const threadReads = { tail, readMessages, getThread, listThreads };
