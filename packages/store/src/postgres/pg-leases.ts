import { checkId } from "../core/ids.js";
import { checkTtl } from "../core/lease-checks.js";
import type { ContextLeases, ExpiredLease, LeaseGrant, LeaseHolder } from "../replica-types.js";
import { StoreError, type ThreadKey } from "../types.js";
import { idBytes, idText, threadKeyOf } from "./pg-keys.js";
import { controlChannel, type PgListener } from "./pg-listener.js";
import type { PgPool } from "./pg-pipeline.js";

export interface PgLeasesOptions {
  readonly pool: PgPool;
  readonly listener: PgListener;
  /** Names this replica in lease rows, for operators reading the table. */
  readonly holder: string;
  readonly onError?: (error: Error) => void;
}

const seconds = (ms: number) => ms / 1000;

/**
 * Context leases as rows with an expiry judged by the database clock and a
 * fencing token that grows with every grant. A released lease keeps its row
 * (expires_at = -infinity) so the token never goes back (a thread's delete clears its ids; a grant writes them).
 */
export function createPgLeases(options: PgLeasesOptions): ContextLeases {
  const { pool, listener, holder } = options;
  const handlers = new Set<(key: ThreadKey, taskId: string) => void>();
  let closed = false;
  const open = (name: string) => {
    if (closed) throw new StoreError("CLOSED", `${name} called after the PostgreSQL leases were closed`);
  };
  const checkKey = (key: ThreadKey) => {
    checkId("tenant", key?.tenant);
    checkId("contextId", key?.contextId);
    return threadKeyOf(key.tenant, key.contextId);
  };

  // The control channel carries "<thread key hex>:<token>"; the row says which task that is.
  const unlisten = listener.on(controlChannel, (payload) => {
    const [hex, token] = payload.split(":");
    if (!hex || !token || handlers.size === 0) return;
    pool
      .query<{ tenant: Buffer; context_id: Buffer; task_id: Buffer }>(
        "SELECT tenant, context_id, task_id FROM parley_context_leases WHERE thread_key = $1 AND token = $2",
        [Buffer.from(hex, "hex"), token],
      )
      .then(({ rows }) => {
        const row = rows[0];
        if (!row) return;
        const key = { tenant: idText(row.tenant, "tenant"), contextId: idText(row.context_id, "contextId") };
        const taskId = idText(row.task_id, "taskId");
        for (const handler of handlers) handler(key, taskId);
      })
      .catch((error: Error) => options.onError?.(error));
  });

  return {
    async tryAcquire(key, taskId, ttlMs): Promise<LeaseGrant | null> {
      open("tryAcquire");
      const th = checkKey(key);
      checkId("taskId", taskId);
      checkTtl(ttlMs);
      // A holder must hear cancels for its lease: with LISTEN not yet active, a
      // NOTIFY sent right after the grant would be lost until the next renewal.
      await listener.ready();
      // One statement: a row back = granted, none = busy. The prev_* columns
      // capture, in the same row update, the holder an expired grant replaced.
      const { rows } = await pool.query<{
        token: string;
        prev_task_id: Buffer | null;
        prev_token: string | null;
        prev_open: boolean;
      }>(
        `INSERT INTO parley_context_leases AS l (thread_key, tenant, context_id, task_id, holder, token, expires_at)
         VALUES ($1, $2, $3, $4, $5, 1, now() + make_interval(secs => $6))
         ON CONFLICT (thread_key) DO UPDATE SET
           tenant = EXCLUDED.tenant, context_id = EXCLUDED.context_id,
           task_id = EXCLUDED.task_id, holder = EXCLUDED.holder, token = l.token + 1,
           expires_at = EXCLUDED.expires_at, cancel_requested = false,
           prev_task_id = l.task_id, prev_token = l.token, prev_open = l.expires_at > '-infinity'::timestamptz
         WHERE l.expires_at <= now()
         RETURNING token, prev_task_id, prev_token, prev_open`,
        [th, idBytes(key.tenant), idBytes(key.contextId), idBytes(taskId), holder, seconds(ttlMs)],
      );
      const row = rows[0];
      if (!row) return null;
      const grant = { key: { tenant: key.tenant, contextId: key.contextId }, taskId, token: Number(row.token) };
      if (row.prev_open && row.prev_task_id !== null && row.prev_token !== null) {
        return { ...grant, orphan: { taskId: idText(row.prev_task_id, "taskId"), token: Number(row.prev_token) } };
      }
      return grant;
    },

    async renew(fence, ttlMs) {
      open("renew");
      checkTtl(ttlMs);
      // Also a lease that lapsed (a database outage kept its holder from renewing) as long as nobody acquired
      // or took it over since: either bumps the token, so no newer fence exists. Released leases are -infinity.
      const { rows } = await pool.query<{ cancel_requested: boolean }>(
        `UPDATE parley_context_leases SET expires_at = now() + make_interval(secs => $3)
         WHERE thread_key = $1 AND token = $2 AND expires_at > '-infinity'::timestamptz
         RETURNING cancel_requested`,
        [checkKey(fence.key), fence.token, seconds(ttlMs)],
      );
      const row = rows[0];
      return row ? { held: true, cancelRequested: row.cancel_requested } : { held: false, cancelRequested: false };
    },

    async release(fence) {
      open("release");
      const result = await pool.query(
        `UPDATE parley_context_leases SET expires_at = '-infinity'::timestamptz, cancel_requested = false
         WHERE thread_key = $1 AND token = $2 AND expires_at > now()`,
        [checkKey(fence.key), fence.token],
      );
      return (result.rowCount ?? 0) > 0;
    },

    async holder(key): Promise<LeaseHolder | undefined> {
      open("holder");
      const { rows } = await pool.query<{ task_id: Buffer; token: string }>(
        "SELECT task_id, token FROM parley_context_leases WHERE thread_key = $1 AND expires_at > now()",
        [checkKey(key)],
      );
      const row = rows[0];
      return row ? { taskId: idText(row.task_id, "taskId"), token: Number(row.token) } : undefined;
    },

    async expired(limit): Promise<ExpiredLease[]> {
      open("expired");
      if (!Number.isSafeInteger(limit) || limit < 1)
        throw new RangeError(`limit must be an integer >= 1, got ${limit}`);
      const { rows } = await pool.query<{ tenant: Buffer; context_id: Buffer; task_id: Buffer; token: string }>(
        `SELECT tenant, context_id, task_id, token FROM parley_context_leases
         WHERE expires_at <= now() AND expires_at > '-infinity'::timestamptz
         ORDER BY expires_at LIMIT $1`,
        [limit],
      );
      return rows.map((r) => ({
        key: { tenant: idText(r.tenant, "tenant"), contextId: idText(r.context_id, "contextId") },
        taskId: idText(r.task_id, "taskId"),
        token: Number(r.token),
      }));
    },

    async takeOver(lease, ttlMs) {
      open("takeOver");
      checkTtl(ttlMs);
      const { rows } = await pool.query<{ token: string }>(
        `UPDATE parley_context_leases SET token = token + 1, holder = $3,
           expires_at = now() + make_interval(secs => $4), cancel_requested = false
         WHERE thread_key = $1 AND token = $2 AND expires_at <= now() AND expires_at > '-infinity'::timestamptz
         RETURNING token`,
        [checkKey(lease.key), lease.token, holder, seconds(ttlMs)],
      );
      const row = rows[0];
      return row ? { key: lease.key, taskId: lease.taskId, token: Number(row.token) } : null;
    },

    async requestCancel(key, taskId) {
      open("requestCancel");
      const th = checkKey(key);
      checkId("taskId", taskId);
      // Recorded in the row (the holder sees it on its next renewal even if it
      // misses the notification) and announced in the same transaction.
      const { rows } = await pool.query(
        `WITH c AS (
           UPDATE parley_context_leases SET cancel_requested = true
           WHERE thread_key = $1 AND task_id = $2 AND expires_at > now()
           RETURNING token)
         SELECT pg_notify('${controlChannel}', $3 || ':' || token) FROM c`,
        [th, idBytes(taskId), th.toString("hex")],
      );
      return rows.length > 0;
    },

    onCancel(handler) {
      handlers.add(handler);
      return () => handlers.delete(handler);
    },

    async close() {
      closed = true;
      handlers.clear();
      unlisten();
    },
  };
}
