import { checkLimit } from "../core/checks.js";
import { abortPromise, checkAfterSeq, checkEventBatch } from "../core/event-checks.js";
import { fencedError } from "../core/fences.js";
import { checkId } from "../core/ids.js";
import type { TaskEvent, TaskEventLog } from "../replica-types.js";
import { StoreError } from "../types.js";
import { asBytes, taskKeyOf, threadKeyOf } from "./pg-keys.js";
import { eventChannel, type PgListener } from "./pg-listener.js";
import type { PgPool } from "./pg-pipeline.js";
import { fenceCte, isUniqueViolation } from "./pg-transaction.js";

export interface PgEventLogOptions {
  readonly pool: PgPool;
  readonly listener: PgListener;
  /** The safety-net poll of a follower that heard nothing; notifications normally wake it first. */
  readonly pollMs?: number;
  /** How many events one catch-up read fetches. */
  readonly readBatch?: number;
  /** How long a follower keeps retrying reads that fail (the database is away) before its stream fails. */
  readonly readRetryMs?: number;
  /**
   * How long one "I follow this context" mark lasts; a follower renews it every third of this. Appends notify
   * only while a mark is live, so a replica that died stops costing notifications after this long.
   */
  readonly watchMs?: number;
}

interface Follower {
  version: number;
  wake: () => void;
}

interface EventRow {
  seq: string;
  payload: Buffer;
  final: boolean;
}

const toEvent = (row: EventRow): TaskEvent => ({
  seq: Number(row.seq),
  payload: asBytes(row.payload),
  final: row.final,
});

// One statement: the fence check (the lease row held FOR SHARE until commit), the insert of the batch when it
// continues the log, and the wake-up of followers, sent only while the row says a replica follows the context
// (watched_until, migration 3; the FOR SHARE lock reads the row's latest committed version). $1 thread key,
// $2 token, $3 task key, $4 the batch's payloads end to end (one binary bytea), $5 and $6 each payload's offset and
// length in it, $9 the finals, $7 the seq the log must end at now (the batch's seqs follow it, consecutive),
// $8 the notification payload. One bytea rather than a bytea[]: node-postgres sends arrays as text, so each
// payload would be hex-escaped by the replica and parsed back by the database.
function appendSql(release: boolean): string {
  return `WITH ${fenceCte("f", "$1", "$2", "watched_until")},
    ins AS (
      INSERT INTO parley_task_events (task_key, seq, payload, final)
      SELECT $3, $7::bigint + e.i, substring($4::bytea FROM e.o + 1 FOR e.n), e.final
      FROM unnest($5::integer[], $6::integer[], $9::boolean[]) WITH ORDINALITY AS e(o, n, final, i)
      WHERE EXISTS (SELECT 1 FROM f)
        AND (SELECT coalesce(max(seq), 0) FROM parley_task_events WHERE task_key = $3) = $7
      RETURNING seq),
    n AS (
      SELECT pg_notify('${eventChannel}', $8) FROM f WHERE f.watched_until > now() AND EXISTS (SELECT 1 FROM ins))${
        release
          ? `,
    rel AS (
      UPDATE parley_context_leases SET expires_at = '-infinity'::timestamptz, cancel_requested = false
      WHERE thread_key = $1 AND token = $2 AND expires_at > now() AND EXISTS (SELECT 1 FROM ins)
      RETURNING 1)`
          : ""
      }
    SELECT NOT EXISTS (SELECT 1 FROM f) AS fenced, (SELECT count(*) FROM ins) AS inserted,
      (SELECT count(*) FROM n) AS notified, ${release ? "EXISTS (SELECT 1 FROM rel)" : "false"} AS released`;
}

// A follower says it follows the task's context, for watchMs from now ($2 seconds); renewed while it follows.
const WATCH = {
  name: "parley_events_watch",
  text: `UPDATE parley_context_leases SET watched_until = greatest(watched_until, now() + make_interval(secs => $2))
    WHERE thread_key = (SELECT thread_key FROM parley_tasks WHERE task_key = $1)`,
};

const READ = {
  name: "parley_events_read",
  text: "SELECT seq, payload, final FROM parley_task_events WHERE task_key = $1 AND seq > $2 ORDER BY seq LIMIT $3",
};

const LAST_SEQ = {
  name: "parley_events_last_seq",
  text: "SELECT coalesce(max(seq), 0) AS last FROM parley_task_events WHERE task_key = $1",
};

// Two backward index scans of the primary key (task_key, seq) that stop at their first row: the last event, and
// the last final event (only the current run's rows are passed over to find it). No payload is read.
const LATEST_RUN = {
  name: "parley_events_latest_run",
  text: `SELECT
      (SELECT final FROM parley_task_events WHERE task_key = $1 ORDER BY seq DESC LIMIT 1) AS ended,
      (SELECT seq FROM parley_task_events WHERE task_key = $1 AND final ORDER BY seq DESC LIMIT 1) AS start`,
};

const APPEND = { name: "parley_events_append", text: appendSql(false) };
// The run's last batch also frees its lease (as ContextLeases.release does), in the same commit as its final event.
const APPEND_AND_RELEASE = { name: "parley_events_append_release", text: appendSql(true) };

/** A batch's payloads as one buffer with each payload's offset and length, and its finals. */
function packEvents(events: readonly TaskEvent[]): {
  blob: Buffer;
  offsets: number[];
  lengths: number[];
  finals: boolean[];
} {
  const offsets: number[] = [];
  const lengths: number[] = [];
  const finals: boolean[] = [];
  let size = 0;
  for (const e of events) {
    offsets.push(size);
    lengths.push(e.payload.byteLength);
    finals.push(e.final);
    size += e.payload.byteLength;
  }
  const blob = Buffer.allocUnsafe(size);
  for (let i = 0; i < events.length; i++) blob.set(events[i]!.payload, offsets[i]);
  return { blob, offsets, lengths, finals };
}

/**
 * Task event logs in one table. An append inserts the events, checks the
 * fence and, while some replica follows the context, sends a NOTIFY carrying
 * only "<task key hex>:<last seq>", in a single statement (one transaction).
 * Followers mark the context as followed, then treat the notification as a
 * wake-up and read the table, so a missed notification costs latency, never
 * an event.
 */
export function createPgEventLog(options: PgEventLogOptions): TaskEventLog {
  const { pool, listener } = options;
  const pollMs = options.pollMs ?? 1000;
  const readBatch = options.readBatch ?? 256;
  const readRetryMs = options.readRetryMs ?? 30_000;
  const watchMs = options.watchMs ?? 30_000;
  const followers = new Map<string, Set<Follower>>();
  let closed = false;
  let closeAll = () => {};
  const closing = new Promise<void>((resolve) => {
    closeAll = resolve;
  });
  const open = (name: string) => {
    if (closed) throw new StoreError("CLOSED", `${name} called after the PostgreSQL event log was closed`);
  };
  const wakeAll = (set: Iterable<Follower> | undefined) => {
    for (const f of set ?? []) {
      f.version++;
      f.wake();
    }
  };

  const unlisten = listener.on(eventChannel, (payload) => {
    const colon = payload.indexOf(":");
    wakeAll(followers.get(colon < 0 ? payload : payload.slice(0, colon)));
  });
  // Whatever was notified while the connection was down is gone: every follower re-reads.
  const unreconnect = listener.onReconnect(() => {
    for (const set of followers.values()) wakeAll(set);
  });

  async function read(taskKey: Buffer, afterSeq: number, limit: number): Promise<TaskEvent[]> {
    const { rows } = await pool.query<EventRow>({ ...READ, values: [taskKey, afterSeq, limit] });
    return rows.map(toEvent);
  }

  async function watch(taskKey: Buffer): Promise<void> {
    await pool.query({ ...WATCH, values: [taskKey, watchMs / 1000] });
  }

  return {
    async append(tenant, taskId, events, fence, appendOptions) {
      open("append");
      checkId("tenant", tenant);
      checkEventBatch(taskId, events, -1);
      if (fence.key.tenant !== tenant) throw new RangeError("the fence belongs to another tenant than the task");
      const taskKey = taskKeyOf(tenant, taskId);
      const first = events[0]!.seq;
      const last = events[events.length - 1]!.seq;
      const endsRun = appendOptions?.endsRun === true;
      const packed = packEvents(events);
      let rows: { fenced: boolean; inserted: string; released: boolean }[];
      try {
        ({ rows } = await pool.query({
          ...(endsRun ? APPEND_AND_RELEASE : APPEND),
          values: [
            threadKeyOf(fence.key.tenant, fence.key.contextId),
            fence.token,
            taskKey,
            packed.blob,
            packed.offsets,
            packed.lengths,
            first - 1,
            `${taskKey.toString("hex")}:${last}`,
            packed.finals,
          ],
        }));
      } catch (error) {
        if (!isUniqueViolation(error)) throw error;
        rows = [{ fenced: false, inserted: "0", released: false }];
      }
      const row = rows[0]!;
      if (row.fenced) {
        throw fencedError(fence);
      }
      if (Number(row.inserted) !== events.length) {
        throw new StoreError("CORRUPT", `events of task ${taskId} must continue the log at seq ${first}; it does not`);
      }
      // Followers in this process need no notification to wake.
      wakeAll(followers.get(taskKey.toString("hex")));
      return { released: row.released };
    },

    async read(tenant, taskId, afterSeq, limit) {
      open("read");
      checkAfterSeq(afterSeq);
      checkLimit("limit", limit);
      return read(taskKeyOf(checkId("tenant", tenant), checkId("taskId", taskId)), afterSeq, limit);
    },

    async latestRun(tenant, taskId) {
      open("latestRun");
      const { rows } = await pool.query<{ ended: boolean | null; start: string | null }>({
        ...LATEST_RUN,
        values: [taskKeyOf(checkId("tenant", tenant), checkId("taskId", taskId))],
      });
      const row = rows[0]!;
      return { start: row.start === null ? 0 : Number(row.start), ended: row.ended === true };
    },

    async lastSeq(tenant, taskId) {
      open("lastSeq");
      const { rows } = await pool.query<{ last: string }>({
        ...LAST_SEQ,
        values: [taskKeyOf(checkId("tenant", tenant), checkId("taskId", taskId))],
      });
      return Number(rows[0]!.last);
    },

    startsEmpty() {
      // The append statement itself refuses seqs that do not continue the log: nothing to read first, nothing to keep.
    },

    subscribe(tenant, taskId, afterSeq, signal) {
      open("subscribe");
      const taskKey = taskKeyOf(checkId("tenant", tenant), checkId("taskId", taskId));
      const hex = taskKey.toString("hex");
      checkAfterSeq(afterSeq);
      return (async function* follow() {
        const follower: Follower = { version: 0, wake: () => {} };
        const set = followers.get(hex) ?? new Set<Follower>();
        followers.set(hex, set);
        set.add(follower);
        const abort = abortPromise(signal);
        try {
          // LISTEN first, then read: an event committed in between is either read or notified.
          await Promise.race([listener.ready(), abort.promise, closing]);
          let last = afterSeq;
          let failingSince: number | undefined;
          let watchedAt = Number.NEGATIVE_INFINITY;
          while (!signal.aborted && !closed) {
            const seen = follower.version;
            const changed = new Promise<void>((resolve) => {
              follower.wake = resolve;
            });
            let batch: TaskEvent[];
            try {
              // Marked before the read: an append that commits after the mark notifies, one before it is read.
              if (Date.now() - watchedAt > watchMs / 3) {
                const at = Date.now();
                await watch(taskKey);
                watchedAt = at;
              }
              batch = await read(taskKey, last, readBatch);
              failingSince = undefined;
            } catch (error) {
              // A database outage (a restart, a failover) is waited out: the follower re-reads once
              // PostgreSQL answers again; only an outage longer than readRetryMs ends the stream.
              failingSince ??= Date.now();
              if (Date.now() - failingSince >= readRetryMs) throw error;
              let timer: NodeJS.Timeout | undefined;
              const pause = new Promise<void>((resolve) => {
                timer = setTimeout(resolve, Math.min(pollMs, 250));
              });
              await Promise.race([pause, abort.promise, closing]);
              clearTimeout(timer);
              continue;
            }
            for (const event of batch) {
              last = event.seq;
              yield event;
              if (event.final) return;
            }
            if (batch.length === readBatch || follower.version !== seen) continue;
            let timer: NodeJS.Timeout | undefined;
            const poll = new Promise<void>((resolve) => {
              timer = setTimeout(resolve, pollMs);
            });
            await Promise.race([changed, poll, abort.promise, closing]);
            clearTimeout(timer);
          }
        } finally {
          abort.dispose();
          set.delete(follower);
          if (set.size === 0 && followers.get(hex) === set) followers.delete(hex);
        }
      })();
    },

    async sweep(olderThanMs) {
      open("sweep");
      if (!Number.isSafeInteger(olderThanMs) || olderThanMs < 0) {
        throw new RangeError(`olderThanMs must be a non-negative integer, got ${olderThanMs}`);
      }
      const { rows } = await pool.query<{ n: string }>(
        `WITH last AS (
           SELECT DISTINCT ON (task_key) task_key, final, created_at
           FROM parley_task_events ORDER BY task_key, seq DESC),
         done AS (
           SELECT task_key FROM last WHERE final AND created_at < now() - make_interval(secs => $1)),
         gone AS (
           DELETE FROM parley_task_events e USING done WHERE e.task_key = done.task_key RETURNING e.task_key)
         SELECT count(DISTINCT task_key) AS n FROM gone`,
        [olderThanMs / 1000],
      );
      return Number(rows[0]!.n);
    },

    async close() {
      closed = true;
      closeAll();
      unlisten();
      unreconnect();
    },
  };
}
