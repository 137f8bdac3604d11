import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, type HandlerContext } from "@connectrpc/connect";
import {
  type AgentExtension,
  AgentExtensionSchema,
  extensionUris,
  headers,
  isTerminalState,
  type StreamResponse,
  StreamResponseSchema,
  TaskState,
} from "@parley/proto";
import type { TaskEventLog } from "@parley/store/backends";
import type { Engine } from "../engine/engine.js";
import { decodeLoggedEvent } from "../engine/logged-events.js";
import { createTypedError, deadlinePassed, invalidArgument, requireSubscribable, taskNotFound } from "../errors.js";
import { type LeaseCoordinator, leavesWaiting } from "./lease-coordinator.js";

/** Request header of SubscribeToTask: the seq of the last event the client has; the stream starts after it. */
const resumeAfterHeader = headers.resumeAfter;
/** Response header of SendStreamingMessage and SubscribeToTask: the seq before the stream's first event. */
const streamStartHeader = headers.streamStart;

/** The agent card entry that documents resumable streams (advertised by every server with streaming on). */
export function resumableStreamsExtension(): AgentExtension {
  return create(AgentExtensionSchema, {
    uri: extensionUris.resumableStreams,
    description:
      `Every task event has a per-task sequence number. The n-th message of a SendStreamingMessage or SubscribeToTask ` +
      `stream has seq = ${streamStartHeader} (response header) + n. A client that loses a stream calls ` +
      `SubscribeToTask on any replica with the request header ${resumeAfterHeader}: <last seq it has> and receives ` +
      `exactly the events after it. Over the JSON-RPC bridge every SSE event carries id: <taskId>:<seq> and ` +
      `Last-Event-ID resumes.`,
    required: false,
  });
}

export interface Resumable {
  readonly events: TaskEventLog;
  readonly coordinator: LeaseCoordinator;
}

function resumePoint(ctx: HandlerContext): number | undefined {
  const raw = ctx.requestHeader.get(resumeAfterHeader);
  if (raw === null || raw === "") return undefined;
  if (!/^\d{1,15}$/.test(raw.trim())) {
    throw invalidArgument(`${resumeAfterHeader} must be the seq (a non-negative integer) of the last event received`);
  }
  return Number(raw.trim());
}

/**
 * SubscribeToTask served from the task event log, so it works on any replica
 * and after the stream that started the task went away: without a resume
 * point, the latest run's events from its first (a Task snapshot); with one,
 * exactly the events after it, also once the task has ended (while its log
 * is retained). A task waiting for input (INPUT_REQUIRED, AUTH_REQUIRED) is
 * followed through its follow-up turns until it reaches a terminal state.
 */
export async function* subscribeFromLog(
  resumable: Resumable,
  engine: Engine,
  tenant: string,
  taskId: string,
  ctx: HandlerContext,
): AsyncGenerator<StreamResponse> {
  const start = await startOf(resumable, engine, tenant, taskId, ctx);
  if (start === undefined) return;
  const { after, contextId } = start;
  const resumed = start.snapshot === undefined && (resumePoint(ctx) ?? 0) > 0;
  if (start.snapshot) yield start.snapshot;
  // A generator's locals live as long as it does: the task read above (its whole history and artifacts) must
  // not stay reachable while a slow client is followed, or every open stream holds one copy of it.
  const begun = start.snapshot !== undefined || resumed;
  start.snapshot = undefined;
  yield* followAcrossTurns(resumable.events, tenant, taskId, contextId, after, ctx.signal, begun);
}

/** Where a SubscribeToTask starts, and the snapshot it starts with; undefined when nothing is left to send. */
async function startOf(
  resumable: Resumable,
  engine: Engine,
  tenant: string,
  taskId: string,
  ctx: HandlerContext,
): Promise<{ after: number; contextId: string; snapshot: StreamResponse | undefined } | undefined> {
  const resumeAfter = resumePoint(ctx);
  // Only the state is needed to decide (and the context, which logged events leave out); the task itself (its
  // whole history and artifacts, megabytes for a long reply) is read only when it is sent: many subscribers
  // arriving together would each read and decode it, taking native memory the process never gives back.
  const head = await engine.taskHead(tenant, taskId);
  if (head === undefined) throw taskNotFound(taskId);
  const { state, contextId } = head;
  if (resumeAfter === undefined) {
    requireSubscribable(taskId, state);
    // Where the latest run starts, from the log's head: no event is read.
    const latest = await resumable.events.latestRun(tenant, taskId);
    if (latest.ended) {
      const task = await engine.getTask(tenant, taskId);
      if (!task) throw taskNotFound(taskId);
      requireSubscribable(taskId, task.status?.state ?? TaskState.UNSPECIFIED);
      // A task waiting for input has no running agent: its current state comes first, numbered as the
      // final event of the run it reflects, so the follow-up turn's events keep their own seqs.
      ctx.responseHeader.set(streamStartHeader, String(Math.max(0, latest.start - 1)));
      return { after: latest.start, contextId, snapshot: { payload: { case: "task", value: task } } as StreamResponse };
    }
    ctx.responseHeader.set(streamStartHeader, String(latest.start));
    return { after: latest.start, contextId, snapshot: undefined };
  }
  ctx.responseHeader.set(streamStartHeader, String(resumeAfter));
  if (isTerminalState(state)) {
    const last = await resumable.events.lastSeq(tenant, taskId);
    if (last === 0) {
      throw createTypedError(
        "UNSUPPORTED_OPERATION",
        `task ${taskId} is ${TaskState[state]} (terminal) and its events are no longer kept; read it with GetTask`,
        { taskId },
      );
    }
    // Nothing after the end: the stream is complete.
    if (resumeAfter >= last) return undefined;
  }
  return { after: resumeAfter, contextId, snapshot: undefined };
}

/** The log's events after `after`, across runs: a run that ends waiting for input is followed by the next. */
async function* followAcrossTurns(
  events: TaskEventLog,
  tenant: string,
  taskId: string,
  contextId: string,
  after: number,
  signal: AbortSignal,
  begun: boolean,
): AsyncGenerator<StreamResponse> {
  let next = after;
  // Only a stream's first event is a Task (section 3.1.2): a follow-up turn's opening snapshot becomes the status
  // update it carries, so the stream keeps one event per logged seq (resume points stay exact).
  let first = !begun;
  for (;;) {
    let waiting = false;
    let ran = false;
    for await (const logged of events.subscribe(tenant, taskId, next, signal)) {
      next = logged.seq;
      const event = decodeLoggedEvent(logged.payload, taskId, contextId);
      ran = logged.final;
      waiting = logged.final && leavesWaiting(event);
      yield first ? event : asUpdate(event, taskId, contextId);
      first = false;
    }
    // The log's follower ends quietly when the call's signal fires: a stream its deadline cut must not look
    // complete to the client.
    if (!ran && signal.aborted) throw cutShort(taskId, signal.reason);
    if (!waiting || signal.aborted) return;
  }
}

/** A Task event past a stream's start, as the TaskStatusUpdateEvent of its status; any other event as it is. */
function asUpdate(event: StreamResponse, taskId: string, contextId: string): StreamResponse {
  if (event.payload.case !== "task") return event;
  const task = event.payload.value;
  return create(StreamResponseSchema, {
    payload: {
      case: "statusUpdate",
      value: {
        taskId: task.id || taskId,
        contextId: task.contextId || contextId,
        ...(task.status ? { status: task.status } : {}),
      },
    },
  });
}

/** What a SubscribeToTask cut before the run's end ends with: the deadline's error naming the task, or the reason. */
function cutShort(taskId: string, reason: unknown): ConnectError {
  return (
    deadlinePassed(taskId, reason) ??
    (reason instanceof ConnectError
      ? reason
      : new ConnectError("the subscriber went away; the task runs on", Code.Canceled))
  );
}
