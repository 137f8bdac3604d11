// Transactions and fence checks of the PostgreSQL backend's writes.
import type pg from "pg";
import { fencedError } from "../core/fences.js";
import type { Fence } from "../replica-types.js";
import { isDatabaseUnavailable } from "./pg-errors.js";
import { threadKeyOf } from "./pg-keys.js";
import type { PgPool } from "./pg-pipeline.js";

/** Runs `work` in one transaction on one client: pool.query could run each statement on another connection. */
export async function transaction<T>(pool: PgPool, work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  // A connection that failed, timed out or could not roll back is destroyed, not given back: a statement
  // cut by query_timeout may still be running on it, and the next borrower would queue behind it.
  let broken: Error | undefined;
  try {
    await client.query("BEGIN");
    const result = await work(client);
    await client.query("COMMIT");
    return result;
  } catch (error) {
    if (isDatabaseUnavailable(error)) broken = error as Error;
    await client.query("ROLLBACK").catch((rollbackError: Error) => {
      broken ??= rollbackError;
    });
    throw error;
  } finally {
    client.release(broken);
  }
}

// Holding the lease row FOR SHARE until commit makes a takeover (an UPDATE of
// that row) wait for this write, so a write is either before the takeover or refused.
const FENCE_SQL =
  "SELECT 1 FROM parley_context_leases WHERE thread_key = $1 AND token = $2 AND expires_at > now() FOR SHARE";

/**
 * The fence check as a CTE named `name` of a single-statement write: a row when `token` is the live lease of
 * the context `threadKey`, held FOR SHARE until the statement commits. The write's other CTEs run only
 * `WHERE EXISTS (SELECT 1 FROM name)`, so a stale fence writes nothing, in the same round trip.
 */
export function fenceCte(name: string, threadKey: string, token: string, columns = "1"): string {
  return `${name} AS (SELECT ${columns} FROM parley_context_leases
    WHERE thread_key = ${threadKey} AND token = ${token} AND expires_at > now() FOR SHARE)`;
}

/** Refuses (FENCED) unless the fence is the live lease of its context, and holds that until the commit. */
export async function checkFenceInTx(client: pg.PoolClient, fence: Fence): Promise<void> {
  const held = await client.query(FENCE_SQL, [threadKeyOf(fence.key.tenant, fence.key.contextId), fence.token]);
  if (held.rowCount === 0) throw fencedError(fence);
}

export function isUniqueViolation(error: unknown): boolean {
  return (error as { code?: unknown })?.code === "23505";
}
