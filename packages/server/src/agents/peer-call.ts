import { create, fromJson, type JsonObject, type JsonValue, toJson } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import type { PeerAnswer } from "@parley/domain";
import { ChainRefusedError } from "@parley/domain";
import { isChainRefusalReason } from "@parley/domain/internal";
import {
  A2AService,
  ArtifactSchema,
  ErrorInfoSchema,
  type Message,
  MessageSchema,
  Role,
  SendMessageRequestSchema,
  SendMessageResponseSchema,
  type Task,
  TaskSchema,
  TaskState,
  headers as wireHeaders,
} from "@parley/proto";
import { injectTraceHeaders } from "../observability/tracing.js";
import { peerRequestHeaders } from "./peer-headers.js";
import type { PeerConfig } from "./peer-options.js";

/** A peer that could not be reached or answered with an error; the message names the cause. */
export class PeerError extends Error {
  override readonly name = "PeerError";
}

/** JSON-RPC codes of the chain refusals (the bridge's table), for peers that send no ErrorInfo. */
const chainReasonByJsonRpcCode: Readonly<Record<number, "LOOP_DETECTED" | "HOP_LIMIT" | "BUDGET_EXHAUSTED">> = {
  [-32055]: "LOOP_DETECTED",
  [-32056]: "HOP_LIMIT",
  [-32057]: "BUDGET_EXHAUSTED",
};

const bodySummaryChars = 200;

export function summary(text: string): string {
  const flat = text.replace(/\s+/g, " ").trim();
  if (flat === "") return "(empty body)";
  return flat.length <= bodySummaryChars ? flat : `${flat.slice(0, bodySummaryChars)}… (${flat.length} characters)`;
}

/** `ECONNREFUSED 127.0.0.1:8081` and the like, from a fetch or socket error and its causes. */
export function socketCauseOf(error: unknown): string | undefined {
  for (let e: unknown = error, depth = 0; e && depth < 5; depth++) {
    const o = e as { code?: unknown; address?: unknown; port?: unknown; errors?: unknown[]; cause?: unknown };
    if (typeof o.code === "string" && /^E[A-Z]+$/.test(o.code)) {
      return typeof o.address === "string" ? `${o.code} ${o.address}${o.port ? `:${o.port}` : ""}` : o.code;
    }
    e = Array.isArray(o.errors) && o.errors.length > 0 ? o.errors[0] : o.cause;
  }
  return undefined;
}

/** The error a failed call to `peer` throws: a PeerError or ChainRefusedError naming the cause, or the stop's reason. */
export function describePeerFailure(peer: PeerConfig, error: unknown, signal: AbortSignal): Error {
  if (signal.aborted) return signal.reason instanceof Error ? signal.reason : new Error(String(signal.reason));
  if (error instanceof PeerError || error instanceof ChainRefusedError) return error;
  if (error instanceof ConnectError) {
    const reason = error.findDetails(ErrorInfoSchema)[0]?.reason;
    const text = `peer ${peer.name} (${peer.url}) answered ${Code[error.code]}${reason ? ` ${reason}` : ""}: ${error.rawMessage}`;
    if (isChainRefusalReason(reason)) return new ChainRefusedError(reason, text);
    const socket = socketCauseOf(error.cause);
    return new PeerError(socket && !text.includes(socket) ? `${text} (${socket})` : text);
  }
  const socket = socketCauseOf(error);
  return new PeerError(
    `could not reach peer ${peer.name} at ${peer.url}: ${socket ?? (error instanceof Error ? error.message : String(error))}`,
  );
}

/** The headers of one call to `peer`: its version and token, its agent (gRPC), and the caller's trace context. */
export function peerCallHeaders(peer: PeerConfig): Record<string, string> {
  const v03 = peer.protocol === "jsonrpc" && peer.a2aVersion === "0.3";
  // The caller's trace context goes on to the peer, so a chain of hops is one trace.
  return injectTraceHeaders({
    ...peerRequestHeaders(peer),
    [wireHeaders.a2aVersion]: v03 ? "0.3" : "1.0",
    ...(peer.protocol === "grpc" && peer.agent ? { [wireHeaders.agent]: peer.agent } : {}),
  });
}

/**
 * Sends one message to a remote A2A agent and waits for its answer, over
 * gRPC (a stream, folded into the final task), JSON-RPC 1.0 (`SendMessage`),
 * JSON-RPC 0.3 (`message/send`, for peers configured with a2aVersion "0.3")
 * or HTTP+JSON (`POST /message:send`, protocol "rest"). Message metadata goes along untouched on every binding, so the
 * chain context survives each of them. A failure throws a PeerError naming
 * the cause (HTTP status and body, JSON-RPC error, ECONNREFUSED host:port),
 * or a ChainRefusedError when the peer refused the chain.
 */
export async function callPeer(peer: PeerConfig, message: Message, signal: AbortSignal): Promise<PeerAnswer> {
  const v03 = peer.protocol === "jsonrpc" && peer.a2aVersion === "0.3";
  const headers = peerCallHeaders(peer);
  const request = create(SendMessageRequestSchema, { message });
  try {
    if (peer.protocol === "grpc") return await callGrpc(peer, request, signal, headers);
    if (peer.protocol === "rest") return await callRest(peer, request, signal, headers);
    const response = await fetch(peer.url, {
      method: "POST",
      signal,
      headers: { "content-type": "application/json", ...headers },
      body: JSON.stringify({
        jsonrpc: "2.0",
        id: 1,
        method: v03 ? "message/send" : "SendMessage",
        params: v03 ? { message: messageToV03(message) } : toJson(SendMessageRequestSchema, request),
      }),
    });
    const raw = await response.text();
    let body: { jsonrpc?: unknown; result?: JsonValue; error?: unknown } | undefined;
    try {
      body = JSON.parse(raw) as typeof body;
    } catch {
      body = undefined;
    }
    // Only a JSON-RPC 2.0 response is one; anything else (a 404 page, a proxy's JSON) is an HTTP failure.
    if (
      !body ||
      typeof body !== "object" ||
      body.jsonrpc !== "2.0" ||
      (body.result === undefined && (typeof body.error !== "object" || body.error === null))
    ) {
      throw new PeerError(
        `peer ${peer.name} (${peer.url}) answered HTTP ${response.status}${response.statusText ? ` ${response.statusText}` : ""} without a JSON-RPC response: ${summary(raw)}`,
      );
    }
    if (body.error !== undefined) throw jsonRpcFailure(peer, response.status, body.error);
    if (v03) return answerFromV03(peer, body.result);
    return answerOf(peer, body.result);
  } catch (error) {
    throw describePeerFailure(peer, error, signal);
  }
}

function answerOf(peer: PeerConfig, result: JsonValue | undefined): PeerAnswer {
  const response = fromJson(SendMessageResponseSchema, result ?? null, { ignoreUnknownFields: true });
  if (response.payload.case === "message") return { kind: "message", message: response.payload.value };
  if (response.payload.case === "task") return { kind: "task", task: response.payload.value };
  throw new PeerError(`peer ${peer.name} (${peer.url}) answered with neither a task nor a message`);
}

/** HTTP+JSON (A2A 1.0 section 11): POST <url>/message:send; an error is a google.rpc.Status under `error`. */
async function callRest(
  peer: PeerConfig,
  request: ReturnType<typeof create<typeof SendMessageRequestSchema>>,
  signal: AbortSignal,
  headers: Record<string, string>,
): Promise<PeerAnswer> {
  const url = `${peer.url.replace(/\/+$/, "")}/message:send`;
  const response = await fetch(url, {
    method: "POST",
    signal,
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(toJson(SendMessageRequestSchema, request)),
  });
  const raw = await response.text();
  let body: JsonValue | undefined;
  try {
    body = JSON.parse(raw) as JsonValue;
  } catch {
    body = undefined;
  }
  const object = body !== null && typeof body === "object" && !Array.isArray(body) ? body : undefined;
  if (response.ok && object) return answerOf(peer, object);
  throw restFailure(peer, url, response, raw);
}

/**
 * The error of an HTTP+JSON answer that is not a success: its `google.rpc.Status` (status, reason, message) when
 * it has one (a ChainRefusedError for a chain refusal), otherwise the HTTP status and a body excerpt.
 */
export function restFailure(peer: PeerConfig, url: string, response: Response, raw: string): Error {
  let body: unknown;
  try {
    body = JSON.parse(raw);
  } catch {
    body = undefined;
  }
  const error = typeof body === "object" && body !== null ? (body as { error?: unknown }).error : undefined;
  if (typeof error !== "object" || error === null) {
    return new PeerError(
      `peer ${peer.name} (${url}) answered HTTP ${response.status}${response.statusText ? ` ${response.statusText}` : ""} without an A2A HTTP+JSON response: ${summary(raw)}`,
    );
  }
  const e = error as { status?: unknown; message?: unknown; details?: unknown };
  const reason = restReasonOf(error);
  const message = typeof e.message === "string" && e.message !== "" ? e.message : summary(JSON.stringify(error));
  const status = typeof e.status === "string" ? ` ${e.status}` : "";
  const text = `peer ${peer.name} (${url}) answered HTTP ${response.status}${status}${reason ? ` ${reason}` : ""}: ${message}`;
  return isChainRefusalReason(reason) ? new ChainRefusedError(reason, text) : new PeerError(text);
}

/** The ErrorInfo reason of a `google.rpc.Status` (UNSUPPORTED_OPERATION, TASK_NOT_FOUND, ...), if it names one. */
export function restReasonOf(status: object): string | undefined {
  const details = (status as { details?: unknown }).details;
  return (Array.isArray(details) ? details : [])
    .map((d) => (typeof d === "object" && d !== null ? (d as { reason?: unknown }).reason : undefined))
    .find((r): r is string => typeof r === "string");
}

/** The error of a JSON-RPC error object a peer answered with (a ChainRefusedError for a chain refusal). */
export function jsonRpcFailure(peer: PeerConfig, status: number, error: unknown): Error {
  const e = (typeof error === "object" && error !== null ? error : {}) as {
    code?: unknown;
    message?: unknown;
    data?: unknown;
  };
  const code = typeof e.code === "number" ? e.code : undefined;
  const message = typeof e.message === "string" && e.message !== "" ? e.message : summary(JSON.stringify(error));
  const infos = Array.isArray(e.data) ? e.data : [];
  const fromData = infos
    .map((d) => (typeof d === "object" && d !== null ? (d as { reason?: unknown }).reason : undefined))
    .find((r): r is string => typeof r === "string");
  const reason = fromData ?? (code !== undefined ? chainReasonByJsonRpcCode[code] : undefined);
  const text = `peer ${peer.name} (${peer.url}) answered JSON-RPC error ${code ?? "without a code"}${reason ? ` ${reason}` : ""} (HTTP ${status}): ${message}`;
  return isChainRefusalReason(reason) ? new ChainRefusedError(reason, text) : new PeerError(text);
}

async function callGrpc(
  peer: PeerConfig,
  request: ReturnType<typeof create<typeof SendMessageRequestSchema>>,
  signal: AbortSignal,
  headers: Record<string, string>,
): Promise<PeerAnswer> {
  const client = createClient(A2AService, createGrpcTransport({ baseUrl: peer.url }));
  let task: Task | undefined;
  for await (const event of client.sendStreamingMessage(request, { signal, headers })) {
    const p = event.payload;
    if (p.case === "message") return { kind: "message", message: p.value };
    if (p.case === "task") task = p.value;
    task ??= create(TaskSchema, {});
    if (p.case === "artifactUpdate" && p.value.artifact) {
      const artifact = p.value.artifact;
      const existing = task.artifacts.find((a) => a.artifactId === artifact.artifactId);
      if (existing && p.value.append) {
        // Streamed text chunks are one text, as the remote stores them.
        for (const part of artifact.parts) {
          const last = existing.parts[existing.parts.length - 1];
          if (last?.content.case === "text" && part.content.case === "text") last.content.value += part.content.value;
          else existing.parts.push(part);
        }
      } else task.artifacts.push(artifact);
    }
    if (p.case === "statusUpdate" && p.value.status) {
      task.status = p.value.status;
      if (p.value.metadata) task.metadata = { ...task.metadata, ...p.value.metadata };
    }
  }
  if (!task) throw new PeerError(`peer ${peer.name} (${peer.url}) ended its stream without a task or a message`);
  return { kind: "task", task };
}

/** The v0.3 JSON form of a text message (the only kind Parley forwards). */
export function messageToV03(message: Message): JsonObject {
  return {
    kind: "message",
    messageId: message.messageId,
    role: message.role === Role.AGENT ? "agent" : "user",
    parts: message.parts.flatMap((p) => (p.content.case === "text" ? [{ kind: "text", text: p.content.value }] : [])),
    ...(message.contextId ? { contextId: message.contextId } : {}),
    ...(message.taskId ? { taskId: message.taskId } : {}),
    ...(message.metadata ? { metadata: message.metadata } : {}),
  };
}

export const v03States: Readonly<Record<string, TaskState>> = {
  submitted: TaskState.SUBMITTED,
  working: TaskState.WORKING,
  "input-required": TaskState.INPUT_REQUIRED,
  "auth-required": TaskState.AUTH_REQUIRED,
  completed: TaskState.COMPLETED,
  failed: TaskState.FAILED,
  canceled: TaskState.CANCELED,
  rejected: TaskState.REJECTED,
};

export type V03Object = { readonly [key: string]: JsonValue | undefined };

export function v03Parts(value: JsonValue | undefined) {
  const parts = Array.isArray(value) ? value : [];
  return parts.flatMap((p) => {
    const o = (p ?? {}) as V03Object;
    return o.kind === "text" && typeof o.text === "string"
      ? [{ content: { case: "text" as const, value: o.text } }]
      : [];
  });
}

export function v03Message(value: JsonValue | undefined): Message {
  const o = (value ?? {}) as V03Object;
  return create(MessageSchema, {
    messageId: typeof o.messageId === "string" ? o.messageId : "",
    contextId: typeof o.contextId === "string" ? o.contextId : "",
    role: o.role === "user" ? Role.USER : Role.AGENT,
    parts: v03Parts(o.parts),
    ...(o.metadata && typeof o.metadata === "object" ? { metadata: o.metadata as JsonObject } : {}),
  });
}

export function answerFromV03(peer: PeerConfig, result: JsonValue | undefined): PeerAnswer {
  const o = (result ?? {}) as V03Object;
  if (o.kind === "message") return { kind: "message", message: v03Message(result) };
  if (o.kind !== "task")
    throw new PeerError(`peer ${peer.name} (${peer.url}) answered with neither a task nor a message`);
  const status = (o.status ?? {}) as V03Object;
  const artifacts = Array.isArray(o.artifacts) ? o.artifacts : [];
  return {
    kind: "task",
    task: create(TaskSchema, {
      id: typeof o.id === "string" ? o.id : "",
      contextId: typeof o.contextId === "string" ? o.contextId : "",
      status: {
        state: v03States[String(status.state)] ?? TaskState.UNSPECIFIED,
        ...(status.message ? { message: v03Message(status.message) } : {}),
      },
      artifacts: artifacts.map((a) => {
        const ao = (a ?? {}) as V03Object;
        return create(ArtifactSchema, {
          artifactId: typeof ao.artifactId === "string" ? ao.artifactId : "",
          parts: v03Parts(ao.parts),
          ...(ao.metadata && typeof ao.metadata === "object" ? { metadata: ao.metadata as JsonObject } : {}),
        });
      }),
      ...(o.metadata && typeof o.metadata === "object" ? { metadata: o.metadata as JsonObject } : {}),
    }),
  };
}
