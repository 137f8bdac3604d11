import { isMessage, type Message } from "@bufbuild/protobuf";
import { headers, StreamResponseSchema, SubscribeToTaskRequestSchema } from "@parley/proto";
import { JsonRpcCode, JsonRpcError } from "./json-rpc-error.js";

/** Where a resubscribe picks up: the task and the seq of the last event the client received. */
export interface ResumePoint {
  readonly taskId: string;
  readonly afterSeq: number;
}

/**
 * Reads `Last-Event-ID: <taskId>:<seq>` of a SubscribeToTask/tasks/resubscribe.
 * Other methods ignore the header: a send always starts a stream of its own.
 * The task id may itself contain colons, so the seq is what follows the last one.
 */
export function resumePointOf(input: Message, lastEventId: string | undefined): ResumePoint | undefined {
  if (!isMessage(input, SubscribeToTaskRequestSchema)) return undefined;
  const raw = lastEventId?.trim();
  if (!raw) return undefined;
  const colon = raw.lastIndexOf(":");
  const taskId = colon > 0 ? raw.slice(0, colon) : "";
  const seq = colon > 0 ? raw.slice(colon + 1) : "";
  if (taskId === "" || !/^\d{1,15}$/.test(seq)) {
    throw new JsonRpcError(
      JsonRpcCode.InvalidParams,
      `invalid Last-Event-ID header ${JSON.stringify(raw.slice(0, 200))}: expected <taskId>:<seq>, the id of the last SSE event received`,
    );
  }
  if (taskId !== input.id) {
    throw new JsonRpcError(
      JsonRpcCode.InvalidParams,
      `invalid Last-Event-ID header: it names task ${JSON.stringify(taskId.slice(0, 200))}, but this request subscribes to task ${JSON.stringify(input.id)}`,
    );
  }
  return { taskId, afterSeq: Number(seq) };
}

/**
 * The seq before a stream's first event. Every Parley server sends it (both
 * backends keep a task event log); an upstream that sends none is numbered
 * from 0, which matches a stream that replays the task from its first event.
 */
export function streamStartOf(header: Headers): number {
  const raw = header.get(headers.streamStart)?.trim();
  return raw && /^\d{1,15}$/.test(raw) ? Number(raw) : 0;
}

/** The task an upstream stream event belongs to; a direct message reply without a task has none. */
export function taskIdOfEvent(event: Message): string | undefined {
  if (!isMessage(event, StreamResponseSchema)) return undefined;
  const p = event.payload;
  let id = "";
  if (p.case === "task") id = p.value.id;
  else if (p.case === "statusUpdate" || p.case === "artifactUpdate") id = p.value.taskId;
  else if (p.case === "message") id = p.value.taskId;
  return id === "" ? undefined : id;
}
