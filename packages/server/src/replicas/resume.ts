import { create, fromBinary } from "@bufbuild/protobuf";
import type { HandlerContext } from "@connectrpc/connect";
import {
  type AgentExtension,
  AgentExtensionSchema,
  extensionUris,
  headers,
  type StreamResponse,
  StreamResponseSchema,
} from "@parley/proto";
import type { TaskEventLog } from "@parley/store";
import type { Engine } from "../engine/engine.js";
import { invalidArgument, requireSubscribable, taskNotFound } from "../errors.js";
import type { LeaseCoordinator } from "./lease-coordinator.js";

/** Request header of SubscribeToTask: the seq of the last event the client has; the stream starts after it. */
const resumeAfterHeader = headers.resumeAfter;
/** Response header of SendStreamingMessage and SubscribeToTask: the seq before the stream's first event. */
const streamStartHeader = headers.streamStart;

/** The agent card entry that documents resumable streams (advertised when replicas share PostgreSQL). */
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

/** The seq after which the task's latest run starts: its last final event before the end of the log. */
async function latestRunStart(
  events: TaskEventLog,
  tenant: string,
  taskId: string,
): Promise<{ start: number; ended: boolean }> {
  let start = 0;
  let after = 0;
  let ended = false;
  for (;;) {
    const batch = await events.read(tenant, taskId, after, 512);
    for (const event of batch) {
      ended = event.final;
      if (event.final) start = event.seq;
    }
    if (batch.length < 512) break;
    after = batch[batch.length - 1]!.seq;
  }
  // A log whose last event is final belongs to a run that has ended: the next one starts after it.
  return { start, ended };
}

/**
 * SubscribeToTask served from the shared event log, so it works on any
 * replica: without a resume point, the latest run's events from its first
 * (a Task snapshot); with one, exactly the events after it.
 */
export async function* subscribeFromLog(
  resumable: Resumable,
  engine: Engine,
  tenant: string,
  taskId: string,
  ctx: HandlerContext,
): AsyncGenerator<StreamResponse> {
  const resumeAfter = resumePoint(ctx);
  const task = await engine.getTask(tenant, taskId);
  if (!task) throw taskNotFound(taskId);
  let start = resumeAfter;
  if (start === undefined) {
    requireSubscribable(task);
    const latest = await latestRunStart(resumable.events, tenant, taskId);
    if (latest.ended) {
      // A task waiting for input has no running agent: its current state is all there is to send.
      ctx.responseHeader.set(streamStartHeader, String(latest.start));
      yield { payload: { case: "task", value: task } } as StreamResponse;
      return;
    }
    start = latest.start;
  }
  ctx.responseHeader.set(streamStartHeader, String(start));
  for await (const event of resumable.events.subscribe(tenant, taskId, start, ctx.signal)) {
    yield fromBinary(StreamResponseSchema, event.payload);
  }
}
