import { create, fromJson, type JsonValue, type MessageInitShape, type MessageShape, toJson } from "@bufbuild/protobuf";
import { type CallOptions, Code, ConnectError } from "@connectrpc/connect";
import {
  type GetTaskRequestSchema,
  SendMessageRequestSchema,
  SendMessageResponseSchema,
  type StreamResponse,
  StreamResponseSchema,
  type Task,
  TaskSchema,
  headers as wire,
} from "@parley/proto";
import { a2aVersion } from "./client.js";
import type { A2ASender } from "./json-rpc-client.js";
import { sseMessages } from "./sse-messages.js";

export interface RestClientOptions {
  /** The agent's HTTP+JSON base URL, e.g. the bridge's root URL; "/message:send" and the rest go below it. */
  readonly url: string;
  readonly token?: string;
  readonly headers?: Readonly<Record<string, string>>;
}

/** What the CLI needs of an A2A agent over HTTP+JSON: the sends, and GetTask. */
export interface RestA2AClient extends A2ASender {
  getTask(request: MessageInitShape<typeof GetTaskRequestSchema>, options?: CallOptions): Promise<Task>;
}

/** google.rpc.Code names (the `status` of an HTTP+JSON error) as Connect codes; Connect spells CANCELLED Canceled. */
function codeOfStatus(status: unknown): Code | undefined {
  if (typeof status !== "string") return undefined;
  const name =
    status === "CANCELLED" ? "Canceled" : status.toLowerCase().replace(/(^|_)([a-z])/g, (_, __, c) => c.toUpperCase());
  const code = (Code as unknown as Record<string, unknown>)[name];
  return typeof code === "number" ? code : undefined;
}

const codeByHttpStatus: Readonly<Record<number, Code>> = {
  400: Code.InvalidArgument,
  401: Code.Unauthenticated,
  403: Code.PermissionDenied,
  404: Code.NotFound,
  409: Code.Aborted,
  415: Code.InvalidArgument,
  429: Code.ResourceExhausted,
  503: Code.Unavailable,
};

/**
 * An HTTP+JSON error answer (a google.rpc.Status under `error`, A2A 1.0 section 11.6) as a ConnectError, so the CLI
 * treats it like a Connect or gRPC failure; the ErrorInfo reason, when there is one, is named in the message.
 */
function failure(url: string, operation: string, status: number, body: string): ConnectError {
  let error: { status?: unknown; message?: unknown; details?: unknown } | undefined;
  try {
    const parsed = JSON.parse(body) as { error?: unknown };
    if (typeof parsed.error === "object" && parsed.error !== null) error = parsed.error as typeof error;
  } catch {
    error = undefined;
  }
  if (!error) {
    return new ConnectError(
      `${operation} on ${url} failed with HTTP ${status}: ${body.slice(0, 200) || "(empty body)"}`,
      codeByHttpStatus[status] ?? Code.Unavailable,
    );
  }
  const details = Array.isArray(error.details) ? error.details : [];
  const reason = details
    .map((d) => (typeof d === "object" && d !== null ? (d as { reason?: unknown }).reason : undefined))
    .find((r): r is string => typeof r === "string");
  const message = typeof error.message === "string" ? error.message : "error without a message";
  return new ConnectError(
    `${operation} on ${url} failed with HTTP ${status}${reason ? ` ${reason}` : ""}: ${message}`,
    codeOfStatus(error.status) ?? codeByHttpStatus[status] ?? Code.Unknown,
  );
}

function parseJson(url: string, operation: string, text: string): JsonValue {
  try {
    return JSON.parse(text) as JsonValue;
  } catch {
    throw new ConnectError(
      `${operation} on ${url} answered with something that is not JSON: ${JSON.stringify(text.slice(0, 200))}`,
      Code.Internal,
    );
  }
}

/** Speaks A2A 1.0 HTTP+JSON (section 11) to one agent: SendMessage, SendStreamingMessage over SSE, GetTask. */
export function createRestA2AClient(options: RestClientOptions): RestA2AClient {
  const base = options.url.replace(/\/+$/, "");
  const request = async (
    operation: string,
    method: "GET" | "POST",
    path: string,
    body: JsonValue | undefined,
    call: CallOptions | undefined,
  ): Promise<Response> => {
    const url = `${base}${path}`;
    const headers = new Headers({
      accept: path.endsWith(":stream") ? "text/event-stream, application/json" : "application/json",
      [wire.a2aVersion]: a2aVersion,
      ...options.headers,
    });
    if (body !== undefined) headers.set("content-type", "application/json");
    if (options.token) headers.set("authorization", `Bearer ${options.token}`);
    for (const [name, value] of new Headers(call?.headers)) headers.set(name, value);
    const signals = [call?.signal, call?.timeoutMs ? AbortSignal.timeout(call.timeoutMs) : undefined].filter(
      (s): s is AbortSignal => s !== undefined,
    );
    try {
      return await fetch(url, {
        method,
        headers,
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
        signal: signals.length > 0 ? AbortSignal.any(signals) : undefined,
      });
    } catch (error) {
      if (error instanceof Error && (error.name === "AbortError" || error.name === "TimeoutError")) {
        throw new ConnectError(
          `${operation} on ${url} was ${error.name === "TimeoutError" ? "timed out" : "canceled"}`,
          error.name === "TimeoutError" ? Code.DeadlineExceeded : Code.Canceled,
        );
      }
      const cause = error instanceof Error && error.cause instanceof Error ? `: ${error.cause.message}` : "";
      throw new ConnectError(`cannot reach the HTTP+JSON agent at ${base}${cause}`, Code.Unavailable);
    }
  };
  const sendBody = (init: MessageInitShape<typeof SendMessageRequestSchema>) =>
    toJson(SendMessageRequestSchema, create(SendMessageRequestSchema, init));

  return {
    async sendMessage(init, call): Promise<MessageShape<typeof SendMessageResponseSchema>> {
      const response = await request("SendMessage", "POST", "/message:send", sendBody(init), call);
      const text = await response.text();
      if (!response.ok) throw failure(base, "SendMessage", response.status, text);
      return fromJson(SendMessageResponseSchema, parseJson(base, "SendMessage", text), { ignoreUnknownFields: true });
    },

    async *sendStreamingMessage(init, call): AsyncIterable<StreamResponse> {
      const operation = "SendStreamingMessage";
      const response = await request(operation, "POST", "/message:stream", sendBody(init), call);
      if (!response.ok) throw failure(base, operation, response.status, await response.text());
      if (!(response.headers.get("content-type") ?? "").startsWith("text/event-stream") || !response.body) {
        throw new ConnectError(`${operation} on ${base} did not answer with an event stream`, Code.Internal);
      }
      for await (const event of sseMessages(response.body)) {
        const data = parseJson(base, operation, event.data);
        if (event.event === "error") throw failure(base, operation, response.status, event.data);
        yield fromJson(StreamResponseSchema, data, { ignoreUnknownFields: true });
      }
    },

    async getTask(init, call): Promise<Task> {
      const query = init.historyLength !== undefined ? `?historyLength=${init.historyLength}` : "";
      const path = `/tasks/${encodeURIComponent(init.id ?? "")}${query}`;
      const response = await request("GetTask", "GET", path, undefined, call);
      const text = await response.text();
      if (!response.ok) throw failure(base, "GetTask", response.status, text);
      return fromJson(TaskSchema, parseJson(base, "GetTask", text), { ignoreUnknownFields: true });
    },
  };
}
