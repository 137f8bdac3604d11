// Deleting one thread with everything of it in the PostgreSQL backend, inside the caller's transaction: shared by
// DeleteThread (pg-thread-deletes.ts) and retention (pg-retention.ts), so both remove the same set.
import type pg from "pg";

const PURGE_TASKS_SQL = `
  WITH t AS (DELETE FROM parley_tasks WHERE thread_key = $1 RETURNING task_key),
       p AS (DELETE FROM parley_push_configs WHERE task_key IN (SELECT task_key FROM t)),
       e AS (DELETE FROM parley_task_events WHERE task_key IN (SELECT task_key FROM t))
  SELECT count(*)::int AS tasks FROM t`;

// A conversation goes with either of its threads; its events go with it (ON DELETE CASCADE).
const PURGE_CONVERSATIONS_SQL = `
  WITH c AS (DELETE FROM parley_conversations WHERE requester_thread = $1 OR target_thread = $1 RETURNING 1)
  SELECT count(*)::int AS conversations FROM c`;

// A released lease keeps its row so its fencing token never goes back (pg-leases.ts); what it kept of the
// thread's ids is cleared. The next grant writes the ids again.
const SCRUB_LEASE_SQL = `
  UPDATE parley_context_leases SET tenant = ''::bytea, context_id = ''::bytea, task_id = ''::bytea, holder = '',
    prev_task_id = NULL, prev_token = NULL, prev_open = false, cancel_requested = false
  WHERE thread_key = $1 AND expires_at = '-infinity'::timestamptz`;

/** The lease row FOR UPDATE: true while a task holds it, or held it and was never ended (busy). */
export async function leaseOpen(client: pg.PoolClient, th: Buffer): Promise<boolean> {
  const lease = await client.query<{ open: boolean }>(
    "SELECT expires_at > '-infinity'::timestamptz AS open FROM parley_context_leases WHERE thread_key = $1 FOR UPDATE",
    [th],
  );
  return lease.rows[0]?.open === true;
}

/**
 * Deletes the thread's tasks (with push configs and event logs), conversations, messages (ON DELETE CASCADE)
 * and row, and clears its released lease. The caller holds the lease row (leaseOpen) and the thread row.
 */
export async function purgeThreadInTx(
  client: pg.PoolClient,
  th: Buffer,
): Promise<{ readonly tasks: number; readonly conversations: number }> {
  const tasks = await client.query<{ tasks: number }>(PURGE_TASKS_SQL, [th]);
  const conversations = await client.query<{ conversations: number }>(PURGE_CONVERSATIONS_SQL, [th]);
  await client.query("DELETE FROM parley_threads WHERE thread_key = $1", [th]);
  await client.query(SCRUB_LEASE_SQL, [th]);
  return { tasks: tasks.rows[0]?.tasks ?? 0, conversations: conversations.rows[0]?.conversations ?? 0 };
}
