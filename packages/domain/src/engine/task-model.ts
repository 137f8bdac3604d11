import { randomUUID } from "node:crypto";
import { clone, toBinary } from "@bufbuild/protobuf";
import { timestampMs } from "@bufbuild/protobuf/wkt";
import {
  type Artifact,
  ArtifactSchema,
  endsTurn,
  type Message,
  MessageSchema,
  type Part,
  Role,
  type StreamResponse,
  type Task,
  TaskSchema,
  TaskState,
  type TaskStatus,
} from "@parley/proto";
import type { TaskRecord } from "@parley/store";
import type { TaskRun } from "./task-run.js";
import {
  artifactUpdate,
  partCopy,
  partsArtifact,
  partsMessage,
  statusUpdate,
  streamResponse,
  taskStatus,
  textPart,
  timestampNow,
} from "./turn-messages.js";

/**
 * The task model: how a task's record, status, messages and artifacts are
 * built and changed, shared by the engine, its turn runner and the replica
 * coordinators.
 */

/** How a task record is written: see TaskRecord.created (a hidden turn's record is hidden-turn.ts's). */
export interface TaskRecordFlags {
  readonly created?: true;
}

/** The store record of a task (its state and timestamp indexed, the task itself encoded). */
export function taskRecord(tenant: string, task: Task, flags?: TaskRecordFlags): TaskRecord {
  const stamp = task.status?.timestamp;
  return {
    tenant,
    taskId: task.id,
    contextId: task.contextId,
    state: task.status?.state ?? TaskState.UNSPECIFIED,
    updatedAt: stamp ? timestampMs(stamp) : Date.now(),
    ...flags,
    payload: toBinary(TaskSchema, task),
  };
}

/**
 * A task in this state was being worked on by an agent: when the process (or
 * replica) that ran it is gone, nobody will finish it. Terminal tasks and
 * interrupted ones (INPUT_REQUIRED, AUTH_REQUIRED: they wait for the client)
 * are left alone.
 */
export function isCutOffByLostRun(state: TaskState): boolean {
  return state !== TaskState.UNSPECIFIED && !endsTurn(state);
}

/**
 * What a FAILED task whose run was cut off (a stop, a crash, a lost replica) tells its client: a retry of the same
 * messageId is answered with this FAILED task (a messageId names one message), so the turn is tried again as a
 * new message in the same conversation, whose history already holds the interrupted message.
 */
export function interruptedStatus(why: string, contextId: string): string {
  return `${why}; to try this turn again, send it as a new message (a new messageId) with contextId ${JSON.stringify(contextId)}: resending messageId of this task returns this FAILED task`;
}

/** Sets the task's status to `state` now, with an agent message saying why when `text` is given. */
export function setStatus(task: Task, state: TaskState, text?: string): void {
  task.status = taskStatus(state, timestampNow(), text !== undefined ? agentMessage(task, text) : undefined);
}

/** The message as stored in a task: the caller's message with the ids it belongs to filled in. */
export function withIds(message: Message, contextId: string, taskId: string): Message {
  const copy = clone(MessageSchema, message);
  copy.contextId = contextId;
  copy.taskId = taskId;
  if (copy.role === Role.UNSPECIFIED) copy.role = Role.USER;
  return copy;
}

export function agentMessage(task: Task, text: string): Message {
  return partsMessage(randomUUID(), task.contextId, task.id, Role.AGENT, [textPart(text)]);
}

/**
 * A copy of the task for its snapshot event. The history's messages are
 * shared, not copied: a message is never changed once it joined a history,
 * so the copy is safe from the run's later changes.
 * Copied by hand, not with protobuf's clone (its reflection cost a few
 * microseconds per event): the lists, the status and its time, the
 * artifacts and metadata; the status message is shared like the history's.
 */
export function taskSnapshot(task: Task): Task {
  return {
    ...task,
    status: task.status && statusCopy(task.status),
    artifacts: copies(task.artifacts, (a) => clone(ArtifactSchema, a)),
    history: task.history.slice(),
    metadata: task.metadata && structuredClone(task.metadata),
  };
}

/**
 * `items.map(copy)`, always as a packed array. V8 gives `map`'s result a packed kind in its builtin and a holey
 * one once the caller is optimized; the functions that read a task's lists later (its encoding, the bridge's JSON)
 * would meet a second kind of array and be deoptimized.
 */
function copies<T>(items: readonly T[], copy: (item: T) => T): T[] {
  const out: T[] = [];
  for (const item of items) out.push(copy(item));
  return out;
}

/** A copy of a status that the task's later changes do not reach: its message is never changed (see taskSnapshot). */
function statusCopy(status: TaskStatus): TaskStatus {
  return { ...status, timestamp: status.timestamp && { ...status.timestamp } };
}

/** The status update event of the task's current status (set with setStatus first). */
export function statusEvent(task: Task): StreamResponse {
  const status = task.status && statusCopy(task.status);
  return streamResponse({ case: "statusUpdate", value: statusUpdate(task.id, task.contextId, status) });
}

/**
 * Publishes the run's task as its first event, unless it has published one already or has ended: a stream
 * (SendStreamingMessage, SubscribeToTask) starts with the task's ids and state before its agent produces anything.
 */
export function announce(run: TaskRun): void {
  if (run.finished || run.events.length > 0) return;
  run.publish(streamResponse({ case: "task", value: taskSnapshot(run.task) }));
}

/** Publishes one append-only artifact update of the run's task (`artifact` is the event's own, not the task's). */
export function publishArtifact(run: TaskRun, artifact: Artifact, append: boolean, lastChunk: boolean): void {
  const update = artifactUpdate(run.task.id, run.task.contextId, artifact, append, lastChunk);
  run.publish(streamResponse({ case: "artifactUpdate", value: update }));
}

/** Adds parts to the task's artifact `artifactId` (appending to it, or replacing it with `whole`). */
export function appendArtifact(task: Task, artifactId: string, parts: Part[], append: boolean, whole?: Artifact): void {
  const existing = task.artifacts.find((a) => a.artifactId === artifactId);
  // Copies: the task's last text part is extended in place below, and `parts` may be an event's too.
  const created = copies(parts, partCopy);
  if (existing && append) {
    // Consecutive text chunks fold into one part so the stored task reads as one reply.
    const last = existing.parts[existing.parts.length - 1];
    for (const part of created) {
      if (last && last.content.case === "text" && part.content.case === "text" && part.metadata === undefined) {
        last.content.value += part.content.value;
      } else {
        existing.parts.push(part);
      }
    }
    return;
  }
  const artifact = whole ? clone(ArtifactSchema, whole) : partsArtifact(artifactId, "reply", created);
  if (existing) task.artifacts.splice(task.artifacts.indexOf(existing), 1, artifact);
  else task.artifacts.push(artifact);
}
