/*
 * Retention in the PostgreSQL backend: deleting idle threads with their messages, tasks, push configs, task
 * event logs and conversations (the purge DeleteThread uses, pg-thread-purge.ts), one transaction per thread (a crash rolls it back whole, and the next pass does it again).
 *
 * Which threads: tenants are found by a loose index scan of parley_threads_by_tenant (one probe per tenant), then
 * each tenant's oldest threads up to its cutoff, from the same index, so the live threads are never read.
 *
 * Never a running task: the transaction locks the context's lease row first and leaves the thread alone while a
 * lease is open (held, or expired and not yet ended by the sweeper). A replica that acquires the lease meanwhile
 * waits for this commit and then starts a new thread; an append that landed first makes the thread active again,
 * which the locked re-read of the thread row sees.
 */

import { toHex } from "../core/bytes.js";
import { checkLimit, checkTime } from "../core/checks.js";
import type { RetentionQuery, RetentionResult, ThreadRetention } from "../types.js";
import { idText, tenantKeyOf } from "./pg-keys.js";
import type { PgPool } from "./pg-pipeline.js";
import { leaseOpen, purgeThreadInTx } from "./pg-thread-purge.js";
import { transaction } from "./pg-transaction.js";

/** Candidate threads read per query. */
const CHUNK = 100;

const TENANTS_SQL = `
  WITH RECURSIVE t(k) AS (
    (SELECT tenant_key FROM parley_threads ORDER BY tenant_key LIMIT 1)
    UNION ALL
    SELECT (SELECT tenant_key FROM parley_threads WHERE tenant_key > t.k ORDER BY tenant_key LIMIT 1)
    FROM t WHERE t.k IS NOT NULL
  )
  SELECT k FROM t WHERE k IS NOT NULL`;

const CANDIDATES_SQL = `
  SELECT thread_key, updated_at FROM parley_threads
  WHERE tenant_key = $1 AND updated_at < $2 AND (updated_at, thread_key) > ($3, $4)
  ORDER BY updated_at, thread_key LIMIT $5`;

type Outcome =
  | { readonly kind: "purged"; readonly messages: number; readonly tasks: number }
  | { readonly kind: "kept" | "busy" };

async function purgeOne(pool: PgPool, th: Buffer, cutoff: number, query: RetentionQuery): Promise<Outcome> {
  return transaction(pool, async (client) => {
    if (await leaseOpen(client, th)) return { kind: "busy" } as const;
    const { rows } = await client.query<{
      tenant: Buffer;
      context_id: Buffer;
      updated_at: string;
      message_count: string;
    }>("SELECT tenant, context_id, updated_at, message_count FROM parley_threads WHERE thread_key = $1 FOR UPDATE", [
      th,
    ]);
    const row = rows[0];
    if (!row || Number(row.updated_at) >= cutoff) return { kind: "kept" } as const;
    const key = { tenant: idText(row.tenant, "tenant"), contextId: idText(row.context_id, "contextId") };
    if (query.busy?.(key)) return { kind: "busy" } as const;
    const { tasks } = await purgeThreadInTx(client, th);
    return { kind: "purged", messages: Number(row.message_count), tasks } as const;
  });
}

export function createPgRetention(options: { readonly pool: PgPool; readonly open: (name: string) => void }) {
  const { pool } = options;
  const retention: ThreadRetention = {
    async purgeIdleThreads(query: RetentionQuery): Promise<RetentionResult> {
      options.open("purgeIdleThreads");
      const limit = checkLimit("limit", query?.limit);
      if (query.idleBefore !== undefined) checkTime("idleBefore", query.idleBefore);
      const cutoffs = new Map<string, number | undefined>();
      for (const [tenant, cutoff] of query.tenants ?? []) {
        if (cutoff !== undefined) checkTime(`the cutoff of tenant ${JSON.stringify(tenant)}`, cutoff);
        cutoffs.set(toHex(tenantKeyOf(tenant)), cutoff);
      }
      const result = { threads: 0, messages: 0, tasks: 0, skipped: 0, more: false };
      const tenants = await pool.query<{ k: Buffer }>(TENANTS_SQL);
      for (const { k: tenantKey } of tenants.rows) {
        const hex = toHex(tenantKey);
        const cutoff = cutoffs.has(hex) ? cutoffs.get(hex) : query.idleBefore;
        if (cutoff === undefined || cutoff <= 0) continue;
        let after: [number, Buffer] = [-1, Buffer.alloc(0)];
        for (;;) {
          const { rows } = await pool.query<{ thread_key: Buffer; updated_at: string }>(CANDIDATES_SQL, [
            tenantKey,
            cutoff,
            after[0],
            after[1],
            CHUNK,
          ]);
          if (rows.length === 0) break;
          const last = rows[rows.length - 1]!;
          after = [Number(last.updated_at), last.thread_key];
          for (const row of rows) {
            if (result.threads >= limit) {
              result.more = true;
              return result;
            }
            const outcome = await purgeOne(pool, row.thread_key, cutoff, query);
            if (outcome.kind === "busy") result.skipped += 1;
            else if (outcome.kind === "purged") {
              result.threads += 1;
              result.messages += outcome.messages;
              result.tasks += outcome.tasks;
            }
          }
        }
      }
      return result;
    },
  };
  return retention;
}
