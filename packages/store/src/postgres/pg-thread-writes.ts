// Appends in the PostgreSQL backend. Sequence numbers come from a counter column on the thread row, bumped inside
// the append: the row lock orders appends to one thread and a rolled-back append gives its number back, so
// sequences stay gapless across any number of replicas. An append is one statement (one round trip, one commit):
// the fence check, the retry lookup, the counter, the message and the task record are CTEs of it.

import { bytesEqual, sha256 } from "../core/bytes.js";
import { checkAppend, provenanceCodes } from "../core/checks.js";
import { checkFenceFor, fencedError } from "../core/fences.js";
import { checkId } from "../core/ids.js";
import { checkTtl } from "../core/lease-checks.js";
import type { WriteOptions } from "../replica-types.js";
import {
  type AppendInput,
  type AppendResult,
  type StoredMessage,
  StoreError,
  type TaskRecord,
  type ThreadKey,
} from "../types.js";
import type { PgContext } from "./pg-context.js";
import { asBuffer, idBytes, idText, taskKeyOf, tenantKeyOf, threadKeyOf } from "./pg-keys.js";
import type { PgPool } from "./pg-pipeline.js";
import { MESSAGE_COLUMNS, type MessageRow, toMessage } from "./pg-rows.js";
import { TASK_COLUMNS_LIST } from "./pg-tasks.js";
import { fenceCte, isUniqueViolation } from "./pg-transaction.js";

async function findRetry(
  q: PgPool,
  th: Buffer,
  input: AppendInput,
  digest: Buffer,
): Promise<StoredMessage | undefined> {
  const { rows } = await q.query<MessageRow>({
    name: "parley_find_retry",
    text: `SELECT ${MESSAGE_COLUMNS} FROM parley_messages WHERE thread_key = $1 AND message_id = $2 AND digest = $3`,
    values: [th, idBytes(input.messageId), digest],
  });
  const row = rows[0];
  if (!row) return undefined;
  const stored = toMessage(row);
  // The digest narrows; the bytes decide, as in the LevelDB backend.
  return bytesEqual(stored.payload, input.payload) ? stored : undefined;
}

interface AppendVariant {
  /** The write carries a fence: nothing is written unless it is the live lease (held FOR SHARE until commit). */
  readonly fenced: boolean;
  /** The write takes the context's lease (as ContextLeases.tryAcquire does): nothing is written unless granted. */
  readonly acquire: boolean;
  /** The caller minted the messageId just now: no retry of it can exist, so none is looked up. */
  readonly fresh: boolean;
  /** The task record is written in the same statement. */
  readonly task: boolean;
}

/**
 * One row: fenced?, the thread's counter after the bump (null when nothing was written) and, unless the message is
 * fresh, the retry found. Only what the caller uses is returned: each column costs a field description and a parse.
 */
interface AppendRow {
  fenced: boolean;
  last_seq: string | null;
  r_seq?: string | null;
  r_message_id?: Buffer | null;
  r_provenance?: number | null;
  r_task_id?: Buffer | null;
  r_payload?: Buffer | null;
  r_created_at?: string | null;
  /** With acquire: the token granted (null: busy), the holder it replaced if that one was never released. */
  l_token?: string | null;
  l_prev_task_id?: Buffer | null;
  l_prev_token?: string | null;
  l_prev_open?: boolean | null;
  busy_task_id?: Buffer | null;
}

// $1 thread key, $2 message id, $3 digest, $4 tenant key, $5 tenant, $6 context id, $7 now, $8 provenance,
// $9 task id of the message, $10 payload; the fence token and the task record's own columns follow (its tenant,
// context and keys derived from them are the thread's: checkAppend holds them equal, so they are not sent twice).
function appendSql(v: AppendVariant): string {
  let next = 11;
  const token = v.fenced ? `$${next++}` : "";
  // With acquire: the task id, holder and TTL (seconds) of the lease to take.
  const lease = v.acquire ? [next, next + 1, next + 2].map((i) => `$${i}`) : [];
  if (v.acquire) next += 3;
  const taskParam = v.task ? next : 0;
  const ctes: string[] = [];
  const writeIf: string[] = [];
  if (v.fenced) {
    ctes.push(fenceCte("f", "$1", token));
    writeIf.push("EXISTS (SELECT 1 FROM f)");
  }
  if (v.acquire) {
    // The same grant as ContextLeases.tryAcquire (pg-leases.ts): the row is locked until this statement commits,
    // which fences like FOR SHARE. Taken even when the message is a retry; the caller then frees it.
    ctes.push(`l AS (
      INSERT INTO parley_context_leases AS l (thread_key, tenant, context_id, task_id, holder, token, expires_at)
      VALUES ($1, $5, $6, ${lease[0]}, ${lease[1]}, 1, now() + make_interval(secs => ${lease[2]}))
      ON CONFLICT (thread_key) DO UPDATE SET
        tenant = EXCLUDED.tenant, context_id = EXCLUDED.context_id,
        task_id = EXCLUDED.task_id, holder = EXCLUDED.holder, token = l.token + 1,
        expires_at = EXCLUDED.expires_at, cancel_requested = false,
        prev_task_id = l.task_id, prev_token = l.token, prev_open = l.expires_at > '-infinity'::timestamptz
      WHERE l.expires_at <= now()
      RETURNING token, prev_task_id, prev_token, prev_open)`);
    writeIf.push("EXISTS (SELECT 1 FROM l)");
  }
  if (!v.fresh) {
    ctes.push(`r AS (SELECT ${MESSAGE_COLUMNS} FROM parley_messages
      WHERE thread_key = $1 AND message_id = $2 AND digest = $3)`);
    writeIf.push("NOT EXISTS (SELECT 1 FROM r)");
  }
  // A row of another conversation under the same key (a digest collision) is neither bumped nor returned:
  // nothing is written and the caller reports CORRUPT.
  ctes.push(`t AS (
    INSERT INTO parley_threads AS t
      (thread_key, tenant_key, tenant, context_id, last_seq, message_count, created_at, updated_at)
    SELECT $1::bytea, $4::bytea, $5::bytea, $6::bytea, 1, 1, $7::bigint, $7::bigint
    ${writeIf.length > 0 ? `WHERE ${writeIf.join(" AND ")}` : ""}
    ON CONFLICT (thread_key) DO UPDATE SET
      last_seq = t.last_seq + 1, message_count = t.message_count + 1, updated_at = EXCLUDED.updated_at
    WHERE t.tenant = EXCLUDED.tenant AND t.context_id = EXCLUDED.context_id
    RETURNING t.last_seq)`);
  // No ON CONFLICT here: a retry that commits between this statement's snapshot and its insert makes the
  // whole statement fail (unique violation), which rolls the counter back too.
  ctes.push(`m AS (
    INSERT INTO parley_messages (thread_key, seq, message_id, digest, provenance, task_id, payload, created_at)
    SELECT $1::bytea, t.last_seq, $2::bytea, $3::bytea, $8::smallint, $9::bytea, $10::bytea, $7::bigint FROM t
    RETURNING seq)`);
  if (v.task) {
    const p = (i: number) => `$${taskParam + i}`;
    ctes.push(`k AS (
      INSERT INTO parley_tasks (${TASK_COLUMNS_LIST})
      SELECT ${p(0)}::bytea, $4::bytea, $1::bytea, $5::bytea, ${p(1)}::bytea, $6::bytea,
             ${p(2)}::integer, ${p(3)}::bigint, ${p(4)}::bytea
      WHERE EXISTS (SELECT 1 FROM m)
      ON CONFLICT (task_key) DO UPDATE SET
        thread_key = EXCLUDED.thread_key, context_id = EXCLUDED.context_id, state = EXCLUDED.state,
        updated_at = EXCLUDED.updated_at, payload = EXCLUDED.payload)`);
  }
  const retryColumns = v.fresh
    ? ""
    : ", r.seq AS r_seq, r.message_id AS r_message_id, r.provenance AS r_provenance, r.task_id AS r_task_id, r.payload AS r_payload, r.created_at AS r_created_at";
  const leaseColumns = v.acquire
    ? `, l.token AS l_token, l.prev_task_id AS l_prev_task_id, l.prev_token AS l_prev_token,
       l.prev_open AS l_prev_open,
       (SELECT task_id FROM parley_context_leases WHERE thread_key = $1 AND expires_at > now()) AS busy_task_id`
    : "";
  return `WITH ${ctes.join(",\n")}
    SELECT ${v.fenced ? "NOT EXISTS (SELECT 1 FROM f)" : "false"} AS fenced,
      t.last_seq${retryColumns}${leaseColumns}
    FROM (SELECT 1) AS one LEFT JOIN t ON true ${v.fresh ? "" : "LEFT JOIN r ON true"}
      ${v.acquire ? "LEFT JOIN l ON true" : ""}`;
}

const appendStatements = new Map<string, { name: string; text: string }>();

/** The named (prepared, once per connection) statement of one variant. */
function appendStatement(v: AppendVariant): { name: string; text: string } {
  const id = `${v.fenced ? "f" : v.acquire ? "a" : "u"}${v.fresh ? "n" : "r"}${v.task ? "t" : "m"}`;
  let statement = appendStatements.get(id);
  if (!statement) {
    statement = { name: `parley_append_${id}`, text: appendSql(v) };
    appendStatements.set(id, statement);
  }
  return statement;
}

export async function append(
  ctx: PgContext,
  key: ThreadKey,
  input: AppendInput,
  task?: TaskRecord,
  write?: WriteOptions,
): Promise<AppendResult> {
  checkAppend(key, input, task);
  const { tenant, contextId } = key;
  const fence = write?.fence;
  checkFenceFor(fence, tenant, contextId);
  const acquire = write?.acquire;
  if (acquire) {
    if (fence) throw new RangeError("an append either holds a fence or takes the lease, not both");
    if (!ctx.leases) throw new RangeError("this store's appends cannot take leases (no holder configured)");
    checkId("taskId", acquire.taskId);
    checkTtl(acquire.ttlMs);
    // A holder must hear cancels for its lease: with LISTEN not yet active, a cancel sent right after the grant
    // would be lost until the next renewal (as in ContextLeases.tryAcquire).
    await ctx.leases.ready();
  }
  const th = threadKeyOf(tenant, contextId);
  const digest = asBuffer(sha256(input.payload));
  const at = ctx.now();
  const variant: AppendVariant = {
    fenced: fence !== undefined,
    acquire: acquire !== undefined,
    fresh: input.fresh === true,
    task: task !== undefined,
  };
  const values: unknown[] = [
    th,
    idBytes(input.messageId),
    digest,
    tenantKeyOf(tenant),
    idBytes(tenant),
    idBytes(contextId),
    at,
    provenanceCodes[input.provenance],
    input.taskId === undefined ? null : idBytes(input.taskId),
    asBuffer(input.payload),
  ];
  if (fence) values.push(fence.token);
  if (acquire) values.push(idBytes(acquire.taskId), ctx.leases!.holder, acquire.ttlMs / 1000);
  if (task)
    values.push(
      taskKeyOf(tenant, task.taskId),
      idBytes(task.taskId),
      task.state,
      task.updatedAt,
      asBuffer(task.payload),
    );
  let row: AppendRow;
  try {
    const { rows } = await ctx.pool.query<AppendRow>({ ...appendStatement(variant), values });
    row = rows[0]!;
  } catch (error) {
    if (!isUniqueViolation(error)) throw error;
    // A concurrent retry of this message committed first: answer with the stored record.
    const stored = await findRetry(ctx.pool, th, input, digest);
    if (!stored) {
      throw new StoreError("CORRUPT", `append of ${input.messageId} conflicted with a message that is not its retry`);
    }
    return { message: stored, duplicate: true };
  }
  if (row.fenced) throw fencedError(fence!);
  if (acquire) {
    if (row.l_token === null || row.l_token === undefined) {
      throw acquire.busy(row.busy_task_id ? idText(row.busy_task_id, "taskId") : "");
    }
    const grant = { key: { tenant, contextId }, taskId: acquire.taskId, token: Number(row.l_token) };
    const orphaned = row.l_prev_open && row.l_prev_task_id && row.l_prev_token !== null;
    acquire.granted(
      orphaned
        ? { ...grant, orphan: { taskId: idText(row.l_prev_task_id!, "taskId"), token: Number(row.l_prev_token) } }
        : grant,
    );
  }
  if (row.r_seq !== null && row.r_seq !== undefined) {
    const stored = toMessage({
      seq: row.r_seq,
      message_id: row.r_message_id!,
      provenance: row.r_provenance!,
      task_id: row.r_task_id ?? null,
      payload: row.r_payload!,
      created_at: row.r_created_at!,
    });
    // The digest narrows; the bytes decide, as in the LevelDB backend.
    if (!bytesEqual(stored.payload, input.payload)) {
      throw new StoreError("CORRUPT", `append of ${input.messageId} conflicted with a message that is not its retry`);
    }
    return { message: stored, duplicate: true };
  }
  // The counter's upsert bumps only a row of this conversation (its ON CONFLICT ... WHERE), so no row back means
  // the key is another conversation's.
  if (row.last_seq === null || row.last_seq === undefined) {
    throw new StoreError("CORRUPT", `thread row of ${JSON.stringify(contextId)} belongs to another conversation`);
  }
  const message: StoredMessage = {
    sequence: Number(row.last_seq),
    messageId: input.messageId,
    provenance: input.provenance,
    ...(input.taskId === undefined ? {} : { taskId: input.taskId }),
    payload: input.payload.slice(),
    createdAt: at,
  };
  return { message, duplicate: false };
}
