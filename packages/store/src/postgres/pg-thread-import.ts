// importThread in the PostgreSQL backend: one transaction that locks the thread row (so imports and appends to the
// thread are ordered), skips the messages and tasks the thread already holds, and inserts the rest in two statements.
import { bytesEqual, sha256 } from "../core/bytes.js";
import { provenanceCodes } from "../core/checks.js";
import { checkThreadImport, foreignTask, notEmpty } from "../core/import-checks.js";
import type { ImportedMessage, TaskRecord, ThreadImport, ThreadImportResult, ThreadKey, ThreadMeta } from "../types.js";
import type { PgContext } from "./pg-context.js";
import { asBuffer, idBytes, idText, taskKeyOf, tenantKeyOf, threadKeyOf } from "./pg-keys.js";
import { THREAD_COLUMNS, type ThreadRow, toThreadMeta } from "./pg-rows.js";
import { TASK_UPSERT, taskParams } from "./pg-tasks.js";
import { transaction } from "./pg-transaction.js";

interface ExistingRow {
  seq: string;
  message_id: Buffer;
  digest: Buffer;
  payload: Buffer;
}

export async function importThread(ctx: PgContext, key: ThreadKey, data: ThreadImport): Promise<ThreadImportResult> {
  checkThreadImport(key, data);
  const { tenant, contextId } = key;
  const th = threadKeyOf(tenant, contextId);
  return transaction(ctx.pool, async (client) => {
    const now = ctx.now();
    if (data.messages.length > 0) {
      // A row to lock even for a new thread; it is only committed with the messages this import adds.
      await client.query(
        `INSERT INTO parley_threads (thread_key, tenant_key, tenant, context_id, last_seq, message_count, created_at, updated_at)
         VALUES ($1, $2, $3, $4, 0, 0, $5, $5) ON CONFLICT (thread_key) DO NOTHING`,
        [th, tenantKeyOf(tenant), idBytes(tenant), idBytes(contextId), now],
      );
    }
    const locked = await client.query<ThreadRow>(
      `SELECT ${THREAD_COLUMNS} FROM parley_threads WHERE thread_key = $1 FOR UPDATE`,
      [th],
    );
    const row = locked.rows[0];
    const meta: ThreadMeta | undefined = row ? toThreadMeta(row, tenant, contextId) : undefined;
    const ids = [...new Set(data.messages.map((m) => m.messageId))].map(idBytes);
    const existing =
      meta && meta.messageCount > 0 && ids.length > 0
        ? (
            await client.query<ExistingRow>(
              "SELECT seq, message_id, digest, payload FROM parley_messages WHERE thread_key = $1 AND message_id = ANY($2)",
              [th, ids],
            )
          ).rows.map((r) => ({
            sequence: Number(r.seq),
            messageId: idText(r.message_id, "messageId"),
            digest: new Uint8Array(r.digest),
            payload: new Uint8Array(r.payload),
          }))
        : [];
    const added: { sequence: number; digest: Uint8Array; message: ImportedMessage }[] = [];
    const matched = new Set<number>();
    let skipped = 0;
    let sequence = meta?.lastSequence ?? 0;
    for (const m of data.messages) {
      const digest = sha256(m.payload);
      const same =
        existing.find((e) => e.messageId === m.messageId && bytesEqual(e.payload, m.payload))?.sequence ??
        added.find((a) => a.message.messageId === m.messageId && bytesEqual(a.message.payload, m.payload))?.sequence;
      if (same !== undefined) {
        skipped += 1;
        matched.add(same);
        continue;
      }
      sequence += 1;
      added.push({ sequence, digest, message: m });
    }
    const foreign = meta ? meta.messageCount - [...matched].filter((s) => s <= meta.lastSequence).length : 0;
    if (data.mode === "empty" && foreign > 0 && added.length > 0) throw notEmpty(contextId, foreign);

    const newTasks: TaskRecord[] = [];
    if (data.tasks.length > 0) {
      const stored = await client.query<{ task_id: Buffer; context_id: Buffer }>(
        "SELECT task_id, context_id FROM parley_tasks WHERE task_key = ANY($1) FOR UPDATE",
        [data.tasks.map((t) => taskKeyOf(tenant, t.taskId))],
      );
      const owners = new Map(stored.rows.map((r) => [idText(r.task_id, "taskId"), idText(r.context_id, "contextId")]));
      for (const task of data.tasks) {
        const owner = owners.get(task.taskId);
        if (owner === undefined) newTasks.push(task);
        else if (owner !== contextId) throw foreignTask(task.taskId, owner);
      }
    }
    let next = meta;
    if (added.length > 0) {
      await client.query(
        `INSERT INTO parley_messages (thread_key, seq, message_id, digest, provenance, task_id, payload, created_at)
         SELECT $1, * FROM unnest($2::bigint[], $3::bytea[], $4::bytea[], $5::smallint[], $6::bytea[], $7::bytea[], $8::bigint[])`,
        [
          th,
          added.map((a) => a.sequence),
          added.map((a) => idBytes(a.message.messageId)),
          added.map((a) => asBuffer(a.digest)),
          added.map((a) => provenanceCodes[a.message.provenance]),
          added.map((a) => (a.message.taskId === undefined ? null : idBytes(a.message.taskId))),
          added.map((a) => asBuffer(a.message.payload)),
          added.map((a) => a.message.createdAt),
        ],
      );
      // The thread's own times are the import's: an imported thread was active now (retention counts from here).
      const updated = await client.query<ThreadRow>(
        `UPDATE parley_threads SET last_seq = $2, message_count = message_count + $3, updated_at = GREATEST(updated_at, $4)
         WHERE thread_key = $1 RETURNING ${THREAD_COLUMNS}`,
        [th, sequence, added.length, now],
      );
      next = toThreadMeta(updated.rows[0]!, tenant, contextId);
    }
    for (const task of newTasks) await client.query({ ...TASK_UPSERT, values: taskParams(task) });
    const result = {
      added: added.length,
      skipped,
      tasksAdded: newTasks.length,
      tasksSkipped: data.tasks.length - newTasks.length,
    };
    // A row inserted above for a thread that got no message is rolled back with nothing else to keep.
    return next && next.messageCount > 0 ? { ...result, thread: next } : result;
  });
}
