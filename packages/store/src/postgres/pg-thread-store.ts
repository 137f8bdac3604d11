import type pg from "pg";
import { bytesEqual, sha256, u64 } from "../bytes.js";
import {
  checkLimit,
  checkPayload,
  checkProvenance,
  checkTask,
  checkTime,
  MAX_TIME,
  provenanceByCode,
  provenanceCodes,
} from "../checks.js";
import { checkId } from "../ids.js";
import {
  type AppendInput,
  type AppendResult,
  type Fence,
  type FencedThreadStore,
  type ListTasksQuery,
  type MessagePage,
  type PageOrder,
  type PushConfigRecord,
  type StoredMessage,
  StoreError,
  type TaskPage,
  type TaskRecord,
  type ThreadKey,
  type ThreadMeta,
  type ThreadPage,
  type WriteOptions,
} from "../types.js";
import {
  asBuffer,
  asBytes,
  configKeyOf,
  cursorKinds,
  cursorTag,
  decodeCursor,
  encodeCursor,
  idBytes,
  idText,
  taskKeyOf,
  tenantKeyOf,
  threadKeyOf,
} from "./keys.js";

function checkFenceFor(fence: Fence | undefined, tenant: string, contextId: string): void {
  if (fence && (fence.key.tenant !== tenant || fence.key.contextId !== contextId)) {
    throw new RangeError(
      `the fence of context ${JSON.stringify(fence.key.contextId)} cannot guard a write to context ${JSON.stringify(contextId)}`,
    );
  }
}

interface MessageRow {
  seq: string;
  message_id: Buffer;
  provenance: number;
  task_id: Buffer | null;
  payload: Buffer;
  created_at: string;
}

function toMessage(row: MessageRow): StoredMessage {
  const provenance = provenanceByCode.get(row.provenance);
  if (!provenance) throw new StoreError("CORRUPT", `message ${row.seq} has unknown provenance ${row.provenance}`);
  const base = {
    sequence: Number(row.seq),
    messageId: idText(row.message_id, "messageId"),
    provenance,
    payload: asBytes(row.payload),
    createdAt: Number(row.created_at),
  };
  return row.task_id === null ? base : { ...base, taskId: idText(row.task_id, "taskId") };
}

interface ThreadRow {
  tenant: Buffer;
  context_id: Buffer;
  created_at: string;
  updated_at: string;
  message_count: string;
  last_seq: string;
}

function toMeta(row: ThreadRow): ThreadMeta {
  return {
    tenant: idText(row.tenant, "tenant"),
    contextId: idText(row.context_id, "contextId"),
    createdAt: Number(row.created_at),
    updatedAt: Number(row.updated_at),
    messageCount: Number(row.message_count),
    lastSequence: Number(row.last_seq),
  };
}

interface TaskRow {
  tenant: Buffer;
  task_id: Buffer;
  context_id: Buffer;
  state: number;
  updated_at: string;
  payload: Buffer;
}

function toTask(row: TaskRow): TaskRecord {
  return {
    tenant: idText(row.tenant, "tenant"),
    taskId: idText(row.task_id, "taskId"),
    contextId: idText(row.context_id, "contextId"),
    state: row.state,
    updatedAt: Number(row.updated_at),
    payload: asBytes(row.payload),
  };
}

const MESSAGE_COLUMNS = "seq, message_id, provenance, task_id, payload, created_at";
const THREAD_COLUMNS = "tenant, context_id, created_at, updated_at, message_count, last_seq";
const TASK_COLUMNS = "tenant, task_id, context_id, state, updated_at, payload";

// Holding the lease row FOR SHARE until commit makes a takeover (an UPDATE of
// that row) wait for this write, so a write is either before the takeover or refused.
const FENCE_SQL =
  "SELECT 1 FROM parley_context_leases WHERE thread_key = $1 AND token = $2 AND expires_at > now() FOR SHARE";

async function checkFenceInTx(client: pg.PoolClient, fence: Fence): Promise<void> {
  const held = await client.query(FENCE_SQL, [threadKeyOf(fence.key.tenant, fence.key.contextId), fence.token]);
  if (held.rowCount === 0) {
    throw new StoreError(
      "FENCED",
      `lease token ${fence.token} of task ${fence.taskId} is no longer the live lease of context ${JSON.stringify(fence.key.contextId)}`,
    );
  }
}

const TASK_UPSERT = `
  INSERT INTO parley_tasks (task_key, tenant_key, thread_key, tenant, task_id, context_id, state, updated_at, payload)
  VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
  ON CONFLICT (task_key) DO UPDATE SET
    thread_key = EXCLUDED.thread_key, context_id = EXCLUDED.context_id, state = EXCLUDED.state,
    updated_at = EXCLUDED.updated_at, payload = EXCLUDED.payload`;

function taskParams(task: TaskRecord): unknown[] {
  return [
    taskKeyOf(task.tenant, task.taskId),
    tenantKeyOf(task.tenant),
    threadKeyOf(task.tenant, task.contextId),
    idBytes(task.tenant),
    idBytes(task.taskId),
    idBytes(task.contextId),
    task.state,
    task.updatedAt,
    asBuffer(task.payload),
  ];
}

export interface PgThreadStoreOptions {
  readonly pool: pg.Pool;
  /** The clock for createdAt/updatedAt and sweeps; Date.now by default (lease expiry uses the database clock). */
  readonly now?: () => number;
}

/**
 * ThreadStore on PostgreSQL. Sequence numbers come from a counter column on
 * the thread row, bumped inside the append transaction: the row lock orders
 * appends to one thread and a rolled-back append gives its number back, so
 * sequences stay gapless across any number of replicas.
 */
export function createPgThreadStore(options: PgThreadStoreOptions): FencedThreadStore {
  const { pool } = options;
  const now = options.now ?? Date.now;
  let closed = false;
  const open = (name: string) => {
    if (closed) throw new StoreError("CLOSED", `${name} called after the PostgreSQL store was closed`);
  };

  async function transaction<T>(work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    // One client for the whole transaction: pool.query could run each statement on another connection.
    const client = await pool.connect();
    try {
      await client.query("BEGIN");
      const result = await work(client);
      await client.query("COMMIT");
      return result;
    } catch (error) {
      await client.query("ROLLBACK").catch(() => {});
      throw error;
    } finally {
      client.release();
    }
  }

  async function readMeta(tenant: string, contextId: string): Promise<ThreadMeta | undefined> {
    const { rows } = await pool.query<ThreadRow>(`SELECT ${THREAD_COLUMNS} FROM parley_threads WHERE thread_key = $1`, [
      threadKeyOf(tenant, contextId),
    ]);
    if (rows.length === 0) return undefined;
    const meta = toMeta(rows[0]!);
    if (meta.tenant !== tenant || meta.contextId !== contextId) {
      throw new StoreError("CORRUPT", `thread row of ${JSON.stringify(contextId)} belongs to another conversation`);
    }
    return meta;
  }

  async function findRetry(
    q: pg.PoolClient | pg.Pool,
    th: Buffer,
    input: AppendInput,
    digest: Buffer,
  ): Promise<StoredMessage | undefined> {
    const { rows } = await q.query<MessageRow>(
      `SELECT ${MESSAGE_COLUMNS} FROM parley_messages WHERE thread_key = $1 AND message_id = $2 AND digest = $3`,
      [th, idBytes(input.messageId), digest],
    );
    const row = rows[0];
    if (!row) return undefined;
    const stored = toMessage(row);
    // The digest narrows; the bytes decide, as in the LevelDB backend.
    return bytesEqual(stored.payload, input.payload) ? stored : undefined;
  }

  return {
    async append(key: ThreadKey, input: AppendInput, task?: TaskRecord, write?: WriteOptions): Promise<AppendResult> {
      open("append");
      const tenant = checkId("tenant", key?.tenant);
      const contextId = checkId("contextId", key?.contextId);
      checkId("messageId", input?.messageId);
      if (input.taskId !== undefined) checkId("taskId", input.taskId);
      checkProvenance(input.provenance);
      checkPayload("payload", input.payload);
      if (task !== undefined) {
        checkTask(task);
        if (task.tenant !== tenant || task.contextId !== contextId) {
          throw new RangeError("the task given with append must have the thread's tenant and contextId");
        }
      }
      checkFenceFor(write?.fence, tenant, contextId);
      const th = threadKeyOf(tenant, contextId);
      const digest = asBuffer(sha256(input.payload));
      const outcome = await transaction(async (client) => {
        if (write?.fence) await checkFenceInTx(client, write.fence);
        const retry = await findRetry(client, th, input, digest);
        if (retry) return { message: retry, duplicate: true };
        const at = now();
        const counter = await client.query<ThreadRow>(
          `INSERT INTO parley_threads AS t
             (thread_key, tenant_key, tenant, context_id, last_seq, message_count, created_at, updated_at)
           VALUES ($1, $2, $3, $4, 1, 1, $5, $5)
           ON CONFLICT (thread_key) DO UPDATE SET
             last_seq = t.last_seq + 1, message_count = t.message_count + 1, updated_at = $5
           RETURNING ${THREAD_COLUMNS}`,
          [th, tenantKeyOf(tenant), idBytes(tenant), idBytes(contextId), at],
        );
        const meta = toMeta(counter.rows[0]!);
        if (meta.tenant !== tenant || meta.contextId !== contextId) {
          throw new StoreError("CORRUPT", `thread row of ${JSON.stringify(contextId)} belongs to another conversation`);
        }
        const inserted = await client.query(
          `INSERT INTO parley_messages
             (thread_key, seq, message_id, digest, provenance, task_id, payload, created_at)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
           ON CONFLICT (thread_key, message_id, digest) DO NOTHING`,
          [
            th,
            meta.lastSequence,
            idBytes(input.messageId),
            digest,
            provenanceCodes[input.provenance],
            input.taskId === undefined ? null : idBytes(input.taskId),
            asBuffer(input.payload),
            at,
          ],
        );
        // A concurrent retry committed first (ON CONFLICT DO NOTHING reports no row then):
        // roll back, which also gives the counter value back, and answer with the stored record.
        if (inserted.rowCount === 0) throw new RetryRaced();
        if (task) await client.query(TASK_UPSERT, taskParams(task));
        const message: StoredMessage = {
          sequence: meta.lastSequence,
          messageId: input.messageId,
          provenance: input.provenance,
          ...(input.taskId === undefined ? {} : { taskId: input.taskId }),
          payload: input.payload.slice(),
          createdAt: at,
        };
        return { message, duplicate: false };
      }).catch((error: unknown) => {
        if (error instanceof RetryRaced || isUniqueViolation(error)) return undefined;
        throw error;
      });
      if (outcome) return outcome;
      const stored = await findRetry(pool, th, input, digest);
      if (!stored) {
        throw new StoreError("CORRUPT", `append of ${input.messageId} conflicted with a message that is not its retry`);
      }
      return { message: stored, duplicate: true };
    },

    async tail(key: ThreadKey, count: number): Promise<StoredMessage[]> {
      open("tail");
      const tenant = checkId("tenant", key?.tenant);
      const contextId = checkId("contextId", key?.contextId);
      checkLimit("count", count, true);
      if (count === 0) return [];
      const meta = await readMeta(tenant, contextId);
      if (!meta) return [];
      const { rows } = await pool.query<MessageRow>(
        `SELECT ${MESSAGE_COLUMNS} FROM parley_messages WHERE thread_key = $1 ORDER BY seq DESC LIMIT $2`,
        [threadKeyOf(tenant, contextId), count],
      );
      return rows.map(toMessage).reverse();
    },

    async readMessages(
      key: ThreadKey,
      page: { readonly order: PageOrder; readonly limit: number; readonly cursor?: string },
    ): Promise<MessagePage> {
      open("readMessages");
      const tenant = checkId("tenant", key?.tenant);
      const contextId = checkId("contextId", key?.contextId);
      const order = page?.order;
      if (order !== "newest-first" && order !== "oldest-first") {
        throw new RangeError(`order must be newest-first or oldest-first, got ${String(order)}`);
      }
      const limit = checkLimit("limit", page.limit);
      const th = threadKeyOf(tenant, contextId);
      const tag = cursorTag("messages", [th.toString("hex"), order]);
      let after: number | undefined;
      if (page.cursor !== undefined) {
        const position = decodeCursor(page.cursor, cursorKinds.messages, tag, "readMessages");
        if (position.length !== 8) {
          throw new StoreError("INVALID_CURSOR", "readMessages cursor is not a cursor issued by this store");
        }
        after = Number(position.readBigUInt64BE(0));
      }
      const meta = await readMeta(tenant, contextId);
      if (!meta) return { messages: [] };
      const newestFirst = order === "newest-first";
      const { rows } = await pool.query<MessageRow>(
        newestFirst
          ? `SELECT ${MESSAGE_COLUMNS} FROM parley_messages WHERE thread_key = $1 AND seq < $2 ORDER BY seq DESC LIMIT $3`
          : `SELECT ${MESSAGE_COLUMNS} FROM parley_messages WHERE thread_key = $1 AND seq > $2 ORDER BY seq ASC LIMIT $3`,
        [th, newestFirst ? (after ?? MAX_TIME) : (after ?? 0), limit + 1],
      );
      const messages = rows.map(toMessage);
      if (messages.length <= limit) return { messages };
      messages.length = limit;
      return { messages, nextCursor: encodeCursor(cursorKinds.messages, tag, u64(messages[limit - 1]!.sequence)) };
    },

    async getThread(key: ThreadKey): Promise<ThreadMeta | undefined> {
      open("getThread");
      return readMeta(checkId("tenant", key?.tenant), checkId("contextId", key?.contextId));
    },

    async listThreads(tenant: string, page: { readonly limit: number; readonly cursor?: string }): Promise<ThreadPage> {
      open("listThreads");
      checkId("tenant", tenant);
      const limit = checkLimit("limit", page?.limit);
      const tag = cursorTag("threads", [tenant]);
      const params: unknown[] = [tenantKeyOf(tenant), limit + 1];
      let where = "";
      if (page.cursor !== undefined) {
        const position = decodeCursor(page.cursor, cursorKinds.threads, tag, "listThreads");
        if (position.length !== 8 + 32) {
          throw new StoreError("INVALID_CURSOR", "listThreads cursor is not a cursor issued by this store");
        }
        params.push(Number(position.readBigUInt64BE(0)), position.subarray(8));
        where = "AND (updated_at < $3 OR (updated_at = $3 AND thread_key > $4))";
      }
      const { rows } = await pool.query<ThreadRow & { thread_key: Buffer }>(
        `SELECT ${THREAD_COLUMNS}, thread_key FROM parley_threads WHERE tenant_key = $1 ${where}
         ORDER BY updated_at DESC, thread_key ASC LIMIT $2`,
        params,
      );
      const pageRows = rows.slice(0, limit);
      const threads = pageRows.map(toMeta).filter((t) => t.tenant === tenant);
      if (rows.length <= limit) return { threads };
      const last = pageRows[pageRows.length - 1]!;
      const position = Buffer.concat([asBuffer(u64(Number(last.updated_at))), last.thread_key]);
      return { threads, nextCursor: encodeCursor(cursorKinds.threads, tag, position) };
    },

    async deleteThread(key: ThreadKey) {
      open("deleteThread");
      const tenant = checkId("tenant", key?.tenant);
      const contextId = checkId("contextId", key?.contextId);
      // Messages go with the row (ON DELETE CASCADE); tasks keep their own lifetime, as in LevelDB.
      const { rows } = await pool.query<{ message_count: string }>(
        "DELETE FROM parley_threads WHERE thread_key = $1 RETURNING message_count",
        [threadKeyOf(tenant, contextId)],
      );
      const row = rows[0];
      if (!row) return { deleted: false, messageCount: 0 };
      return { deleted: true, messageCount: Number(row.message_count) };
    },

    async sweepThreads(olderThanMs: number): Promise<number> {
      open("sweepThreads");
      checkTime("olderThanMs", olderThanMs);
      const cutoff = now() - olderThanMs;
      if (cutoff <= 0) return 0;
      const result = await pool.query("DELETE FROM parley_threads WHERE updated_at < $1", [cutoff]);
      return result.rowCount ?? 0;
    },

    async putTask(task: TaskRecord, write?: WriteOptions): Promise<void> {
      open("putTask");
      checkTask(task);
      checkFenceFor(write?.fence, task.tenant, task.contextId);
      const fence = write?.fence;
      if (!fence) {
        await pool.query(TASK_UPSERT, taskParams(task));
        return;
      }
      await transaction(async (client) => {
        await checkFenceInTx(client, fence);
        await client.query(TASK_UPSERT, taskParams(task));
      });
    },

    async getTask(tenant: string, taskId: string): Promise<TaskRecord | undefined> {
      open("getTask");
      checkId("tenant", tenant);
      checkId("taskId", taskId);
      const { rows } = await pool.query<TaskRow>(`SELECT ${TASK_COLUMNS} FROM parley_tasks WHERE task_key = $1`, [
        taskKeyOf(tenant, taskId),
      ]);
      const row = rows[0];
      if (!row) return undefined;
      const record = toTask(row);
      if (record.tenant !== tenant || record.taskId !== taskId) {
        throw new StoreError("CORRUPT", `task row of ${JSON.stringify(taskId)} belongs to another task`);
      }
      return record;
    },

    async listTasks(tenant: string, query: ListTasksQuery): Promise<TaskPage> {
      open("listTasks");
      checkId("tenant", tenant);
      const limit = checkLimit("limit", query?.limit);
      const { contextId, state, updatedAfter } = query;
      if (contextId !== undefined) checkId("contextId", contextId);
      if (state !== undefined && (!Number.isInteger(state) || state < 0)) {
        throw new RangeError(`state must be a TaskState number, got ${String(state)}`);
      }
      if (updatedAfter !== undefined && (typeof updatedAfter !== "number" || Number.isNaN(updatedAfter))) {
        throw new RangeError(`updatedAfter must be a number of milliseconds, got ${String(updatedAfter)}`);
      }
      const tag = cursorTag("tasks", [
        tenant,
        contextId === undefined ? "" : `c${contextId}`,
        state === undefined ? "" : `s${state}`,
        updatedAfter === undefined ? "" : `u${updatedAfter}`,
      ]);
      let after: { updatedAt: number; taskId: Buffer } | undefined;
      if (query.cursor !== undefined) {
        const position = decodeCursor(query.cursor, cursorKinds.tasks, tag, "listTasks");
        if (position.length <= 8) {
          throw new StoreError("INVALID_CURSOR", "listTasks cursor is not a cursor issued by this store");
        }
        after = { updatedAt: Number(position.readBigUInt64BE(0)), taskId: position.subarray(8) };
      }
      if (updatedAfter !== undefined && updatedAfter > MAX_TIME) return { tasks: [], totalSize: 0 };
      const params: unknown[] = [];
      const filters: string[] = [];
      const param = (value: unknown) => {
        params.push(value);
        return `$${params.length}`;
      };
      if (contextId === undefined) filters.push(`tenant_key = ${param(tenantKeyOf(tenant))}`);
      else filters.push(`thread_key = ${param(threadKeyOf(tenant, contextId))}`);
      filters.push(`tenant = ${param(idBytes(tenant))}`);
      if (state !== undefined) filters.push(`state = ${param(state)}`);
      if (updatedAfter !== undefined && updatedAfter > 0) {
        filters.push(`updated_at >= ${param(Math.ceil(updatedAfter))}`);
      }
      const matching = filters.join(" AND ");
      const count = await pool.query<{ n: string }>(`SELECT count(*) AS n FROM parley_tasks WHERE ${matching}`, [
        ...params,
      ]);
      let paging = "";
      if (after) {
        const u = param(after.updatedAt);
        paging = ` AND (updated_at < ${u} OR (updated_at = ${u} AND task_id > ${param(after.taskId)}))`;
      }
      const { rows } = await pool.query<TaskRow>(
        `SELECT ${TASK_COLUMNS} FROM parley_tasks WHERE ${matching}${paging}
         ORDER BY updated_at DESC, task_id ASC LIMIT ${param(limit + 1)}`,
        params,
      );
      const tasks = rows.slice(0, limit).map(toTask);
      const totalSize = Number(count.rows[0]!.n);
      if (rows.length <= limit) return { tasks, totalSize };
      const last = tasks[tasks.length - 1]!;
      const position = Buffer.concat([asBuffer(u64(last.updatedAt)), Buffer.from(last.taskId, "utf8")]);
      return { tasks, totalSize, nextCursor: encodeCursor(cursorKinds.tasks, tag, position) };
    },

    async listUnfinishedTasks(): Promise<TaskRecord[]> {
      open("listUnfinishedTasks");
      const { rows } = await pool.query<TaskRow>(
        `SELECT ${TASK_COLUMNS} FROM parley_tasks WHERE state NOT IN (3, 4, 5, 7)`,
      );
      return rows.map(toTask);
    },

    async putPushConfig(config: PushConfigRecord): Promise<void> {
      open("putPushConfig");
      checkId("tenant", config?.tenant);
      checkId("taskId", config.taskId);
      checkId("configId", config.configId);
      checkPayload("payload", config.payload);
      await pool.query(
        `INSERT INTO parley_push_configs (task_key, config_key, tenant, task_id, config_id, payload)
         VALUES ($1, $2, $3, $4, $5, $6)
         ON CONFLICT (task_key, config_key) DO UPDATE SET payload = EXCLUDED.payload`,
        [
          taskKeyOf(config.tenant, config.taskId),
          configKeyOf(config.configId),
          idBytes(config.tenant),
          idBytes(config.taskId),
          idBytes(config.configId),
          asBuffer(config.payload),
        ],
      );
    },

    async getPushConfig(tenant: string, taskId: string, configId: string) {
      open("getPushConfig");
      checkId("tenant", tenant);
      checkId("taskId", taskId);
      checkId("configId", configId);
      const { rows } = await pool.query<PushRow>(
        "SELECT tenant, task_id, config_id, payload FROM parley_push_configs WHERE task_key = $1 AND config_key = $2",
        [taskKeyOf(tenant, taskId), configKeyOf(configId)],
      );
      const row = rows[0];
      if (!row) return undefined;
      const config = toPush(row);
      if (config.tenant !== tenant || config.taskId !== taskId || config.configId !== configId) {
        throw new StoreError("CORRUPT", `push config row of ${JSON.stringify(configId)} belongs to another config`);
      }
      return config;
    },

    async listPushConfigs(tenant: string, taskId: string, page: { readonly limit: number; readonly cursor?: string }) {
      open("listPushConfigs");
      checkId("tenant", tenant);
      checkId("taskId", taskId);
      const limit = checkLimit("limit", page?.limit);
      const tag = cursorTag("push-configs", [tenant, taskId]);
      let after: Buffer = Buffer.alloc(0);
      if (page.cursor !== undefined) {
        after = decodeCursor(page.cursor, cursorKinds.push, tag, "listPushConfigs");
        if (after.length !== 32) {
          throw new StoreError("INVALID_CURSOR", "listPushConfigs cursor is not a cursor issued by this store");
        }
      }
      const { rows } = await pool.query<PushRow & { config_key: Buffer }>(
        `SELECT tenant, task_id, config_id, payload, config_key FROM parley_push_configs
         WHERE task_key = $1 AND config_key > $2 ORDER BY config_key LIMIT $3`,
        [taskKeyOf(tenant, taskId), after, limit + 1],
      );
      const pageRows = rows.slice(0, limit);
      const configs = pageRows.map(toPush);
      if (rows.length <= limit) return { configs };
      return {
        configs,
        nextCursor: encodeCursor(cursorKinds.push, tag, pageRows[pageRows.length - 1]!.config_key),
      };
    },

    async deletePushConfig(tenant: string, taskId: string, configId: string): Promise<boolean> {
      open("deletePushConfig");
      checkId("tenant", tenant);
      checkId("taskId", taskId);
      checkId("configId", configId);
      const result = await pool.query("DELETE FROM parley_push_configs WHERE task_key = $1 AND config_key = $2", [
        taskKeyOf(tenant, taskId),
        configKeyOf(configId),
      ]);
      return (result.rowCount ?? 0) > 0;
    },

    async close(): Promise<void> {
      // The pool belongs to the backend, which ends it after every user of it is closed.
      closed = true;
    },
  };
}

/** Rolls an append back when its message turned out to be a retry that committed first. */
class RetryRaced extends Error {}

interface PushRow {
  tenant: Buffer;
  task_id: Buffer;
  config_id: Buffer;
  payload: Buffer;
}

function toPush(row: PushRow): PushConfigRecord {
  return {
    tenant: idText(row.tenant, "tenant"),
    taskId: idText(row.task_id, "taskId"),
    configId: idText(row.config_id, "configId"),
    payload: asBytes(row.payload),
  };
}

export function isUniqueViolation(error: unknown): boolean {
  return (error as { code?: unknown })?.code === "23505";
}
