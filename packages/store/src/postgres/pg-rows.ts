// The PostgreSQL backend's rows and their mapping back to the store's records.
import { provenanceByCode } from "../core/checks.js";
import { type PushConfigRecord, type StoredMessage, StoreError, type TaskRecord, type ThreadMeta } from "../types.js";
import { asBytes, idText } from "./pg-keys.js";

export const MESSAGE_COLUMNS = "seq, message_id, provenance, task_id, payload, created_at";
export const THREAD_COLUMNS = "tenant, context_id, created_at, updated_at, message_count, last_seq";
export const TASK_COLUMNS = "tenant, task_id, context_id, state, updated_at, payload";
export const PUSH_COLUMNS = "tenant, task_id, config_id, payload";

export interface MessageRow {
  seq: string;
  message_id: Buffer;
  provenance: number;
  task_id: Buffer | null;
  payload: Buffer;
  created_at: string;
}

export function toMessage(row: MessageRow): StoredMessage {
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

export interface ThreadRow {
  tenant: Buffer;
  context_id: Buffer;
  created_at: string;
  updated_at: string;
  message_count: string;
  last_seq: string;
}

export function toMeta(row: ThreadRow): ThreadMeta {
  return {
    tenant: idText(row.tenant, "tenant"),
    contextId: idText(row.context_id, "contextId"),
    createdAt: Number(row.created_at),
    updatedAt: Number(row.updated_at),
    messageCount: Number(row.message_count),
    lastSequence: Number(row.last_seq),
  };
}

/** The thread's meta from its row; CORRUPT when the row is another conversation's. */
export function toThreadMeta(row: ThreadRow, tenant: string, contextId: string): ThreadMeta {
  const meta = toMeta(row);
  if (meta.tenant !== tenant || meta.contextId !== contextId) {
    throw new StoreError("CORRUPT", `thread row of ${JSON.stringify(contextId)} belongs to another conversation`);
  }
  return meta;
}

export interface TaskRow {
  tenant: Buffer;
  task_id: Buffer;
  context_id: Buffer;
  state: number;
  updated_at: string;
  payload: Buffer;
}

export function toTask(row: TaskRow): TaskRecord {
  return {
    tenant: idText(row.tenant, "tenant"),
    taskId: idText(row.task_id, "taskId"),
    contextId: idText(row.context_id, "contextId"),
    state: row.state,
    updatedAt: Number(row.updated_at),
    payload: asBytes(row.payload),
  };
}

export interface PushRow {
  tenant: Buffer;
  task_id: Buffer;
  config_id: Buffer;
  payload: Buffer;
}

export function toPush(row: PushRow): PushConfigRecord {
  return {
    tenant: idText(row.tenant, "tenant"),
    taskId: idText(row.task_id, "taskId"),
    configId: idText(row.config_id, "configId"),
    payload: asBytes(row.payload),
  };
}
