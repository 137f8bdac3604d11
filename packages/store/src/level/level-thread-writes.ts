// Appends to a thread in the LevelDB backend: retry detection, the message, the meta and its indexes in one batch.
import { bytesEqual, sha256, toHex, u64 } from "../core/bytes.js";
import { checkAppend, checkAppendInput, checkThreadKey } from "../core/checks.js";
import { digestHex, messageIdHash, tenantHash, threadHash } from "../core/digests.js";
import type { AppendInput, AppendResult, StoredMessage, TaskRecord, ThreadKey, ThreadMeta } from "../types.js";
import {
  cachedMeta,
  type LevelContext,
  parseMeta,
  pointRead,
  readMeta,
  remember,
  threadLock,
} from "./level-context.js";
import {
  type BatchOp,
  EMPTY,
  inv,
  key,
  messageKey,
  T_MESSAGE_ID,
  T_META,
  T_THREADS_BY_TENANT,
  T_THREADS_BY_UPDATED,
} from "./level-keys.js";
import {
  decodeMessage,
  decodeMessageIdEntries,
  decodeOrCorrupt,
  encodeMessage,
  encodeMessageIdEntries,
  encodeMeta,
  type LevelMeta,
  type MessageIdEntry,
  publicMeta,
} from "./level-records.js";
import { withTask } from "./level-tasks.js";

/**
 * How long a thread's listing entry may stay where it is while the thread is
 * appended to. A turn writes twice (the inbound message, then the reply, most
 * often within milliseconds); moving the entry on both would cost two records
 * per send (a delete and a put of the `l:` key) and their compaction. listThreads reads the entries
 * this far below a page to give the exact updatedAt order (level-thread-reads.ts),
 * so this bounds that extra read. Lowering it needs every stored meta moved first.
 */
export const LISTING_SLACK_MS = 250;

/** Where a thread updated at `updatedAt` is listed: where it was, if that is at most LISTING_SLACK_MS earlier. */
export function listedAt(old: LevelMeta | undefined, updatedAt: number): number {
  return old && old.listedAt <= updatedAt && updatedAt - old.listedAt <= LISTING_SLACK_MS ? old.listedAt : updatedAt;
}

/**
 * The ops that write the thread's new meta and move its listing index when
 * its listedAt changed; a new thread (no `old`) is added to the thread filter.
 *
 * The sweep index is not moved: a thread gets its entry when it is created,
 * and sweepThreads moves an entry it finds too early to the thread's current
 * updatedAt (level-thread-deletes.ts). Every thread keeps an entry at or
 * before its updatedAt, so a sweep still finds every thread older than its
 * cutoff, and an append writes two records fewer.
 */
export function threadIndexOps(
  ctx: LevelContext,
  th: Uint8Array,
  old: LevelMeta | undefined,
  next: LevelMeta,
): BatchOp[] {
  // A new thread joins the thread filter here, where its meta's put is made: before its batch is written, so no
  // append can find the filter without it once the thread may exist (a failed write only leaves a false "maybe").
  if (!old) ctx.threads.add(th);
  const ops: BatchOp[] = [{ type: "put", key: key(T_META, th), value: encodeMeta(next) }];
  if (old?.listedAt === next.listedAt) return ops;
  const tn = tenantHash(next.tenant);
  if (old) ops.push({ type: "del", key: key(T_THREADS_BY_TENANT, tn, inv(old.listedAt), th) });
  ops.push({ type: "put", key: key(T_THREADS_BY_TENANT, tn, inv(next.listedAt), th), value: EMPTY });
  if (!old) ops.push({ type: "put", key: key(T_THREADS_BY_UPDATED, u64(next.updatedAt), th), value: EMPTY });
  return ops;
}

/**
 * Looks for a true retry among the messages that carry this messageId. The
 * digest narrows the candidates; the stored bytes are then compared in full.
 */
function findRetry(
  ctx: LevelContext,
  th: Uint8Array,
  entries: readonly MessageIdEntry[],
  payloadDigest: Uint8Array,
  input: AppendInput,
): StoredMessage | undefined {
  for (const { sequence, digest: entryDigest } of entries) {
    if (!bytesEqual(entryDigest, payloadDigest)) continue;
    const mk = messageKey(th, sequence);
    const raw = pointRead(ctx, mk);
    if (raw === undefined) continue;
    const stored = decodeOrCorrupt("message", mk, () => decodeMessage(sequence, raw));
    if (stored.messageId === input.messageId && bytesEqual(stored.payload, input.payload)) return stored;
  }
  return undefined;
}

const storedMessage = (sequence: number, input: AppendInput, payload: Uint8Array, createdAt: number) => ({
  sequence,
  messageId: input.messageId,
  provenance: input.provenance,
  ...(input.taskId === undefined ? {} : { taskId: input.taskId }),
  payload,
  createdAt,
});

export async function append(
  ctx: LevelContext,
  threadKey: ThreadKey,
  input: AppendInput,
  task?: TaskRecord,
  /** Ops of another table to write in the same batch (a run's last events); not written when this is a retry. */
  extra?: readonly BatchOp[],
): Promise<AppendResult> {
  checkAppend(threadKey, input, task);
  const { tenant, contextId } = threadKey;
  const th = threadHash(tenant, contextId);
  return ctx.locks.run(threadLock(th), async () => {
    const metaKey = key(T_META, th);
    // A fresh id needs no retry lookup and gets no index entry.
    const idKey = input.fresh ? undefined : key(T_MESSAGE_ID, th, messageIdHash(input.messageId));
    // At most two point reads (the meta unless cached or the thread filter knows the thread is new, the id index of
    // an existing thread), then one batch.
    let meta: LevelMeta | undefined = cachedMeta(ctx, th, tenant, contextId);
    let rawIds: Uint8Array | undefined;
    // A new conversation's thread is not there: the filter says so without a read through every level.
    if (!meta && ctx.threads.mayHold(th)) {
      meta = parseMeta(metaKey, pointRead(ctx, metaKey), tenant, contextId);
    }
    if (idKey && meta) rawIds = pointRead(ctx, idKey);
    const sequence = (meta?.lastSequence ?? 0) + 1;
    let idEntry: { key: Uint8Array; entries: MessageIdEntry[] } | undefined;
    if (idKey) {
      const entries = meta ? decodeMessageIdEntries(idKey, rawIds, meta.lastSequence) : [];
      const payloadDigest = sha256(input.payload);
      const retry = findRetry(ctx, th, entries, payloadDigest, input);
      if (retry) return { message: retry, duplicate: true };
      idEntry = { key: idKey, entries: [...entries, { sequence, digest: payloadDigest }] };
    }
    const now = ctx.now();
    const message: StoredMessage = storedMessage(sequence, input, input.payload.slice(), now);
    const next: LevelMeta = {
      tenant,
      contextId,
      createdAt: meta?.createdAt ?? now,
      updatedAt: now,
      messageCount: (meta?.messageCount ?? 0) + 1,
      lastSequence: sequence,
      listedAt: listedAt(meta, now),
    };
    const ops: BatchOp[] = [
      { type: "put", key: messageKey(th, sequence), value: encodeMessage(message) },
      ...threadIndexOps(ctx, th, meta, next),
    ];
    if (idEntry) ops.push({ type: "put", key: idEntry.key, value: encodeMessageIdEntries(idEntry.entries) });
    if (extra) ops.push(...extra);
    try {
      if (task === undefined) {
        await ctx.write(ops);
      } else {
        await withTask(ctx, task, async (taskOps) => ctx.write([...ops, ...taskOps]));
      }
    } catch (error) {
      remember(ctx, th, undefined);
      throw error;
    }
    remember(ctx, th, next);
    ctx.tails.appended(digestHex(th), meta?.lastSequence ?? 0, message);
    return { message, duplicate: false };
  });
}

/**
 * Appends many messages to one thread in a single atomic batch, without retry
 * detection (the messageId index is still written, so later appends
 * recognise retries of imported messages).
 */
export async function importMessages(
  ctx: LevelContext,
  threadKey: ThreadKey,
  inputs: readonly AppendInput[],
): Promise<ThreadMeta> {
  const { tenant, contextId } = checkThreadKey(threadKey);
  for (const input of inputs) checkAppendInput(input);
  const th = threadHash(tenant, contextId);
  return ctx.locks.run(threadLock(th), async () => {
    remember(ctx, th, undefined);
    const meta = readMeta(ctx, th, tenant, contextId);
    if (inputs.length === 0 && meta) return publicMeta(meta);
    const now = ctx.now();
    let sequence = meta?.lastSequence ?? 0;
    const ops: BatchOp[] = [];
    const idLists = new Map<string, { key: Uint8Array; entries: MessageIdEntry[] }>();
    for (const input of inputs) {
      const idKey = key(T_MESSAGE_ID, th, messageIdHash(input.messageId));
      const hex = toHex(idKey);
      if (!idLists.has(hex)) idLists.set(hex, { key: idKey, entries: [] });
    }
    if (meta) {
      const lists = [...idLists.values()];
      const raws = await ctx.db.getMany(lists.map((l) => l.key));
      for (const [i, l] of lists.entries())
        l.entries.push(...decodeMessageIdEntries(l.key, raws[i], meta.lastSequence));
    }
    for (const input of inputs) {
      sequence += 1;
      const message = storedMessage(sequence, input, input.payload, now);
      ops.push({ type: "put", key: messageKey(th, sequence), value: encodeMessage(message) });
      const list = idLists.get(toHex(key(T_MESSAGE_ID, th, messageIdHash(input.messageId))))!;
      list.entries.push({ sequence, digest: sha256(input.payload) });
    }
    for (const list of idLists.values()) {
      ops.push({ type: "put", key: list.key, value: encodeMessageIdEntries(list.entries) });
    }
    const next: LevelMeta = {
      tenant,
      contextId,
      createdAt: meta?.createdAt ?? now,
      updatedAt: now,
      messageCount: (meta?.messageCount ?? 0) + inputs.length,
      lastSequence: sequence,
      listedAt: listedAt(meta, now),
    };
    ops.push(...threadIndexOps(ctx, th, meta, next));
    await ctx.write(ops);
    return publicMeta(next);
  });
}
