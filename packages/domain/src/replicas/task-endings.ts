import { fromBinary } from "@bufbuild/protobuf";
import { isTerminalState, type Task, TaskSchema, TaskState } from "@parley/proto";
import type { ThreadKey } from "@parley/store";
import type { ContextLeases, Fence, FencedThreadStore, TaskEvent, TaskEventLog } from "@parley/store/backends";
import type { Logger } from "pino";
import { decodeLoggedEvent, encodeLoggedEvent } from "../engine/logged-events.js";
import { interruptedStatus, isCutOffByLostRun, setStatus, statusEvent, taskRecord } from "../engine/task-model.js";
import { contextBusy } from "../errors.js";
import { leavesWaiting } from "./run-ends.js";

export interface TaskEndingsOptions {
  readonly store: FencedThreadStore;
  readonly leases: ContextLeases;
  readonly events: TaskEventLog;
  readonly logger: Logger;
  readonly leaseTtlMs: number;
}

/** Records the ends of tasks that no run of this replica ends itself: each its final task, then its final event. */
export interface TaskEndings {
  /**
   * Ends the task of an expired lease as FAILED (`why`, by default "executor lost") under `fence`; a task whose
   * outcome landed without its final event gets that event. Interrupted (waiting) tasks are left as they are.
   */
  endLost(key: ThreadKey, taskId: string, fence: Fence, why?: string): Promise<void>;
  /** Ends a task that this process's last stop cut off, under a lease of its own; nothing when the context is busy. */
  failInterrupted(tenant: string, contextId: string, taskId: string, why: string): Promise<void>;
  /** Records the end of a task that waits for input (no run holds its context); CONTEXT_BUSY when one does. */
  endWaiting(tenant: string, task: Task): Promise<void>;
}

export function createTaskEndings(options: TaskEndingsOptions): TaskEndings {
  const { store, leases, events, logger } = options;

  /** Appends the task's current status as the final event of its log, unless the log already ended. */
  const appendFinalStatus = async (tenant: string, task: Task, fence: Fence): Promise<void> => {
    const last = await events.lastSeq(tenant, task.id);
    const tail = last > 0 ? await events.read(tenant, task.id, last - 1, 1) : [];
    // A log that ended waiting for input goes on: the task's end is appended after that.
    if (tail[0]?.final && !endsWaiting(tail[0], task)) return;
    await events.append(
      tenant,
      task.id,
      [{ seq: last + 1, payload: encodeLoggedEvent(statusEvent(task), task.id, task.contextId), final: true }],
      fence,
    );
  };

  const endLost = async (key: ThreadKey, taskId: string, fence: Fence, why?: string): Promise<void> => {
    const record = await store.getTask(key.tenant, taskId);
    if (record && isCutOffByLostRun(record.state)) {
      const task = fromBinary(TaskSchema, record.payload);
      const reason =
        why ??
        interruptedStatus(
          "executor lost: the replica running this task stopped renewing its lease; any partial reply was not kept",
          key.contextId,
        );
      setStatus(task, TaskState.FAILED, reason);
      await store.putTask(taskRecord(key.tenant, task), { fence });
      await appendFinalStatus(key.tenant, task, fence);
      logger.warn({ taskId, contextId: key.contextId }, `ended a task as FAILED (${reason})`);
    } else if (record && isTerminalState(record.state)) {
      // The run's outcome landed but it lost the lease before its final event did: the log's followers wait for
      // that event, so it is appended here (nothing is appended to a log that ended).
      await appendFinalStatus(key.tenant, fromBinary(TaskSchema, record.payload), fence);
    }
  };

  return {
    endLost,
    async failInterrupted(tenant, contextId, taskId, why) {
      const key: ThreadKey = { tenant, contextId };
      const grant = await leases.tryAcquire(key, taskId, options.leaseTtlMs);
      if (!grant) return;
      const fence: Fence = { key, taskId, token: grant.token };
      try {
        await endLost(key, taskId, fence, why);
      } finally {
        await leases.release(fence).catch(() => {});
      }
    },
    async endWaiting(tenant, task) {
      const key: ThreadKey = { tenant, contextId: task.contextId };
      const grant = await leases.tryAcquire(key, task.id, options.leaseTtlMs);
      if (!grant) throw contextBusy(task.contextId, task.id, "cancel it");
      const fence: Fence = { key, taskId: task.id, token: grant.token };
      try {
        await store.putTask(taskRecord(tenant, task), { fence });
        await appendFinalStatus(tenant, task, fence);
      } finally {
        await leases.release(fence).catch(() => {});
      }
    },
  };
}

/** A logged final event that left the task waiting for input: the task goes on after it. */
function endsWaiting(event: TaskEvent, task: Task): boolean {
  return leavesWaiting(decodeLoggedEvent(event.payload, task.id, task.contextId));
}
