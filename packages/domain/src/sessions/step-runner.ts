import { create, type JsonObject } from "@bufbuild/protobuf";
import {
  type Artifact,
  createDeadline,
  type Message,
  MessageSchema,
  Role,
  SendMessageRequestSchema,
  type Task,
  TaskState,
} from "@parley/proto";
import {
  type ChainRefusalReason,
  ChainRefusedError,
  chainRefusalOf,
  isChainRefusalReason,
} from "../chain/chain-refusal.js";
import type { Engine } from "../engine/engine.js";
import { errorReasonOf } from "../errors.js";
import { messageText } from "../thread/history.js";
import type { CallPeer, SessionPeer } from "./session-peer.js";
import { withheldOf } from "./step-guard.js";

/** How one step of a conversation ended. */
export type StepResult =
  | { readonly kind: "reply"; readonly text: string }
  | { readonly kind: "silent" }
  | { readonly kind: "repeat"; readonly of: number }
  | { readonly kind: "empty" }
  | { readonly kind: "timeout" }
  | { readonly kind: "failed"; readonly detail: string }
  | { readonly kind: "canceled"; readonly detail: string }
  /** The receiving hop refused the chain (LOOP_DETECTED, HOP_LIMIT, BUDGET_EXHAUSTED). */
  | { readonly kind: "refused"; readonly reason: ChainRefusalReason; readonly detail: string };

/** A step's result, plus the reply's metadata (which reports what is left of the chain's budget). */
export interface StepOutcome {
  readonly result: StepResult;
  readonly metadata?: JsonObject | undefined;
}

function replyOf(artifacts: readonly Artifact[], finalState: TaskState, statusText: string): StepResult {
  let text = "";
  for (const artifact of artifacts) {
    const withheld = withheldOf(artifact);
    if (withheld) return withheld.outcome === "silent" ? { kind: "silent" } : { kind: "repeat", of: withheld.of };
    text += messageText(artifact);
  }
  switch (finalState) {
    case TaskState.FAILED:
    case TaskState.REJECTED:
      return { kind: "failed", detail: statusText || "the agent failed without saying why" };
    case TaskState.CANCELED:
      return { kind: "canceled", detail: statusText || "the task was canceled" };
    default:
      if (text === "" && finalState !== TaskState.COMPLETED) text = statusText;
      return text.trim() === "" ? { kind: "empty" } : { kind: "reply", text };
  }
}

function resultOfTask(task: Task): StepResult {
  const status = task.status;
  const refused = chainRefusalOf(task.metadata);
  if (refused && status?.state === TaskState.FAILED) {
    return { kind: "refused", reason: refused, detail: status.message ? messageText(status.message) : refused };
  }
  return replyOf(
    task.artifacts,
    status?.state ?? TaskState.UNSPECIFIED,
    status?.message ? messageText(status.message) : "",
  );
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * Runs a step on a hosted agent through the engine, so it gets the busy
 * guard, persist-first and the thread's history like any other message.
 * A step that outlives `timeoutMs` is canceled.
 */
export async function runLocalStep(
  engine: Engine,
  caller: { readonly tenant: string; readonly agent: string },
  message: Message,
  timeoutMs: number,
): Promise<StepOutcome> {
  let outcome: Awaited<ReturnType<Engine["send"]>>;
  try {
    outcome = await engine.send(caller, create(SendMessageRequestSchema, { message }));
  } catch (error) {
    const reason = errorReasonOf(error);
    if (isChainRefusalReason(reason)) return { result: { kind: "refused", reason, detail: describe(error) } };
    return { result: { kind: "failed", detail: `agent ${caller.agent} could not take the step: ${describe(error)}` } };
  }
  if (outcome.kind === "stored") return { result: resultOfTask(outcome.task), metadata: outcome.task.metadata };
  if (outcome.kind === "reply") {
    return { result: textReply(messageText(outcome.message)), metadata: outcome.message.metadata };
  }
  const run = outcome.run;
  let timer: NodeJS.Timeout | undefined;
  const timedOut = await Promise.race([
    run.settled.then(() => false),
    new Promise<boolean>((resolve) => {
      timer = setTimeout(() => resolve(true), timeoutMs);
    }),
  ]);
  clearTimeout(timer);
  if (timedOut) {
    await engine.cancel(caller.tenant, run.taskId).catch(() => undefined);
    return { result: { kind: "timeout" }, metadata: run.task.metadata };
  }
  return { result: resultOfTask(run.task), metadata: run.task.metadata };
}

/**
 * Runs a step on a remote A2A peer. The message keeps its Parley metadata,
 * so a Parley peer stores it as inter-session, frames it with the protocol
 * instructions and withholds silence on its side as well.
 */
export async function runPeerStep(
  callPeer: CallPeer,
  peer: SessionPeer,
  message: Message,
  timeoutMs: number,
): Promise<StepOutcome> {
  const deadline = createDeadline(timeoutMs);
  const signal = deadline.signal;
  try {
    const answer = await callPeer(peer, message, signal);
    if (answer.kind === "message") {
      return { result: textReply(messageText(answer.message)), metadata: answer.message.metadata };
    }
    return { result: resultOfTask(answer.task), metadata: answer.task.metadata };
  } catch (error) {
    if (signal.aborted) return { result: { kind: "timeout" } };
    if (error instanceof ChainRefusedError) {
      return { result: { kind: "refused", reason: error.reason, detail: error.message } };
    }
    return { result: { kind: "failed", detail: describe(error) } };
  } finally {
    deadline.clear();
  }
}

function textReply(text: string): StepResult {
  return text.trim() === "" ? { kind: "empty" } : { kind: "reply", text };
}

/** A step message: the text a session said, addressed to the other session's thread. */
export function stepMessage(init: {
  readonly messageId: string;
  readonly contextId: string;
  readonly text: string;
  readonly metadata: Message["metadata"];
  /** USER (default): a step another session sends; AGENT: what the receiving session itself sent. */
  readonly role?: Role;
}): Message {
  return create(MessageSchema, {
    messageId: init.messageId,
    contextId: init.contextId,
    role: init.role ?? Role.USER,
    parts: [{ content: { case: "text", value: init.text } }],
    ...(init.metadata ? { metadata: init.metadata } : {}),
  });
}
