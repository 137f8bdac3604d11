// The checks of an importThread call both backends share, so they refuse exactly the same input.
import { StoreError, type ThreadImport, type ThreadKey } from "../types.js";
import { checkAppendInput, checkTask, checkThreadKey, checkTime } from "./checks.js";

/** Checks the key, every message and every task of an import (tasks must be the thread's, ids unique). */
export function checkThreadImport(key: ThreadKey, data: ThreadImport): void {
  checkThreadKey(key);
  if (data?.mode !== "empty" && data?.mode !== "append") {
    throw new RangeError(`mode must be empty or append, got ${String(data?.mode)}`);
  }
  if (!Array.isArray(data.messages) || !Array.isArray(data.tasks)) {
    throw new TypeError("messages and tasks must be arrays");
  }
  for (const [i, m] of data.messages.entries()) {
    checkAppendInput(m);
    checkTime(`messages[${i}].createdAt`, m.createdAt);
  }
  const taskIds = new Set<string>();
  for (const task of data.tasks) {
    checkTask(task);
    if (task.tenant !== key.tenant || task.contextId !== key.contextId) {
      throw new RangeError(`task ${task.taskId} must have the thread's tenant and contextId`);
    }
    if (taskIds.has(task.taskId)) throw new RangeError(`task ${task.taskId} is given twice`);
    taskIds.add(task.taskId);
  }
}

export function foreignTask(taskId: string, contextId: string): StoreError {
  return new StoreError(
    "CONFLICT",
    `task ${JSON.stringify(taskId)} already belongs to another thread of this tenant (contextId ${JSON.stringify(contextId)})`,
  );
}

export function notEmpty(contextId: string, foreign: number): StoreError {
  return new StoreError(
    "CONFLICT",
    `thread ${JSON.stringify(contextId)} already holds ${foreign} message${foreign === 1 ? "" : "s"} the import does not carry; import into a new contextId, or append to it explicitly`,
  );
}
