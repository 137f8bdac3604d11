// Deleting threads in the PostgreSQL backend: one transaction removes everything of the thread (pg-thread-purge.ts),
// so a crash rolls the delete back whole and nothing of it is ever half-visible, on any replica.
import { checkThreadKey, checkTime } from "../core/checks.js";
import { type DeleteThreadOptions, type DeleteThreadResult, StoreError, type ThreadKey } from "../types.js";
import type { PgContext } from "./pg-context.js";
import { threadKeyOf } from "./pg-keys.js";
import { leaseOpen, purgeThreadInTx } from "./pg-thread-purge.js";
import { transaction } from "./pg-transaction.js";

const HOLDS_ANY_SQL = `
  SELECT EXISTS (SELECT 1 FROM parley_tasks WHERE thread_key = $1)
      OR EXISTS (SELECT 1 FROM parley_conversations WHERE requester_thread = $1 OR target_thread = $1) AS any`;

export async function deleteThread(
  ctx: PgContext,
  key: ThreadKey,
  options: DeleteThreadOptions = {},
): Promise<DeleteThreadResult> {
  const { tenant, contextId } = checkThreadKey(key);
  const th = threadKeyOf(tenant, contextId);
  return transaction(ctx.pool, async (client) => {
    // The lease row first, as retention does: a replica acquiring it meanwhile waits for this commit.
    const busy = await leaseOpen(client, th);
    const { rows } = await client.query<{ message_count: string }>(
      "SELECT message_count FROM parley_threads WHERE thread_key = $1 FOR UPDATE",
      [th],
    );
    const row = rows[0];
    if (!row && !(await client.query<{ any: boolean }>(HOLDS_ANY_SQL, [th])).rows[0]?.any) {
      return { deleted: false, messageCount: 0, tasks: 0, conversations: 0 };
    }
    if (busy || options?.busy?.(key)) {
      throw new StoreError(
        "BUSY",
        `context ${JSON.stringify(contextId)} is busy: a task holds its lease; the thread was not deleted`,
      );
    }
    const { tasks, conversations } = await purgeThreadInTx(client, th);
    return { deleted: true, messageCount: row ? Number(row.message_count) : 0, tasks, conversations };
  });
}

/** Deletes threads idle for longer than `olderThanMs`, each with everything of it (not used by the server). */
export async function sweepThreads(ctx: PgContext, olderThanMs: number): Promise<number> {
  checkTime("olderThanMs", olderThanMs);
  const cutoff = ctx.now() - olderThanMs;
  if (cutoff <= 0) return 0;
  const { rows } = await ctx.pool.query<{ thread_key: Buffer }>(
    "SELECT thread_key FROM parley_threads WHERE updated_at < $1",
    [cutoff],
  );
  let deleted = 0;
  for (const { thread_key: th } of rows) {
    const gone = await transaction(ctx.pool, async (client) => {
      if (await leaseOpen(client, th)) return false;
      const locked = await client.query(
        "SELECT 1 FROM parley_threads WHERE thread_key = $1 AND updated_at < $2 FOR UPDATE",
        [th, cutoff],
      );
      if (locked.rowCount === 0) return false;
      await purgeThreadInTx(client, th);
      return true;
    });
    if (gone) deleted += 1;
  }
  return deleted;
}

export const threadDeletes = { deleteThread, sweepThreads };
