import type pg from "pg";

/** A schema step; applied once, in order, each in its own transaction. */
export interface Migration {
  readonly version: number;
  readonly name: string;
  readonly sql: string;
}

// Ids are stored as their UTF-8 bytes (bytea), not text: ids may hold NUL,
// which PostgreSQL text cannot, and bytea compares bytewise, which gives the
// same order as the LevelDB indexes.
export const migrations: readonly Migration[] = [
  {
    version: 1,
    name: "threads, messages, tasks and push configs",
    sql: `
      CREATE TABLE parley_threads (
        thread_key    bytea PRIMARY KEY,
        tenant_key    bytea NOT NULL,
        tenant        bytea NOT NULL,
        context_id    bytea NOT NULL,
        last_seq      bigint NOT NULL,
        message_count bigint NOT NULL,
        created_at    bigint NOT NULL,
        updated_at    bigint NOT NULL
      );
      CREATE INDEX parley_threads_by_tenant ON parley_threads (tenant_key, updated_at DESC, thread_key);
      CREATE INDEX parley_threads_by_updated ON parley_threads (updated_at);
      CREATE TABLE parley_messages (
        thread_key bytea NOT NULL REFERENCES parley_threads ON DELETE CASCADE,
        seq        bigint NOT NULL,
        message_id bytea NOT NULL,
        digest     bytea NOT NULL,
        provenance smallint NOT NULL,
        task_id    bytea,
        payload    bytea NOT NULL,
        created_at bigint NOT NULL,
        PRIMARY KEY (thread_key, seq),
        UNIQUE (thread_key, message_id, digest)
      );
      CREATE TABLE parley_tasks (
        task_key   bytea PRIMARY KEY,
        tenant_key bytea NOT NULL,
        thread_key bytea NOT NULL,
        tenant     bytea NOT NULL,
        task_id    bytea NOT NULL,
        context_id bytea NOT NULL,
        state      integer NOT NULL,
        updated_at bigint NOT NULL,
        payload    bytea NOT NULL
      );
      CREATE INDEX parley_tasks_by_tenant ON parley_tasks (tenant_key, updated_at DESC, task_id);
      CREATE INDEX parley_tasks_by_thread ON parley_tasks (thread_key, updated_at DESC, task_id);
      CREATE INDEX parley_tasks_unfinished ON parley_tasks (task_key) WHERE state NOT IN (3, 4, 5, 7);
      CREATE TABLE parley_push_configs (
        task_key   bytea NOT NULL,
        config_key bytea NOT NULL,
        tenant     bytea NOT NULL,
        task_id    bytea NOT NULL,
        config_id  bytea NOT NULL,
        payload    bytea NOT NULL,
        PRIMARY KEY (task_key, config_key)
      );`,
  },
  {
    version: 2,
    name: "context leases and task event logs",
    sql: `
      CREATE TABLE parley_context_leases (
        thread_key       bytea PRIMARY KEY,
        tenant           bytea NOT NULL,
        context_id       bytea NOT NULL,
        task_id          bytea NOT NULL,
        holder           text NOT NULL,
        token            bigint NOT NULL,
        expires_at       timestamptz NOT NULL,
        cancel_requested boolean NOT NULL DEFAULT false,
        prev_task_id     bytea,
        prev_token       bigint,
        prev_open        boolean NOT NULL DEFAULT false
      );
      CREATE INDEX parley_context_leases_open ON parley_context_leases (expires_at)
        WHERE expires_at > '-infinity'::timestamptz;
      CREATE TABLE parley_task_events (
        task_key   bytea NOT NULL,
        seq        bigint NOT NULL,
        payload    bytea NOT NULL,
        final      boolean NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (task_key, seq)
      );`,
  },
  {
    version: 3,
    name: "who follows a context's task events",
    // Until when some replica follows a task of this context through the event log: an event append sends its
    // NOTIFY only while this lies ahead, so a turn nobody follows costs no notification. It lives on the lease
    // row, which every append already holds FOR SHARE: a follower's UPDATE of it is either committed before an
    // append locks the row (the append sees it) or waits for the append (the follower's next read sees the events).
    sql: `ALTER TABLE parley_context_leases ADD COLUMN watched_until timestamptz NOT NULL DEFAULT '-infinity'`,
  },
  {
    version: 4,
    name: "conversations (sessions) and their events",
    // A conversation belongs to two threads (requester and target) and is deleted with either of them.
    sql: `
      CREATE TABLE parley_conversations (
        conversation_key  bytea PRIMARY KEY,
        tenant_key        bytea NOT NULL,
        tenant            bytea NOT NULL,
        conversation_id   bytea NOT NULL,
        state             integer NOT NULL,
        created_at        bigint NOT NULL,
        updated_at        bigint NOT NULL,
        requester_agent   bytea NOT NULL,
        target_agent      bytea NOT NULL,
        requester_context bytea NOT NULL,
        target_context    bytea NOT NULL,
        requester_thread  bytea NOT NULL,
        target_thread     bytea NOT NULL,
        event_count       bigint NOT NULL,
        payload           bytea NOT NULL
      );
      CREATE INDEX parley_conversations_by_tenant ON parley_conversations (tenant_key, created_at DESC, conversation_key);
      CREATE INDEX parley_conversations_by_requester ON parley_conversations (requester_thread);
      CREATE INDEX parley_conversations_by_target ON parley_conversations (target_thread);
      CREATE INDEX parley_conversations_running ON parley_conversations (created_at) WHERE state = 1;
      CREATE TABLE parley_conversation_events (
        conversation_key bytea NOT NULL REFERENCES parley_conversations ON DELETE CASCADE,
        seq              bigint NOT NULL,
        payload          bytea NOT NULL,
        PRIMARY KEY (conversation_key, seq)
      );`,
  },
];

/**
 * Brings the schema to the newest version. Each migration runs in one
 * transaction that first takes a transaction-scoped advisory lock, so
 * replicas starting together apply each step exactly once; the lock ends with
 * the transaction, so it can never be stranded on a pooled connection.
 */
export async function migrate(pool: pg.Pool, steps: readonly Migration[] = migrations): Promise<number[]> {
  const applied: number[] = [];
  for (const step of steps) {
    const client = await pool.connect();
    try {
      await client.query("BEGIN");
      await client.query("SELECT pg_advisory_xact_lock(hashtextextended('parley_migrations', 0))");
      await client.query(
        `CREATE TABLE IF NOT EXISTS parley_migrations (
           version    integer PRIMARY KEY,
           name       text NOT NULL,
           applied_at timestamptz NOT NULL DEFAULT now())`,
      );
      const done = await client.query("SELECT 1 FROM parley_migrations WHERE version = $1", [step.version]);
      if (done.rowCount === 0) {
        await client.query(step.sql);
        await client.query("INSERT INTO parley_migrations (version, name) VALUES ($1, $2)", [step.version, step.name]);
        applied.push(step.version);
      }
      await client.query("COMMIT");
    } catch (cause) {
      await client.query("ROLLBACK").catch(() => {});
      throw new Error(`PostgreSQL migration ${step.version} (${step.name}) failed: ${(cause as Error).message}`, {
        cause,
      });
    } finally {
      client.release();
    }
  }
  return applied;
}
