import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { timestampFromMs, timestampMs } from "@bufbuild/protobuf/wkt";
import { MessageSchema, type Task, TaskSchema, TaskState, TaskStatusSchema } from "@parley/proto";
import type { TaskRecord, ThreadStore } from "@parley/store";
import { storedInbound } from "./message-validation.js";
import type { ReplicaCoordinator } from "./replica-coordinator.js";
import { taskRecord } from "./task-model.js";
import type { TaskRun } from "./task-run.js";

/**
 * A hidden turn: a new task nobody outside the engine was shown (a blocking send's). It may still end as a
 * Message and leave no task behind, so the store keeps only its turn-in-flight record (TaskRecord.hidden).
 * This file alone decides and marks it: TaskRun.visible and TaskRun.storedHidden, and the record's flag.
 */

/** How a send's turn starts: `continued` an existing task, `handedOver` the caller is handed the task at once. */
export interface TurnStart {
  readonly continued: boolean;
  readonly handedOver: boolean;
  /** ReplicaCoordinator.ownsUnfinishedTasks */
  readonly ownsUnfinishedTasks: boolean;
}

/**
 * Marks a send's new run hidden or visible. A new task's first record is the turn-in-flight one while nobody can
 * be shown it, and also where one process owns the store (LevelDB): a reader of the running task is answered from
 * the run, a listing writes it first (revealStored), crash recovery rebuilds it (recoveredRecord), and so a
 * streamed turn writes its task once, at its end.
 */
export function markStart(run: TaskRun, start: TurnStart): void {
  run.visible = start.continued || start.handedOver;
  run.storedHidden = !start.continued && (!run.visible || start.ownsUnfinishedTasks);
}

/** The task record stored with the turn's inbound message; a new task's id was just minted (`created`). */
export function inboundRecord(run: TaskRun, continued: boolean): TaskRecord {
  if (continued) return taskRecord(run.tenant, run.task);
  const { tenant, task } = run;
  return run.storedHidden ? new HiddenTaskRecord(tenant, task, true) : taskRecord(tenant, task, { created: true });
}

/** Someone outside the engine now knows of the running task (asked for it by id, attached to it): it outlives its turn. */
export function reveal(run: TaskRun, coordinator: Pick<ReplicaCoordinator, "shown">): void {
  if (run.visible) return;
  run.visible = true;
  coordinator.shown(run);
}

/** Reveals a run the store holds only as its turn-in-flight record: the record to write so a listing finds it. */
export function revealStored(run: TaskRun, coordinator: Pick<ReplicaCoordinator, "shown">): TaskRecord | undefined {
  if (!run.storedHidden) return undefined;
  reveal(run, coordinator);
  run.storedHidden = false;
  return taskRecord(run.tenant, run.task);
}

/** Whether the turn, answered with a Message, ends hidden: nobody was shown its task, so it leaves none behind. */
export function endsHidden(run: TaskRun): boolean {
  return !run.visible;
}

/**
 * The record of the turn's outcome. A turn that ends as a task hands its caller the task: from now on it is
 * visible. Not ReplicaCoordinator.shown: nobody followed the run, so a coordinator may leave its events unlogged.
 */
export function outcomeRecord(run: TaskRun, hidden: boolean): TaskRecord {
  if (hidden) return new HiddenTaskRecord(run.tenant, run.task, undefined);
  run.visible = true;
  run.storedHidden = false;
  return taskRecord(run.tenant, run.task);
}

/** A turn that ended hidden whose task someone asked for while its end was written: the record that keeps it. */
export function shownWhileEnding(run: TaskRun, hidden: boolean): TaskRecord | undefined {
  return hidden && run.visible ? taskRecord(run.tenant, run.task) : undefined;
}

/** Messages read back from a hidden turn's thread to rebuild its task: the turn's inbound message is the last. */
const hiddenTurnTail = 4;

/**
 * The task record of a turn cut off while hidden, found at restart: it ends as a task (a retry of its message
 * must find it). A record that kept only its ids, state and time (LevelDB) gets its task as it stood when the
 * turn started, its history the thread's messages of the task (one task runs per context: they end the thread).
 */
export async function recoveredRecord(store: ThreadStore, listed: TaskRecord): Promise<TaskRecord> {
  const { hidden: _, ...record } = listed;
  if (record.payload.length > 0) return record;
  const thread = { tenant: record.tenant, contextId: record.contextId };
  const messages = (await store.tail(thread, hiddenTurnTail)).filter((m) => m.taskId === record.taskId);
  const task = create(TaskSchema, {
    id: record.taskId,
    contextId: record.contextId,
    history: messages.map((m) => storedInbound(fromBinary(MessageSchema, m.payload), record.contextId, record.taskId)),
    artifacts: [],
  });
  task.status = create(TaskStatusSchema, { state: record.state, timestamp: timestampFromMs(record.updatedAt) });
  return taskRecord(record.tenant, task);
}

/**
 * A hidden turn's record, its payload encoded when the store first reads it (a backend that keeps hidden tasks
 * apart, LevelDB, never does), a getter on a class rather than on a literal. The task must not change until the
 * write settles: the engine awaits each such write before it changes the task again.
 */
class HiddenTaskRecord implements TaskRecord {
  readonly taskId: string;
  readonly contextId: string;
  readonly state: number;
  readonly updatedAt: number;
  readonly hidden = true;
  private encoded: Uint8Array | undefined;

  constructor(
    readonly tenant: string,
    private readonly task: Task,
    readonly created: true | undefined,
  ) {
    const stamp = task.status?.timestamp;
    this.taskId = task.id;
    this.contextId = task.contextId;
    this.state = task.status?.state ?? TaskState.UNSPECIFIED;
    this.updatedAt = stamp ? timestampMs(stamp) : Date.now();
  }

  get payload(): Uint8Array {
    this.encoded ??= toBinary(TaskSchema, this.task);
    return this.encoded;
  }
}
