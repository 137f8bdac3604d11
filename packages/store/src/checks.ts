// Argument checks and encodings both backends share, so they refuse exactly the same input.
import { checkId } from "./ids.js";
import type { Provenance, TaskRecord } from "./types.js";

/** The largest time (ms) a record may carry; index keys store MAX_TIME - time to sort newest first. */
export const MAX_TIME = Number.MAX_SAFE_INTEGER;

export const provenanceCodes: Record<Provenance, number> = { user: 1, agent: 2, "inter-session": 3 };
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
  checkPayload("task.payload", task.payload);
  return task;
}
