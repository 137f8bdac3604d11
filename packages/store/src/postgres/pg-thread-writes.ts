// Appends in the PostgreSQL backend. Sequence numbers come from a counter column on the thread row, bumped inside
// the append transaction: the row lock orders appends to one thread and a rolled-back append gives its number
// back, so sequences stay gapless across any number of replicas.
import type pg from "pg";
import { bytesEqual, sha256 } from "../core/bytes.js";
import { checkAppend, provenanceCodes } from "../core/checks.js";
import { checkFenceFor } from "../core/fences.js";
import {
  type AppendInput,
  type AppendResult,
  type StoredMessage,
  StoreError,
  type TaskRecord,
  type ThreadKey,
  type WriteOptions,
} from "../types.js";
import type { PgContext } from "./pg-context.js";
import { asBuffer, idBytes, tenantKeyOf, threadKeyOf } from "./pg-keys.js";
import {
  MESSAGE_COLUMNS,
  type MessageRow,
  THREAD_COLUMNS,
  type ThreadRow,
  toMessage,
  toThreadMeta,
} from "./pg-rows.js";
import { TASK_UPSERT, taskParams } from "./pg-tasks.js";
import { checkFenceInTx, isUniqueViolation, transaction } from "./pg-transaction.js";

async function findRetry(
  q: pg.PoolClient | pg.Pool,
  th: Buffer,
  input: AppendInput,
  digest: Buffer,
): Promise<StoredMessage | undefined> {
  const { rows } = await q.query<MessageRow>(
    `SELECT ${MESSAGE_COLUMNS} FROM parley_messages WHERE thread_key = $1 AND message_id = $2 AND digest = $3`,
    [th, idBytes(input.messageId), digest],
  );
  const row = rows[0];
  if (!row) return undefined;
  const stored = toMessage(row);
  // The digest narrows; the bytes decide, as in the LevelDB backend.
  return bytesEqual(stored.payload, input.payload) ? stored : undefined;
}

/** Rolls an append back when its message turned out to be a retry that committed first. */
class RetryRaced extends Error {}

export async function append(
  ctx: PgContext,
  key: ThreadKey,
  input: AppendInput,
  task?: TaskRecord,
  write?: WriteOptions,
): Promise<AppendResult> {
  checkAppend(key, input, task);
  const { tenant, contextId } = key;
  checkFenceFor(write?.fence, tenant, contextId);
  const th = threadKeyOf(tenant, contextId);
  const digest = asBuffer(sha256(input.payload));
  const outcome = await transaction(ctx.pool, async (client) => {
    if (write?.fence) await checkFenceInTx(client, write.fence);
    const retry = await findRetry(client, th, input, digest);
    if (retry) return { message: retry, duplicate: true };
    const at = ctx.now();
    const counter = await client.query<ThreadRow>(
      `INSERT INTO parley_threads AS t
         (thread_key, tenant_key, tenant, context_id, last_seq, message_count, created_at, updated_at)
       VALUES ($1, $2, $3, $4, 1, 1, $5, $5)
       ON CONFLICT (thread_key) DO UPDATE SET
         last_seq = t.last_seq + 1, message_count = t.message_count + 1, updated_at = $5
       RETURNING ${THREAD_COLUMNS}`,
      [th, tenantKeyOf(tenant), idBytes(tenant), idBytes(contextId), at],
    );
    const meta = toThreadMeta(counter.rows[0]!, tenant, contextId);
    const inserted = await client.query(
      `INSERT INTO parley_messages
         (thread_key, seq, message_id, digest, provenance, task_id, payload, created_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
       ON CONFLICT (thread_key, message_id, digest) DO NOTHING`,
      [
        th,
        meta.lastSequence,
        idBytes(input.messageId),
        digest,
        provenanceCodes[input.provenance],
        input.taskId === undefined ? null : idBytes(input.taskId),
        asBuffer(input.payload),
        at,
      ],
    );
    // A concurrent retry committed first (ON CONFLICT DO NOTHING reports no row then):
    // roll back, which also gives the counter value back, and answer with the stored record.
    if (inserted.rowCount === 0) throw new RetryRaced();
    if (task) await client.query(TASK_UPSERT, taskParams(task));
    const message: StoredMessage = {
      sequence: meta.lastSequence,
      messageId: input.messageId,
      provenance: input.provenance,
      ...(input.taskId === undefined ? {} : { taskId: input.taskId }),
      payload: input.payload.slice(),
      createdAt: at,
    };
    return { message, duplicate: false };
  }).catch((error: unknown) => {
    if (error instanceof RetryRaced || isUniqueViolation(error)) return undefined;
    throw error;
  });
  if (outcome) return outcome;
  const stored = await findRetry(ctx.pool, th, input, digest);
  if (!stored) {
    throw new StoreError("CORRUPT", `append of ${input.messageId} conflicted with a message that is not its retry`);
  }
  return { message: stored, duplicate: true };
}
