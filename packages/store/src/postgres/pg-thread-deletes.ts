// Deleting threads in the PostgreSQL backend: messages go with the row (ON DELETE CASCADE); tasks keep their own
// lifetime, as in LevelDB.
import { checkThreadKey, checkTime } from "../core/checks.js";
import type { ThreadKey } from "../types.js";
import type { PgContext } from "./pg-context.js";
import { threadKeyOf } from "./pg-keys.js";

export async function deleteThread(
  ctx: PgContext,
  key: ThreadKey,
): Promise<{ readonly deleted: boolean; readonly messageCount: number }> {
  const { tenant, contextId } = checkThreadKey(key);
  const { rows } = await ctx.pool.query<{ message_count: string }>(
    "DELETE FROM parley_threads WHERE thread_key = $1 RETURNING message_count",
    [threadKeyOf(tenant, contextId)],
  );
  const row = rows[0];
  if (!row) return { deleted: false, messageCount: 0 };
  return { deleted: true, messageCount: Number(row.message_count) };
}

export async function sweepThreads(ctx: PgContext, olderThanMs: number): Promise<number> {
  checkTime("olderThanMs", olderThanMs);
  const cutoff = ctx.now() - olderThanMs;
  if (cutoff <= 0) return 0;
  const result = await ctx.pool.query("DELETE FROM parley_threads WHERE updated_at < $1", [cutoff]);
  return result.rowCount ?? 0;
}

export const threadDeletes = { deleteThread, sweepThreads };
