import { clone, type JsonObject } from "@bufbuild/protobuf";
import type { AgentEvent } from "@parley/domain";
import { ChainRefusedError, messageText, parleyMetadataKey } from "@parley/domain";
import type { ChainHand } from "@parley/domain/internal";
import { chainRefusalOf } from "@parley/domain/internal";
import {
  ArtifactSchema,
  createDeadline,
  endsTurn,
  isTerminalState,
  type StreamResponse,
  TaskState,
  type TaskStatus,
} from "@parley/proto";
import { PeerError } from "./peer-call.js";
import type { PeerConfig } from "./peer-options.js";
import type { PeerTransport } from "./peer-transport.js";

/** How long the cancel of a peer's task may take once this hop's turn was stopped. */
const peerCancelTimeoutMs = 5_000;

/** Whether reply metadata says a Parley peer's agent stayed silent. */
export function silentReply(metadata: { readonly [key: string]: unknown } | undefined): boolean {
  const parley = metadata?.[parleyMetadataKey];
  return typeof parley === "object" && parley !== null && (parley as { silent?: unknown }).silent === true;
}

/** The error of a peer task that ended FAILED or REJECTED: its status text, a chain refusal kept typed. */
export function peerTaskFailure(
  peer: PeerConfig,
  state: TaskState,
  status: string,
  metadata: JsonObject | undefined,
): Error {
  const text = `peer ${peer.name}'s task at ${peer.url} ended ${TaskState[state]}: ${status || "without a status message"}`;
  const refused = chainRefusalOf(metadata);
  return refused ? new ChainRefusedError(refused, text) : new PeerError(text);
}

/** The text of an artifact update whose parts are all text, or undefined when one is not. */
function textOnly(event: Extract<StreamResponse["payload"], { case: "artifactUpdate" }>["value"]): string | undefined {
  const parts = event.artifact?.parts ?? [];
  let text = "";
  for (const part of parts) {
    if (part.content.case !== "text") return undefined;
    text += part.content.value;
  }
  return text;
}

/**
 * Re-emits a peer's stream as this hop's own events as they arrive: text
 * chunks as reply chunks (in order, appended), other artifacts as they came,
 * WORKING once; the peer's end decides this turn's end as one send's answer
 * would (FAILED or REJECTED fail it, a silent reply stays silent, other
 * states are kept). The peer's work is charged to the chain when its end
 * arrives. A stop of this turn (cancel, timeout, shutdown) cancels the
 * peer's task; a stream that breaks or ends before the task did fails the
 * turn naming the peer.
 */
export async function* relayPeerStream(
  peer: PeerConfig,
  transport: PeerTransport,
  events: AsyncIterable<StreamResponse>,
  hand: ChainHand,
  signal: AbortSignal,
): AsyncGenerator<AgentEvent> {
  let taskId: string | undefined;
  let metadata: JsonObject | undefined;
  let status: TaskStatus | undefined;
  let working = false;
  let relayedText = false;
  let received = 0;
  try {
    for await (const event of events) {
      received++;
      const p = event.payload;
      if (p.case === "message") {
        // A direct answer: the peer's whole reply, and its only event.
        hand.settle(p.value.metadata);
        if (silentReply(p.value.metadata)) {
          yield { type: "silent" };
          return;
        }
        const text = messageText(p.value);
        if (text !== "") yield { type: "text", text };
        return;
      }
      if (p.case === "task") {
        taskId ??= p.value.id;
        metadata = { ...metadata, ...p.value.metadata };
        status = p.value.status;
        // A peer that sends its task whole at the end (no updates): its artifacts are the reply.
        if (!relayedText && status && isTerminalState(status.state)) {
          const text = p.value.artifacts.map((a) => messageText(a)).join("");
          if (text !== "") {
            relayedText = true;
            yield { type: "text", text };
          }
        }
      } else if (p.case === "statusUpdate") {
        taskId ??= p.value.taskId;
        if (p.value.metadata) metadata = { ...metadata, ...p.value.metadata };
        status = p.value.status;
        if (status?.state === TaskState.WORKING && !working) {
          working = true;
          yield { type: "state", state: TaskState.WORKING };
        }
      } else if (p.case === "artifactUpdate") {
        taskId ??= p.value.taskId;
        const text = textOnly(p.value);
        if (text !== undefined) {
          if (text !== "") {
            relayedText = true;
            yield { type: "text", text };
          }
        } else if (p.value.artifact) {
          yield {
            type: "artifact",
            artifact: clone(ArtifactSchema, p.value.artifact),
            append: p.value.append,
            lastChunk: p.value.lastChunk,
          };
        }
      }
      if (endsTurn(status?.state ?? TaskState.UNSPECIFIED)) break;
    }
  } finally {
    // This turn was stopped (the stream failed with the stop, or the engine stopped reading): the peer's task is
    // of no use any more.
    if (signal.aborted && taskId !== undefined && !endsTurn(status?.state ?? TaskState.UNSPECIFIED)) {
      await cancelQuietly(transport, taskId);
    }
  }
  const state = status?.state ?? TaskState.UNSPECIFIED;
  if (!endsTurn(state)) {
    throw new PeerError(
      `peer ${peer.name} (${peer.url}) ended its stream after ${received} events while its task${taskId ? ` ${taskId}` : ""} was ${TaskState[state]}`,
    );
  }
  hand.settle(metadata);
  const statusText = status?.message ? messageText(status.message) : "";
  if (state === TaskState.FAILED || state === TaskState.REJECTED)
    throw peerTaskFailure(peer, state, statusText, metadata);
  // A Parley peer whose agent stayed silent says so; this hop stays silent too rather than empty.
  if (silentReply(metadata)) {
    yield { type: "silent" };
    return;
  }
  // A reply the peer gave as its status (a Message answer turned into the task's end): the same reply here.
  if (!relayedText && state === TaskState.COMPLETED && statusText !== "") yield { type: "text", text: statusText };
  if (state !== TaskState.COMPLETED) yield { type: "state", state, ...(statusText ? { text: statusText } : {}) };
}

async function cancelQuietly(transport: PeerTransport, taskId: string): Promise<void> {
  // A peer that cannot be reached now keeps its task; this turn ends as it was stopped either way.
  const deadline = createDeadline(peerCancelTimeoutMs);
  await transport
    .cancel(taskId, deadline.signal)
    .catch(() => undefined)
    .finally(() => deadline.clear());
}
