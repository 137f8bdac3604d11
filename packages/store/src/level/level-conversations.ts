// Conversations (sessions) in the LevelDB backend; the keys are described in level-keys.ts. Each save is one
// atomic batch under the conversation's lock, which the thread purge (level-retention.ts) takes too.

import type {
  ConversationEvent,
  ConversationPage,
  ConversationRecord,
  ListConversationsQuery,
} from "../conversation-types.js";
import { readU64, toHex, u64 } from "../core/bytes.js";
import { checkLimit } from "../core/checks.js";
import {
  checkConversationIds,
  checkListConversations,
  checkSave,
  conversationHash,
  decodeConversation,
  encodeConversation,
  matchesQuery,
  outOfOrder,
} from "../core/conversation-checks.js";
import { cursorKinds, encodeCursor } from "../core/cursors.js";
import { digestHex, HASH_BYTES, tenantHash, threadHash } from "../core/digests.js";
import { StoreError } from "../types.js";
import type { LevelContext } from "./level-context.js";
import {
  type BatchOp,
  EMPTY,
  inv,
  key,
  prefixEnd,
  T_CONVERSATION,
  T_CONVERSATION_EVENT,
  T_CONVERSATIONS_BY_TENANT,
  T_CONVERSATIONS_BY_THREAD,
  T_CONVERSATIONS_RUNNING,
} from "./level-keys.js";
import { decodeOrCorrupt } from "./level-records.js";

/** Index keys read per range call. */
const CHUNK = 100;
const RUNNING = 1;

const conversationLock = (sk: Uint8Array) => `s:${digestHex(sk)}`;
const eventKey = (sk: Uint8Array, seq: number) => key(T_CONVERSATION_EVENT, sk, u64(seq));

async function readRecord(ctx: LevelContext, sk: Uint8Array): Promise<ConversationRecord | undefined> {
  const k = key(T_CONVERSATION, sk);
  const raw = await ctx.db.get(k);
  return raw === undefined ? undefined : decodeOrCorrupt("conversation", k, () => decodeConversation(raw));
}

/** Every key of a stored conversation: record, events, indexes. */
async function recordKeys(ctx: LevelContext, sk: Uint8Array, record: ConversationRecord): Promise<BatchOp[]> {
  const own = key(T_CONVERSATION_EVENT, sk);
  const events = await ctx.db.keys({ gte: own, lt: prefixEnd(own) }).all();
  return [
    { type: "del", key: key(T_CONVERSATION, sk) },
    { type: "del", key: key(T_CONVERSATIONS_RUNNING, sk) },
    { type: "del", key: key(T_CONVERSATIONS_BY_TENANT, tenantHash(record.tenant), inv(record.createdAt), sk) },
    ...record.contextIds.map((contextId) => ({
      type: "del" as const,
      key: key(T_CONVERSATIONS_BY_THREAD, threadHash(record.tenant, contextId), sk),
    })),
    ...events.map((k) => ({ type: "del" as const, key: k })),
  ];
}

export async function saveConversation(
  ctx: LevelContext,
  record: ConversationRecord,
  events: readonly ConversationEvent[],
): Promise<void> {
  checkSave(record, events);
  const sk = conversationHash(record.tenant, record.conversationId);
  await ctx.locks.run(conversationLock(sk), async () => {
    const stored = await readRecord(ctx, sk);
    const before = record.eventCount - events.length;
    if ((stored?.eventCount ?? 0) !== before || (stored === undefined && before !== 0)) {
      throw outOfOrder(record, events.length, stored?.eventCount);
    }
    if (stored && (stored.tenant !== record.tenant || stored.conversationId !== record.conversationId)) {
      throw new StoreError("CORRUPT", `conversation record at ${toHex(sk)} belongs to another conversation`);
    }
    // What never changes is kept as first stored, so the indexes written then stay exact.
    const next: ConversationRecord = stored
      ? { ...record, createdAt: stored.createdAt, agents: stored.agents, contextIds: stored.contextIds }
      : record;
    const ops: BatchOp[] = [
      { type: "put", key: key(T_CONVERSATION, sk), value: encodeConversation(next) },
      ...events.map((event) => ({ type: "put" as const, key: eventKey(sk, event.seq), value: event.payload })),
    ];
    if (!stored) {
      ops.push({
        type: "put",
        key: key(T_CONVERSATIONS_BY_TENANT, tenantHash(next.tenant), inv(next.createdAt), sk),
        value: EMPTY,
      });
      for (const contextId of next.contextIds) {
        ops.push({
          type: "put",
          key: key(T_CONVERSATIONS_BY_THREAD, threadHash(next.tenant, contextId), sk),
          value: EMPTY,
        });
      }
    }
    ops.push(
      next.state === RUNNING
        ? { type: "put", key: key(T_CONVERSATIONS_RUNNING, sk), value: EMPTY }
        : { type: "del", key: key(T_CONVERSATIONS_RUNNING, sk) },
    );
    await ctx.write(ops);
  });
}

export async function getConversation(
  ctx: LevelContext,
  tenant: string,
  conversationId: string,
): Promise<ConversationRecord | undefined> {
  checkConversationIds(tenant, conversationId);
  const record = await readRecord(ctx, conversationHash(tenant, conversationId));
  return record && record.tenant === tenant && record.conversationId === conversationId ? record : undefined;
}

export async function readConversationEvents(
  ctx: LevelContext,
  tenant: string,
  conversationId: string,
  afterSeq: number,
  limit: number,
): Promise<ConversationEvent[]> {
  checkConversationIds(tenant, conversationId);
  checkLimit("afterSeq", afterSeq, true);
  checkLimit("limit", limit);
  const sk = conversationHash(tenant, conversationId);
  const prefix = key(T_CONVERSATION_EVENT, sk);
  const entries = await ctx.db.iterator({ gt: eventKey(sk, afterSeq), lt: prefixEnd(prefix), limit }).all();
  return entries.map(([k, v]) => ({
    seq: readU64(k, prefix.length),
    payload: new Uint8Array(v.buffer, v.byteOffset, v.byteLength),
  }));
}

export async function listConversations(
  ctx: LevelContext,
  tenant: string,
  query: ListConversationsQuery,
): Promise<ConversationPage> {
  const { limit, tag, after, state, agent } = checkListConversations(tenant, query);
  const prefix = key(T_CONVERSATIONS_BY_TENANT, tenantHash(tenant));
  const found: { record: ConversationRecord; position: Uint8Array }[] = [];
  let from = after ? key(prefix, after) : undefined;
  for (;;) {
    const keys = await ctx.db
      .keys({ ...(from ? { gt: from } : { gte: prefix }), lt: prefixEnd(prefix), limit: CHUNK })
      .all();
    for (const k of keys) {
      const sk = k.slice(k.length - HASH_BYTES);
      const record = await readRecord(ctx, sk);
      // An index entry without its record is never shown (a purge removes both in one batch).
      if (!record || record.tenant !== tenant || !matchesQuery(record, state, agent)) continue;
      found.push({ record, position: k.slice(prefix.length) });
      if (found.length > limit) {
        const page = found.slice(0, limit);
        return {
          conversations: page.map((f) => f.record),
          nextCursor: encodeCursor(cursorKinds.conversations, tag, page[page.length - 1]!.position),
        };
      }
    }
    if (keys.length < CHUNK) return { conversations: found.map((f) => f.record) };
    from = keys[keys.length - 1]!;
  }
}

export async function listRunningConversations(ctx: LevelContext, limit: number): Promise<ConversationRecord[]> {
  checkLimit("limit", limit);
  const keys = await ctx.db.keys({ gte: T_CONVERSATIONS_RUNNING, lt: prefixEnd(T_CONVERSATIONS_RUNNING) }).all();
  const records: ConversationRecord[] = [];
  for (const k of keys) {
    const record = await readRecord(ctx, k.slice(T_CONVERSATIONS_RUNNING.length));
    if (record) records.push(record);
  }
  records.sort((a, b) => a.createdAt - b.createdAt);
  return records.slice(0, limit);
}

/**
 * Deletes every conversation of thread `th` (`w: th sk`), each in one batch under its lock. Idempotent, so a
 * purge that a crash interrupted can repeat it. Returns how many it deleted.
 */
export async function purgeThreadConversations(ctx: LevelContext, th: Uint8Array): Promise<number> {
  const prefix = key(T_CONVERSATIONS_BY_THREAD, th);
  let deleted = 0;
  for (;;) {
    const entries = await ctx.db.keys({ gte: prefix, lt: prefixEnd(prefix), limit: CHUNK }).all();
    if (entries.length === 0) return deleted;
    for (const entry of entries) {
      const sk = entry.slice(prefix.length);
      await ctx.locks.run(conversationLock(sk), async () => {
        const record = await readRecord(ctx, sk);
        const ops: BatchOp[] = record ? await recordKeys(ctx, sk, record) : [];
        ops.push({ type: "del", key: entry });
        await ctx.write(ops);
        if (record) deleted += 1;
      });
    }
  }
}

export const conversationJobs = {
  saveConversation,
  getConversation,
  readConversationEvents,
  listConversations,
  listRunningConversations,
};
