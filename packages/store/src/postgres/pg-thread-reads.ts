// Reading threads in the PostgreSQL backend: the tail, message pages, one meta, a tenant's thread list.
import { readU64, u64 } from "../core/bytes.js";
import { checkLimit, checkListThreads, checkReadMessages, checkThreadKey, MAX_TIME } from "../core/checks.js";
import { cursorKinds, encodeCursor } from "../core/cursors.js";
import {
  type MessagePage,
  type PageOrder,
  type StoredMessage,
  StoreError,
  type ThreadKey,
  type ThreadMeta,
  type ThreadPage,
} from "../types.js";
import type { PgContext } from "./pg-context.js";
import { asBuffer, idText, tenantKeyOf, threadKeyOf } from "./pg-keys.js";
import {
  MESSAGE_COLUMNS,
  type MessageRow,
  THREAD_COLUMNS,
  type ThreadRow,
  toMessage,
  toMeta,
  toThreadMeta,
} from "./pg-rows.js";

async function readMeta(ctx: PgContext, tenant: string, contextId: string): Promise<ThreadMeta | undefined> {
  const { rows } = await ctx.pool.query<ThreadRow>(
    `SELECT ${THREAD_COLUMNS} FROM parley_threads WHERE thread_key = $1`,
    [threadKeyOf(tenant, contextId)],
  );
  return rows.length === 0 ? undefined : toThreadMeta(rows[0]!, tenant, contextId);
}

// One statement: the newest messages with their thread's ids, so the read is also the check that the row is
// this conversation's (no thread row, no messages: nothing is returned either way).
const TAIL = {
  name: "parley_tail",
  text: `SELECT m.seq, m.message_id, m.provenance, m.task_id, m.payload, m.created_at,
      th.tenant AS th_tenant, th.context_id AS th_context_id
    FROM parley_threads th
    CROSS JOIN LATERAL (
      SELECT ${MESSAGE_COLUMNS} FROM parley_messages WHERE thread_key = th.thread_key ORDER BY seq DESC LIMIT $2) m
    WHERE th.thread_key = $1
    ORDER BY m.seq DESC`,
};

export async function tail(ctx: PgContext, key: ThreadKey, count: number): Promise<StoredMessage[]> {
  const { tenant, contextId } = checkThreadKey(key);
  checkLimit("count", count, true);
  if (count === 0) return [];
  const { rows } = await ctx.pool.query<MessageRow & { th_tenant: Buffer; th_context_id: Buffer }>({
    ...TAIL,
    values: [threadKeyOf(tenant, contextId), count],
  });
  const first = rows[0];
  if (!first) return [];
  if (idText(first.th_tenant, "tenant") !== tenant || idText(first.th_context_id, "contextId") !== contextId) {
    throw new StoreError("CORRUPT", `thread row of ${JSON.stringify(contextId)} belongs to another conversation`);
  }
  return rows.map(toMessage).reverse();
}

export async function readMessages(
  ctx: PgContext,
  key: ThreadKey,
  page: { readonly order: PageOrder; readonly limit: number; readonly cursor?: string },
): Promise<MessagePage> {
  const { tenant, contextId, th: digest, order, limit, tag, afterSequence: after } = checkReadMessages(key, page);
  const th = asBuffer(digest);
  const meta = await readMeta(ctx, tenant, contextId);
  if (!meta) return { messages: [] };
  const newestFirst = order === "newest-first";
  const { rows } = await ctx.pool.query<MessageRow>(
    newestFirst
      ? `SELECT ${MESSAGE_COLUMNS} FROM parley_messages WHERE thread_key = $1 AND seq < $2 ORDER BY seq DESC LIMIT $3`
      : `SELECT ${MESSAGE_COLUMNS} FROM parley_messages WHERE thread_key = $1 AND seq > $2 ORDER BY seq ASC LIMIT $3`,
    [th, newestFirst ? (after ?? MAX_TIME) : (after ?? 0), limit + 1],
  );
  const messages = rows.map(toMessage);
  if (messages.length <= limit) return { messages };
  messages.length = limit;
  return { messages, nextCursor: encodeCursor(cursorKinds.messages, tag, u64(messages[limit - 1]!.sequence)) };
}

export async function getThread(ctx: PgContext, key: ThreadKey): Promise<ThreadMeta | undefined> {
  const { tenant, contextId } = checkThreadKey(key);
  return readMeta(ctx, tenant, contextId);
}

export async function listThreads(
  ctx: PgContext,
  tenant: string,
  page: { readonly limit: number; readonly cursor?: string },
): Promise<ThreadPage> {
  const { limit, tag, after } = checkListThreads(tenant, page);
  const params: unknown[] = [tenantKeyOf(tenant), limit + 1];
  let where = "";
  if (after) {
    params.push(readU64(after, 0), asBuffer(after.subarray(8)));
    where = "AND (updated_at < $3 OR (updated_at = $3 AND thread_key > $4))";
  }
  const { rows } = await ctx.pool.query<ThreadRow & { thread_key: Buffer }>(
    `SELECT ${THREAD_COLUMNS}, thread_key FROM parley_threads WHERE tenant_key = $1 ${where}
     ORDER BY updated_at DESC, thread_key ASC LIMIT $2`,
    params,
  );
  const pageRows = rows.slice(0, limit);
  const threads = pageRows.map(toMeta).filter((t) => t.tenant === tenant);
  if (rows.length <= limit) return { threads };
  const last = pageRows[pageRows.length - 1]!;
  const position = Buffer.concat([asBuffer(u64(Number(last.updated_at))), last.thread_key]);
  return { threads, nextCursor: encodeCursor(cursorKinds.threads, tag, position) };
}

export const threadReads = { tail, readMessages, getThread, listThreads };
