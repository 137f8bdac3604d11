import { create, fromJson, type JsonValue, type MessageInitShape, toJson } from "@bufbuild/protobuf";
import { type CallOptions, type Client, Code, ConnectError } from "@connectrpc/connect";
import {
  type A2AService,
  createDeadline,
  SendMessageRequestSchema as RequestSchema,
  type SendMessageRequestSchema,
  type SendMessageResponse,
  SendMessageResponseSchema,
  type StreamResponse,
  StreamResponseSchema,
  headers as wire,
} from "@parley/proto";
import { a2aVersion } from "./client.js";
import { sseMessages } from "./sse-messages.js";

/** The two A2A calls a conversation needs; a Connect A2AService client is one, so is a JSON-RPC client. */
export type A2ASender = Pick<Client<typeof A2AService>, "sendMessage" | "sendStreamingMessage">;

export interface JsonRpcClientOptions {
  /** The agent's JSON-RPC endpoint, e.g. the bridge's root URL. */
  readonly url: string;
  readonly token?: string;
  readonly headers?: Readonly<Record<string, string>>;
}

/** A2A 1.0 JSON-RPC and Parley error codes, as the bridge answers them, mapped onto Connect codes. */
const codeByJsonRpcCode: Readonly<Record<number, Code>> = {
  [-32700]: Code.InvalidArgument,
  [-32600]: Code.InvalidArgument,
  [-32601]: Code.Unimplemented,
  [-32602]: Code.InvalidArgument,
  [-32603]: Code.Internal,
  [-32001]: Code.NotFound,
  [-32002]: Code.FailedPrecondition,
  [-32003]: Code.FailedPrecondition,
  [-32004]: Code.FailedPrecondition,
  [-32005]: Code.InvalidArgument,
  [-32006]: Code.Internal,
  [-32007]: Code.FailedPrecondition,
  [-32008]: Code.FailedPrecondition,
  [-32009]: Code.FailedPrecondition,
  [-32050]: Code.Aborted,
  [-32051]: Code.ResourceExhausted,
  [-32052]: Code.ResourceExhausted,
  [-32053]: Code.Unauthenticated,
  [-32054]: Code.PermissionDenied,
  [-32055]: Code.FailedPrecondition,
  [-32056]: Code.ResourceExhausted,
  [-32057]: Code.ResourceExhausted,
};

const codeByHttpStatus: Readonly<Record<number, Code>> = {
  400: Code.InvalidArgument,
  401: Code.Unauthenticated,
  403: Code.PermissionDenied,
  404: Code.NotFound,
  409: Code.Aborted,
  429: Code.ResourceExhausted,
  503: Code.Unavailable,
};

/**
 * JSON-RPC errors become ConnectErrors so callers (and the CLI's exit codes)
 * treat a JSON-RPC peer exactly like a gRPC or Connect one.
 */
function jsonRpcErrorToConnect(url: string, method: string, error: unknown): ConnectError {
  const object = (typeof error === "object" && error !== null ? error : {}) as Record<string, unknown>;
  const code = typeof object.code === "number" ? object.code : undefined;
  const message = typeof object.message === "string" ? object.message : "error without a message";
  const connectCode = (code !== undefined ? codeByJsonRpcCode[code] : undefined) ?? Code.Unknown;
  return new ConnectError(
    `${method} on ${url} failed with JSON-RPC error ${code ?? "(no code)"}: ${message}`,
    connectCode,
  );
}

function parseEnvelope(url: string, method: string, text: string): Record<string, unknown> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new ConnectError(
      `${method} on ${url} answered with something that is not JSON: ${JSON.stringify(text.slice(0, 200))}`,
      Code.Internal,
    );
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
    throw new ConnectError(
      `${method} on ${url} answered with a JSON value that is not a JSON-RPC response`,
      Code.Internal,
    );
  }
  const envelope = parsed as Record<string, unknown>;
  if (envelope.error !== undefined) throw jsonRpcErrorToConnect(url, method, envelope.error);
  if (envelope.result === undefined) {
    throw new ConnectError(
      `${method} on ${url} answered with a JSON-RPC response that has neither result nor error`,
      Code.Internal,
    );
  }
  return envelope;
}

function httpFailure(url: string, method: string, status: number, body: string): ConnectError {
  // Many bridges answer errors with a JSON-RPC body under a non-200 status; that body is the better message.
  try {
    parseEnvelope(url, method, body);
  } catch (error) {
    if (error instanceof ConnectError && error.code !== Code.Internal) return error;
  }
  return new ConnectError(
    `${method} on ${url} failed with HTTP ${status}: ${body.slice(0, 200) || "(empty body)"}`,
    codeByHttpStatus[status] ?? Code.Unavailable,
  );
}

/** Speaks A2A 1.0 JSON-RPC (SendMessage, SendStreamingMessage over SSE) to one agent URL. */
export function createJsonRpcA2AClient(options: JsonRpcClientOptions): A2ASender {
  const url = options.url;
  let nextId = 1;
  const post = async (
    method: string,
    request: MessageInitShape<typeof SendMessageRequestSchema>,
    call?: CallOptions,
  ) => {
    const params = toJson(RequestSchema, create(RequestSchema, request));
    const headers = new Headers({
      "content-type": "application/json",
      accept: method === "SendStreamingMessage" ? "text/event-stream, application/json" : "application/json",
      [wire.a2aVersion]: a2aVersion,
      ...options.headers,
    });
    if (options.token) headers.set("authorization", `Bearer ${options.token}`);
    for (const [name, value] of new Headers(call?.headers)) headers.set(name, value);
    // The deadline covers the whole call, the body or stream included: the caller clears it when that ended.
    const deadline = call?.timeoutMs ? createDeadline(call.timeoutMs, call.signal) : undefined;
    try {
      const response = await fetch(url, {
        method: "POST",
        headers,
        body: JSON.stringify({ jsonrpc: "2.0", id: nextId++, method, params }),
        signal: deadline?.signal ?? call?.signal,
      });
      return { response, deadline };
    } catch (error) {
      deadline?.clear();
      if (error instanceof Error && (error.name === "AbortError" || error.name === "TimeoutError")) {
        throw new ConnectError(
          `${method} on ${url} was ${error.name === "TimeoutError" ? "timed out" : "canceled"}`,
          error.name === "TimeoutError" ? Code.DeadlineExceeded : Code.Canceled,
        );
      }
      const cause = error instanceof Error && error.cause instanceof Error ? `: ${error.cause.message}` : "";
      throw new ConnectError(`cannot reach the JSON-RPC agent at ${url}${cause}`, Code.Unavailable);
    }
  };

  return {
    async sendMessage(request, call): Promise<SendMessageResponse> {
      const { response, deadline } = await post("SendMessage", request, call);
      try {
        const body = await response.text();
        if (!response.ok) throw httpFailure(url, "SendMessage", response.status, body);
        const envelope = parseEnvelope(url, "SendMessage", body);
        return fromJson(SendMessageResponseSchema, envelope.result as JsonValue, { ignoreUnknownFields: true });
      } catch (error) {
        throw deadline?.expired ? timedOut("SendMessage") : error;
      } finally {
        deadline?.clear();
      }
    },

    async *sendStreamingMessage(request, call): AsyncIterable<StreamResponse> {
      const method = "SendStreamingMessage";
      const { response, deadline } = await post(method, request, call);
      try {
        yield* readStream(method, response);
      } catch (error) {
        throw deadline?.expired ? timedOut(method) : error;
      } finally {
        deadline?.clear();
      }
    },
  };

  function timedOut(method: string): ConnectError {
    return new ConnectError(`${method} on ${url} was timed out`, Code.DeadlineExceeded);
  }

  async function* readStream(method: string, response: Response): AsyncIterable<StreamResponse> {
    if (!response.ok) throw httpFailure(url, method, response.status, await response.text());
    const type = response.headers.get("content-type") ?? "";
    if (!type.startsWith("text/event-stream")) {
      // A JSON answer to a streaming request is an error or a single final result.
      const envelope = parseEnvelope(url, method, await response.text());
      yield fromJson(StreamResponseSchema, envelope.result as JsonValue, { ignoreUnknownFields: true });
      return;
    }
    if (!response.body)
      throw new ConnectError(`${method} on ${url} answered with an empty event stream`, Code.Internal);
    for await (const event of sseMessages(response.body)) {
      const envelope = parseEnvelope(url, method, event.data);
      yield fromJson(StreamResponseSchema, envelope.result as JsonValue, { ignoreUnknownFields: true });
    }
  }
}
