// Argument checks and encodings both backends share, so they refuse exactly the same input.
import type {
  AppendInput,
  ListTasksQuery,
  PageOrder,
  Provenance,
  PushConfigRecord,
  TaskRecord,
  ThreadKey,
} from "../types.js";
import { readU64, toHex } from "./bytes.js";
import { type CursorKind, cursorKinds, cursorTag, decodeCursor } from "./cursors.js";
import { threadHash } from "./digests.js";
import { checkId } from "./ids.js";

/** The largest time (ms) a record may carry; index keys store MAX_TIME - time to sort newest first. */
export const MAX_TIME = Number.MAX_SAFE_INTEGER;

export const provenanceCodes: Record<Provenance, number> = { user: 1, agent: 2, "inter-session": 3, imported: 4 };
export const provenanceByCode = new Map<number, Provenance>(
  Object.entries(provenanceCodes).map(([name, code]) => [code, name as Provenance]),
);

export function checkLimit(name: string, value: unknown, allowZero = false): number {
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value < (allowZero ? 0 : 1)) {
    throw new RangeError(`${name} must be an integer >= ${allowZero ? 0 : 1}, got ${String(value)}`);
  }
  return value;
}

export function checkTime(name: string, value: unknown): number {
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value < 0) {
    throw new RangeError(`${name} must be a non-negative integer of milliseconds, got ${String(value)}`);
  }
  return value;
}

export function checkPayload(name: string, value: unknown): Uint8Array {
  if (!(value instanceof Uint8Array)) throw new TypeError(`${name} must be a Uint8Array`);
  return value;
}

export function checkProvenance(value: unknown): Provenance {
  if (typeof value !== "string" || !Object.hasOwn(provenanceCodes, value)) {
    throw new RangeError(`provenance must be one of ${Object.keys(provenanceCodes).join(", ")}, got ${String(value)}`);
  }
  return value as Provenance;
}

export function checkTask(task: TaskRecord): TaskRecord {
  checkId("tenant", task?.tenant);
  checkId("taskId", task.taskId);
  checkId("contextId", task.contextId);
  if (!Number.isInteger(task.state) || task.state < 0 || task.state > 0x7fffffff) {
    throw new RangeError(`task.state must be a TaskState number, got ${String(task.state)}`);
  }
  checkTime("task.updatedAt", task.updatedAt);
  // A hidden task's payload is read only by a backend that stores hidden tasks whole (see TaskRecord.payload);
  // that backend reads it then, and the write fails if it is not bytes.
  if (task.hidden !== true) checkPayload("task.payload", task.payload);
  return task;
}

/** The thread key's ids, checked. */
export function checkThreadKey(key: ThreadKey): ThreadKey {
  checkId("tenant", key?.tenant);
  checkId("contextId", key?.contextId);
  return key;
}

export function checkAppendInput(input: AppendInput): AppendInput {
  checkId("messageId", input?.messageId);
  if (input.taskId !== undefined) checkId("taskId", input.taskId);
  checkProvenance(input.provenance);
  checkPayload("payload", input.payload);
  return input;
}

/** The arguments of append: the key, the message, and the task upserted with it (of the same thread). */
export function checkAppend(key: ThreadKey, input: AppendInput, task: TaskRecord | undefined): void {
  checkThreadKey(key);
  checkAppendInput(input);
  if (task !== undefined) {
    checkTask(task);
    if (task.tenant !== key.tenant || task.contextId !== key.contextId) {
      throw new RangeError("the task given with append must have the thread's tenant and contextId");
    }
  }
}

export function checkPageOrder(order: unknown): PageOrder {
  if (order !== "newest-first" && order !== "oldest-first") {
    throw new RangeError(`order must be newest-first or oldest-first, got ${String(order)}`);
  }
  return order;
}

/** The ids of a task's push configs. */
export function checkTaskIds(tenant: string, taskId: string): void {
  checkId("tenant", tenant);
  checkId("taskId", taskId);
}

/** The ids naming one push config. */
export function checkConfigIds(tenant: string, taskId: string, configId: string): void {
  checkTaskIds(tenant, taskId);
  checkId("configId", configId);
}

export function checkPushConfig(config: PushConfigRecord): PushConfigRecord {
  checkConfigIds(config?.tenant, config.taskId, config.configId);
  checkPayload("payload", config.payload);
  return config;
}

/** A checked page request: its limit, the tag binding its cursors to the query, and where its cursor continues. */
export interface PageStart {
  readonly limit: number;
  readonly tag: Uint8Array;
  /** The position the cursor carried (absent on a first page). */
  readonly after?: Uint8Array;
}

function pageStart(kind: CursorKind, tag: Uint8Array, limit: number, cursor: string | undefined): PageStart {
  return cursor === undefined ? { limit, tag } : { limit, tag, after: decodeCursor(cursor, kind, tag) };
}

/** A readMessages request, checked: the thread digest, the order, and the sequence the cursor continues after. */
export function checkReadMessages(
  key: ThreadKey,
  options: { readonly order: PageOrder; readonly limit: number; readonly cursor?: string },
) {
  const { tenant, contextId } = checkThreadKey(key);
  const order = checkPageOrder(options?.order);
  const limit = checkLimit("limit", options.limit);
  const th = threadHash(tenant, contextId);
  const { tag, after } = pageStart(
    cursorKinds.messages,
    cursorTag("messages", [toHex(th), order]),
    limit,
    options.cursor,
  );
  return { tenant, contextId, th, order, limit, tag, afterSequence: after && readU64(after, 0) };
}

export function checkListThreads(tenant: string, options: { readonly limit: number; readonly cursor?: string }) {
  checkId("tenant", tenant);
  const limit = checkLimit("limit", options?.limit);
  return pageStart(cursorKinds.threads, cursorTag("threads", [tenant]), limit, options.cursor);
}

export function checkListPushConfigs(
  tenant: string,
  taskId: string,
  options: { readonly limit: number; readonly cursor?: string },
): PageStart {
  checkTaskIds(tenant, taskId);
  const limit = checkLimit("limit", options?.limit);
  return pageStart(cursorKinds.push, cursorTag("push-configs", [tenant, taskId]), limit, options.cursor);
}

/** A listTasks query, checked, with a cursor bound to exactly these filters. */
export function checkListTasks(tenant: string, query: ListTasksQuery): PageStart {
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
  return pageStart(cursorKinds.tasks, tag, limit, query.cursor);
}
