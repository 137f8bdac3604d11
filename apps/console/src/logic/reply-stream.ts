import type { Timestamp } from "@bufbuild/protobuf/wkt";
import { type Artifact, endsTurn, type StreamResponse, type Task, TaskState } from "@parley/proto";
import { partsText } from "./format.js";

/** One state a task was seen in, with the server's timestamp of the change. */
export interface StateStep {
  readonly state: TaskState;
  readonly time: Timestamp | undefined;
  /** The status message's text (a failure reason, a question), if any. */
  readonly note: string;
}

export interface ReplyArtifact {
  readonly artifactId: string;
  readonly name: string;
  readonly text: string;
  readonly complete: boolean;
}

/** What the console knows about one task's reply, folded from its stream events. */
export interface ReplyState {
  readonly taskId: string;
  readonly contextId: string;
  readonly state: TaskState;
  /** Every distinct state in the order seen. */
  readonly steps: readonly StateStep[];
  /** The reply's artifacts in the order they first appeared. */
  readonly artifacts: readonly ReplyArtifact[];
  /** A reply that came as one Message instead of a task. */
  readonly message: string;
  /** Events folded in. */
  readonly events: number;
}

export const emptyReply: ReplyState = {
  taskId: "",
  contextId: "",
  state: TaskState.UNSPECIFIED,
  steps: [],
  artifacts: [],
  message: "",
  events: 0,
};

function withState(reply: ReplyState, state: TaskState, time: Timestamp | undefined, note: string): ReplyState {
  const last = reply.steps[reply.steps.length - 1];
  if (state === TaskState.UNSPECIFIED || (last && last.state === state)) return { ...reply, state: reply.state };
  return { ...reply, state, steps: [...reply.steps, { state, time, note }] };
}

function fromArtifact(a: Artifact, complete: boolean): ReplyArtifact {
  return { artifactId: a.artifactId, name: a.name, text: partsText(a.parts), complete };
}

function applyArtifact(reply: ReplyState, a: Artifact, append: boolean, lastChunk: boolean): ReplyState {
  const index = reply.artifacts.findIndex((x) => x.artifactId === a.artifactId);
  const chunk = fromArtifact(a, lastChunk);
  const artifacts = [...reply.artifacts];
  if (index < 0) artifacts.push(chunk);
  else {
    const prior = artifacts[index]!;
    artifacts[index] = append ? { ...prior, text: prior.text + chunk.text, complete: lastChunk } : chunk;
  }
  return { ...reply, artifacts };
}

/** A task snapshot (from SendMessage, GetTask or a stream's first event) replaces what it covers. */
export function applyTask(reply: ReplyState, task: Task): ReplyState {
  const base: ReplyState = {
    ...reply,
    taskId: task.id,
    contextId: task.contextId,
    artifacts: task.artifacts.length > 0 ? task.artifacts.map((a) => fromArtifact(a, true)) : reply.artifacts,
  };
  const status = task.status;
  return status ? withState(base, status.state, status.timestamp, partsText(status.message?.parts ?? [])) : base;
}

/** Folds one stream event into the reply. Pure: the same events give the same state. */
export function reduceReply(reply: ReplyState, event: StreamResponse): ReplyState {
  const counted = { ...reply, events: reply.events + 1 };
  const p = event.payload;
  switch (p.case) {
    case "task":
      return applyTask(counted, p.value);
    case "message":
      return {
        ...withState(counted, TaskState.COMPLETED, undefined, ""),
        contextId: p.value.contextId || reply.contextId,
        message: partsText(p.value.parts),
      };
    case "statusUpdate": {
      const s = p.value.status;
      const next = {
        ...counted,
        taskId: p.value.taskId || reply.taskId,
        contextId: p.value.contextId || reply.contextId,
      };
      return s ? withState(next, s.state, s.timestamp, partsText(s.message?.parts ?? [])) : next;
    }
    case "artifactUpdate":
      return p.value.artifact ? applyArtifact(counted, p.value.artifact, p.value.append, p.value.lastChunk) : counted;
    default:
      return counted;
  }
}

/**
 * The reply's text as a reader sees it: the direct message, the artifacts in order, or else the COMPLETED status's
 * message (a direct answer on a stream, which starts with its task, ends the task with it).
 */
export function replyText(reply: ReplyState): string {
  if (reply.message !== "") return reply.message;
  if (reply.artifacts.length > 0) return reply.artifacts.map((a) => a.text).join("\n");
  return reply.steps.find((s) => s.state === TaskState.COMPLETED)?.note ?? "";
}

/** The agent's run is over for this turn (terminal, or waiting for input): stop following. */
export function replyEnded(reply: ReplyState): boolean {
  return reply.state !== TaskState.UNSPECIFIED && endsTurn(reply.state);
}

/** A running task can be canceled. */
export function cancelable(reply: ReplyState): boolean {
  return reply.taskId !== "" && (reply.state === TaskState.SUBMITTED || reply.state === TaskState.WORKING);
}
