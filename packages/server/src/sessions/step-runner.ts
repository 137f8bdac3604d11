import { create, fromJson, type JsonValue, toJson } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import {
  A2AService,
  type Artifact,
  type Message,
  MessageSchema,
  Role,
  SendMessageRequestSchema,
  SendMessageResponseSchema,
  type Task,
  TaskState,
} from "@parley/proto";
import { peerRequestHeaders } from "../agents/peer-headers.js";
import { withheldOf } from "../agents/step-guard.js";
import type { PeerConfig } from "../config.js";
import type { Engine } from "../engine/engine.js";
import { messageText } from "../engine/history.js";
import { injectTraceHeaders } from "../observability/tracing.js";

/** How one step of a conversation ended. */
export type StepResult =
  | { readonly kind: "reply"; readonly text: string }
  | { readonly kind: "silent" }
  | { readonly kind: "repeat"; readonly of: number }
  | { readonly kind: "empty" }
  | { readonly kind: "timeout" }
  | { readonly kind: "failed"; readonly detail: string }
  | { readonly kind: "canceled"; readonly detail: string };

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
): Promise<StepResult> {
  let outcome: Awaited<ReturnType<Engine["send"]>>;
  try {
    outcome = await engine.send(caller, create(SendMessageRequestSchema, { message }));
  } catch (error) {
    return { kind: "failed", detail: `agent ${caller.agent} could not take the step: ${describe(error)}` };
  }
  if (outcome.kind === "stored") return resultOfTask(outcome.task);
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
    return { kind: "timeout" };
  }
  return resultOfTask(run.task);
}

/**
 * Runs a step on a remote A2A peer. The message keeps its Parley metadata,
 * so a Parley peer stores it as inter-session, frames it with the protocol
 * instructions and withholds silence on its side as well.
 */
export async function runPeerStep(peer: PeerConfig, message: Message, timeoutMs: number): Promise<StepResult> {
  const headers = peerRequestHeaders(peer);
  const request = create(SendMessageRequestSchema, { message });
  const signal = AbortSignal.timeout(timeoutMs);
  try {
    if (peer.protocol === "grpc") {
      const client = createClient(A2AService, createGrpcTransport({ baseUrl: peer.url }));
      const artifacts: Artifact[] = [];
      let state: TaskState = TaskState.COMPLETED;
      let statusText = "";
      for await (const event of client.sendStreamingMessage(request, {
        signal,
        headers: injectTraceHeaders({ ...headers }),
      })) {
        const p = event.payload;
        if (p.case === "message") return textReply(messageText(p.value));
        if (p.case === "task") artifacts.splice(0, artifacts.length, ...p.value.artifacts);
        if (p.case === "artifactUpdate" && p.value.artifact) artifacts.push(p.value.artifact);
        if (p.case === "statusUpdate" && p.value.status) {
          state = p.value.status.state;
          statusText = p.value.status.message ? messageText(p.value.status.message) : "";
        }
      }
      return replyOf(artifacts, state, statusText);
    }
    const response = await fetch(peer.url, {
      method: "POST",
      signal,
      headers: injectTraceHeaders({ "content-type": "application/json", ...headers }),
      body: JSON.stringify({
        jsonrpc: "2.0",
        id: 1,
        method: "SendMessage",
        params: toJson(SendMessageRequestSchema, request),
      }),
    });
    const body = (await response.json().catch(() => undefined)) as
      | { result?: JsonValue; error?: { code: number; message: string } }
      | undefined;
    if (!body)
      return { kind: "failed", detail: `peer ${peer.name} answered HTTP ${response.status} without a JSON-RPC body` };
    if (body.error)
      return { kind: "failed", detail: `peer ${peer.name} answered error ${body.error.code}: ${body.error.message}` };
    const result = fromJson(SendMessageResponseSchema, body.result ?? null, { ignoreUnknownFields: true });
    if (result.payload.case === "message") return textReply(messageText(result.payload.value));
    if (result.payload.case === "task") return resultOfTask(result.payload.value);
    return { kind: "failed", detail: `peer ${peer.name} answered with neither a task nor a message` };
  } catch (error) {
    if (signal.aborted) return { kind: "timeout" };
    const code = error instanceof ConnectError ? ` (${Code[error.code]})` : "";
    return { kind: "failed", detail: `peer ${peer.name} failed${code}: ${describe(error)}` };
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
}): Message {
  return create(MessageSchema, {
    messageId: init.messageId,
    contextId: init.contextId,
    role: Role.USER,
    parts: [{ content: { case: "text", value: init.text } }],
    ...(init.metadata ? { metadata: init.metadata } : {}),
  });
}
