// Task records in the PostgreSQL backend.
import { readU64, u64 } from "../core/bytes.js";
import { checkListTasks, checkTask, MAX_TIME } from "../core/checks.js";
import { cursorKinds, encodeCursor } from "../core/cursors.js";
import { checkFenceFor, fencedError } from "../core/fences.js";
import { checkId } from "../core/ids.js";
import type { WriteOptions } from "../replica-types.js";
import { type ListTasksQuery, StoreError, type TaskPage, type TaskRecord, terminalTaskStates } from "../types.js";
import type { PgContext } from "./pg-context.js";
import { asBuffer, idBytes, taskKeyOf, tenantKeyOf, threadKeyOf } from "./pg-keys.js";
import { TASK_COLUMNS, type TaskRow, toTask } from "./pg-rows.js";
import { fenceCte } from "./pg-transaction.js";

/** The columns of a task write, in the order of taskParams. */
export const TASK_COLUMNS_LIST =
  "task_key, tenant_key, thread_key, tenant, task_id, context_id, state, updated_at, payload";

const TASK_CONFLICT = `ON CONFLICT (task_key) DO UPDATE SET
    thread_key = EXCLUDED.thread_key, context_id = EXCLUDED.context_id, state = EXCLUDED.state,
    updated_at = EXCLUDED.updated_at, payload = EXCLUDED.payload`;

export const TASK_UPSERT = {
  name: "parley_task_upsert",
  text: `INSERT INTO parley_tasks (${TASK_COLUMNS_LIST}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ${TASK_CONFLICT}`,
};

// One statement: the fence check ($10 token, held FOR SHARE until commit) and the upsert only when it holds.
const FENCED_TASK_UPSERT = {
  name: "parley_task_upsert_fenced",
  text: `WITH ${fenceCte("f", "$3", "$10")},
    k AS (
      INSERT INTO parley_tasks (${TASK_COLUMNS_LIST})
      SELECT $1::bytea, $2::bytea, $3::bytea, $4::bytea, $5::bytea, $6::bytea, $7::integer, $8::bigint, $9::bytea
      WHERE EXISTS (SELECT 1 FROM f)
      ${TASK_CONFLICT})
    SELECT EXISTS (SELECT 1 FROM f) AS held`,
};

export function taskParams(task: TaskRecord): unknown[] {
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

// The same text as the predicate of the partial index parley_tasks_unfinished (migration 1), so the planner uses it.
const UNFINISHED_SQL = `SELECT ${TASK_COLUMNS} FROM parley_tasks WHERE state NOT IN (${[...terminalTaskStates].join(", ")})`;

export async function putTask(ctx: PgContext, task: TaskRecord, write?: WriteOptions): Promise<void> {
  checkTask(task);
  checkFenceFor(write?.fence, task.tenant, task.contextId);
  const fence = write?.fence;
  if (!fence) {
    await ctx.pool.query({ ...TASK_UPSERT, values: taskParams(task) });
    return;
  }
  // The fence names the task's context (checked above), so its thread key is the task's ($3).
  const { rows } = await ctx.pool.query<{ held: boolean }>({
    ...FENCED_TASK_UPSERT,
    values: [...taskParams(task), fence.token],
  });
  if (!rows[0]?.held) throw fencedError(fence);
}

export async function getTask(ctx: PgContext, tenant: string, taskId: string): Promise<TaskRecord | undefined> {
  checkId("tenant", tenant);
  checkId("taskId", taskId);
  const { rows } = await ctx.pool.query<TaskRow>(`SELECT ${TASK_COLUMNS} FROM parley_tasks WHERE task_key = $1`, [
    taskKeyOf(tenant, taskId),
  ]);
  const row = rows[0];
  if (!row) return undefined;
  const record = toTask(row);
  if (record.tenant !== tenant || record.taskId !== taskId) {
    throw new StoreError("CORRUPT", `task row of ${JSON.stringify(taskId)} belongs to another task`);
  }
  return record;
}

export async function listTasks(ctx: PgContext, tenant: string, query: ListTasksQuery): Promise<TaskPage> {
  const { limit, tag, after: cursorAt } = checkListTasks(tenant, query);
  const { contextId, state, updatedAfter } = query;
  const after = cursorAt && { updatedAt: readU64(cursorAt, 0), taskId: asBuffer(cursorAt.subarray(8)) };
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
  const count = await ctx.pool.query<{ n: string }>(`SELECT count(*) AS n FROM parley_tasks WHERE ${matching}`, [
    ...params,
  ]);
  let paging = "";
  if (after) {
    const u = param(after.updatedAt);
    paging = ` AND (updated_at < ${u} OR (updated_at = ${u} AND task_id > ${param(after.taskId)}))`;
  }
  const { rows } = await ctx.pool.query<TaskRow>(
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
}

export async function listUnfinishedTasks(ctx: PgContext): Promise<TaskRecord[]> {
  const { rows } = await ctx.pool.query<TaskRow>(UNFINISHED_SQL);
  return rows.map(toTask);
}

export const taskJobs = { putTask, getTask, listTasks, listUnfinishedTasks };
