// Task records and their three indexes (per tenant, per context, unfinished) in the LevelDB backend; hidden tasks.
import { compareBytes, decodeUtf8, encodeUtf8, toHex, u32, u64 } from "../core/bytes.js";
import { checkListTasks, checkTask, MAX_TIME } from "../core/checks.js";
import { cursorKinds, encodeCursor } from "../core/cursors.js";
import { digestHex, taskHash, tenantHash, threadHash } from "../core/digests.js";
import { checkId } from "../core/ids.js";
import { type ListTasksQuery, StoreError, type TaskPage, type TaskRecord, terminalTaskStates } from "../types.js";
import { type LevelContext, pointRead, rememberTask, type TaskIndexPosition } from "./level-context.js";
import {
  type BatchOp,
  EMPTY,
  inv,
  key,
  PURGE_CHUNK,
  prefixEnd,
  type Snapshot,
  T_TASK,
  T_TASKS_BY_CONTEXT,
  T_TASKS_BY_TENANT,
  T_TASKS_UNFINISHED,
} from "./level-keys.js";
import { decodeOrCorrupt, decodeTask, encodeTask } from "./level-records.js";

/**
 * Runs `write` under the task's lock with the ops that upsert it (old index entries removed first).
 *
 * A hidden task (TaskRecord.hidden: a turn whose answer may still be a Message) gets one record: its
 * turn-in-flight entry in the unfinished index (`r:`), which carries the task record itself so that crash
 * recovery can end it, and no task record or listing entries; its terminal hidden write deletes that entry.
 * A visible write after it adds the task record and listing entries, with nothing old to remove.
 */
export function withTask<T>(ctx: LevelContext, task: TaskRecord, write: (ops: BatchOp[]) => Promise<T>): Promise<T> {
  const tk = taskHash(task.tenant, task.taskId);
  const tkHex = digestHex(tk);
  return ctx.locks.run(tkHex, async () => {
    const recordKey = key(T_TASK, tk);
    const unfinishedKey = key(T_TASKS_UNFINISHED, tk);
    let old: TaskIndexPosition | undefined = ctx.taskPositions.get(tkHex);
    // Not cached and no task record: a hidden task's entry may still be there (its position fell out of the cache).
    let maybeHidden = false;
    if (!old && !task.created) {
      const raw = pointRead(ctx, recordKey);
      old = raw === undefined ? undefined : decodeOrCorrupt("task", recordKey, () => decodeTask(raw));
      maybeHidden = old === undefined;
    }
    const terminal = terminalTaskStates.has(task.state);
    const visibleOld = old?.hidden ? undefined : old;
    // A task once visible stays visible: a hidden write of it is stored like any other.
    const hidden = task.hidden === true && visibleOld === undefined;
    const ops: BatchOp[] = [];
    if (hidden) {
      // What recovery needs of a turn cut off while hidden: its ids, state and time. Its task (the inbound
      // message, SUBMITTED) is rebuilt from the thread, so the payload is neither read nor stored.
      const { tenant, taskId, contextId, state, updatedAt } = task;
      ops.push(
        terminal
          ? { type: "del", key: unfinishedKey }
          : {
              type: "put",
              key: unfinishedKey,
              value: encodeTask({ tenant, taskId, contextId, state, updatedAt, payload: EMPTY }),
            },
      );
    } else {
      const taskIdBytes = encodeUtf8(task.taskId);
      if (visibleOld) {
        ops.push({
          type: "del",
          key: key(T_TASKS_BY_TENANT, tenantHash(visibleOld.tenant), inv(visibleOld.updatedAt), taskIdBytes),
        });
        ops.push({
          type: "del",
          key: key(
            T_TASKS_BY_CONTEXT,
            threadHash(visibleOld.tenant, visibleOld.contextId),
            inv(visibleOld.updatedAt),
            taskIdBytes,
          ),
        });
      }
      const th = threadHash(task.tenant, task.contextId);
      ops.push({ type: "put", key: recordKey, value: encodeTask(task) });
      ops.push({
        type: "put",
        key: key(T_TASKS_BY_TENANT, tenantHash(task.tenant), inv(task.updatedAt), taskIdBytes),
        value: key(u32(task.state), th),
      });
      ops.push({
        type: "put",
        key: key(T_TASKS_BY_CONTEXT, th, inv(task.updatedAt), taskIdBytes),
        value: u32(task.state),
      });
      // A put replaces an earlier entry (hidden or not); only a task that ends needs its entry deleted.
      if (!terminal) ops.push({ type: "put", key: unfinishedKey, value: EMPTY });
      else if (old || maybeHidden) ops.push({ type: "del", key: unfinishedKey });
    }
    let written: T;
    try {
      written = await write(ops);
    } catch (error) {
      // The batch may or may not have landed: forget the position and read it next time.
      ctx.taskPositions.delete(tkHex);
      throw error;
    }
    if (hidden && terminal) ctx.taskPositions.delete(tkHex);
    else {
      rememberTask(ctx, tkHex, {
        tenant: task.tenant,
        contextId: task.contextId,
        updatedAt: task.updatedAt,
        ...(hidden ? { hidden } : {}),
      });
    }
    return written;
  });
}

/** `extra`: ops of another table to write in the same batch (a run's last events). */
export async function putTask(ctx: LevelContext, task: TaskRecord, extra?: readonly BatchOp[]): Promise<void> {
  checkTask(task);
  await withTask(ctx, task, extra ? (ops) => ctx.write([...ops, ...extra]) : ctx.write);
}

async function readTask(
  ctx: LevelContext,
  tenant: string,
  taskId: string,
  snapshot?: Snapshot,
): Promise<TaskRecord | undefined> {
  const k = key(T_TASK, taskHash(tenant, taskId));
  const raw = await ctx.db.get(k, { snapshot });
  if (raw === undefined) return undefined;
  const task = decodeOrCorrupt("task", k, () => decodeTask(raw));
  if (task.tenant !== tenant || task.taskId !== taskId) {
    throw new StoreError("CORRUPT", `task at key ${toHex(k)} belongs to another task`);
  }
  return task;
}

export async function getTask(ctx: LevelContext, tenant: string, taskId: string): Promise<TaskRecord | undefined> {
  return readTask(ctx, checkId("tenant", tenant), checkId("taskId", taskId));
}

export async function listTasks(ctx: LevelContext, tenant: string, query: ListTasksQuery): Promise<TaskPage> {
  const { limit, tag, after: position } = checkListTasks(tenant, query);
  const { contextId, state, updatedAfter } = query;
  const prefix =
    contextId === undefined
      ? key(T_TASKS_BY_TENANT, tenantHash(tenant))
      : key(T_TASKS_BY_CONTEXT, threadHash(tenant, contextId));
  const after = position && key(prefix, position);
  // updatedAt >= updatedAfter  <=>  inv(updatedAt) <= inv(updatedAfter): an upper key bound.
  let end = prefixEnd(prefix);
  if (updatedAfter !== undefined && updatedAfter > 0) {
    if (updatedAfter > MAX_TIME) return { tasks: [], totalSize: 0 };
    end = key(prefix, u64(MAX_TIME - Math.ceil(updatedAfter) + 1));
  }
  const snapshot = ctx.db.snapshot();
  try {
    let totalSize = 0;
    const page: Uint8Array[] = [];
    let more = false;
    // totalSize needs every match, so the whole (index-only) range is walked; records are read for the page only.
    for await (const [k, v] of ctx.db.iterator({ gte: prefix, lt: end, snapshot })) {
      if (state !== undefined && new DataView(v.buffer, v.byteOffset, 4).getUint32(0) !== state) continue;
      totalSize += 1;
      if (after !== undefined && compareBytes(k, after) <= 0) continue;
      if (page.length < limit) page.push(k);
      else more = true;
    }
    const tasks: TaskRecord[] = [];
    for (const k of page) {
      const taskId = decodeOrCorrupt("task index", k, () => decodeUtf8(k.subarray(prefix.length + 8)));
      const task = await readTask(ctx, tenant, taskId, snapshot);
      if (task) tasks.push(task);
    }
    if (!more) return { tasks, totalSize };
    const lastKey = page[page.length - 1]!;
    return { tasks, totalSize, nextCursor: encodeCursor(cursorKinds.tasks, tag, lastKey.subarray(prefix.length)) };
  } finally {
    await snapshot.close();
  }
}

export async function listUnfinishedTasks(ctx: LevelContext): Promise<TaskRecord[]> {
  const snapshot = ctx.db.snapshot();
  try {
    const entries = await ctx.db
      .iterator({ gte: T_TASKS_UNFINISHED, lt: prefixEnd(T_TASKS_UNFINISHED), snapshot })
      .all();
    const tasks: TaskRecord[] = [];
    const recordKeys: Uint8Array[] = [];
    for (const [k, v] of entries) {
      // A hidden task's entry carries its record (its payload empty since issue 16, whole before); a visible
      // task's entry is empty and points at its record.
      if (v.length > 0) tasks.push({ ...decodeOrCorrupt("hidden task", k, () => decodeTask(v)), hidden: true });
      else recordKeys.push(key(T_TASK, k.subarray(T_TASKS_UNFINISHED.length)));
    }
    for (let i = 0; i < recordKeys.length; i += PURGE_CHUNK) {
      const chunk = recordKeys.slice(i, i + PURGE_CHUNK);
      const raws = await ctx.db.getMany(chunk, { snapshot });
      raws.forEach((raw, j) => {
        if (raw === undefined) return;
        const task = decodeOrCorrupt("task", chunk[j]!, () => decodeTask(raw));
        if (!terminalTaskStates.has(task.state)) tasks.push(task);
      });
    }
    return tasks;
  } finally {
    await snapshot.close();
  }
}

export const taskJobs = { putTask, getTask, listTasks, listUnfinishedTasks };
