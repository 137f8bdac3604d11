// Parley's wire vocabulary: the header names, extension URIs, error domains and
// reasons, and task-state predicates that the server, the bridge and the client
// must agree on. Hand-written, like field-layout.ts (the rest of this package is
// generated), so that each name is spelled once and every package imports it from here.

import { TaskState } from "./gen/lf/a2a/v1/a2a_pb.js";

/** Request and response headers (lower case, as HTTP/2 and the Fetch API carry them). */
export const headers = {
  /** The A2A protocol version the caller speaks (A2A 1.0 section 3.6). */
  a2aVersion: "a2a-version",
  /** The A2A extensions the caller activates, comma separated. */
  a2aExtensions: "a2a-extensions",
  /** The name A2A 0.3 clients still send for a2aExtensions. */
  a2aExtensionsV03: "x-a2a-extensions",
  /** The named agent of a multi-agent server that should answer. */
  agent: "parley-agent",
  /** The hop trace of an agent-to-agent session, comma separated. */
  hops: "parley-hops",
  /**
   * The chain context of a Converse started from inside an agent (request), and
   * what is left of its budget once the conversation ended (response trailer):
   * base64url of the same JSON that A2A messages carry under extensionUris.chain.
   */
  chain: "parley-chain",
  /** Resume a task's stream after this event sequence number (resumable streams). */
  resumeAfter: "parley-resume-after",
  /** The sequence number of the first event of a resumable stream (response header). */
  streamStart: "parley-stream-start",
  /** The id of a request, answered on every response and written to the request log. */
  requestId: "parley-request-id",
} as const;

/**
 * The request headers Parley's interceptors and handlers read: what a browser client may send (CORS) and
 * what the bridge passes on to the Connect services. Trace context is added where it is propagated.
 */
/**
 * The `Major.Minor` an A2A-Version value names (A2A 1.0 section 3.6: patch numbers are not negotiated, so
 * "1.0.1" is "1.0"); an empty value is "0.3" (section 3.6.2). A value that is not a version comes back trimmed.
 */
export function a2aMajorMinor(version: string | null | undefined): string {
  const trimmed = (version ?? "").trim();
  if (trimmed === "") return "0.3";
  const match = /^(\d{1,9})\.(\d{1,9})(?:\.\d{1,9})?$/.exec(trimmed);
  return match ? `${Number(match[1])}.${Number(match[2])}` : trimmed;
}

export const parleyRequestHeaders: readonly string[] = [
  "authorization",
  headers.a2aVersion,
  headers.a2aExtensions,
  headers.agent,
  headers.hops,
  headers.chain,
  headers.resumeAfter,
  headers.requestId,
];

/** A2A extension URIs that Parley declares in its agent cards. */
export const extensionUris = {
  /** Every task event carries a sequence number; a stream can be resumed after any of them. */
  resumableStreams: "https://parley.dev/extensions/resumable-streams/v1",
  /** The chain context (hop trace and budget) that every agent-to-agent hop carries. */
  chain: "https://parley.dev/extensions/chain/v1",
} as const;

/** The domain of the A2A specification's error reasons (google.rpc.ErrorInfo.domain). */
export const a2aErrorDomain = "a2a-protocol.org";
/** The domain of Parley's own error reasons. */
export const parleyErrorDomain = "parley.dev";

/** The A2A specification's error reasons (section 5.4), in ErrorInfo.reason spelling. */
export const a2aErrorReasons = [
  "TASK_NOT_FOUND",
  "TASK_NOT_CANCELABLE",
  "PUSH_NOTIFICATION_NOT_SUPPORTED",
  "UNSUPPORTED_OPERATION",
  "CONTENT_TYPE_NOT_SUPPORTED",
  "INVALID_AGENT_RESPONSE",
  "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
  "EXTENSION_SUPPORT_REQUIRED",
  "VERSION_NOT_SUPPORTED",
] as const;

/** Parley's own error reasons. */
export const parleyErrorReasons = [
  /** A task is already running in this contextId; metadata.taskId names it. */
  "CONTEXT_BUSY",
  /** The tenant sent more requests per second than allowed. */
  "RATE_LIMITED",
  /** A configured size or count limit was exceeded; metadata.limit names it. */
  "LIMIT_EXCEEDED",
  /** An agent-to-agent chain came back to a hop it already passed. */
  "LOOP_DETECTED",
  /** An agent-to-agent chain is longer than the hop limit. */
  "HOP_LIMIT",
  /** An agent-to-agent chain used up its step budget or deadline. */
  "BUDGET_EXHAUSTED",
] as const;

export type A2aErrorReason = (typeof a2aErrorReasons)[number];
export type ParleyErrorReason = (typeof parleyErrorReasons)[number];
export type ErrorReason = A2aErrorReason | ParleyErrorReason;

const terminalStates: ReadonlySet<TaskState> = new Set([
  TaskState.COMPLETED,
  TaskState.FAILED,
  TaskState.CANCELED,
  TaskState.REJECTED,
]);
const interruptedStates: ReadonlySet<TaskState> = new Set([TaskState.INPUT_REQUIRED, TaskState.AUTH_REQUIRED]);

/** A task in this state never changes again. */
export function isTerminalState(state: TaskState): boolean {
  return terminalStates.has(state);
}

/** A task in this state waits for the client: a follow-up message continues it. */
export function isInterruptedState(state: TaskState): boolean {
  return interruptedStates.has(state);
}

/** The agent's run of one turn is over in this state: terminal, or waiting for the client. */
export function endsTurn(state: TaskState): boolean {
  return terminalStates.has(state) || interruptedStates.has(state);
}

/**
 * What a hop reports back about a chain in its reply (task, status update or
 * message metadata under extensionUris.chain): the chain's id and the agent
 * steps left after everything the hop caused. Undefined when the reply does
 * not report on the chain `chainId`.
 */
export function chainReportOf(
  metadata: { readonly [key: string]: unknown } | undefined,
  chainId: string,
): { readonly stepsLeft: number } | undefined {
  const report = metadata?.[extensionUris.chain];
  if (typeof report !== "object" || report === null || Array.isArray(report)) return undefined;
  const { id, stepsLeft } = report as { id?: unknown; stepsLeft?: unknown };
  if (id !== chainId || typeof stepsLeft !== "number" || !Number.isInteger(stepsLeft) || stepsLeft < 0)
    return undefined;
  return { stepsLeft };
}
