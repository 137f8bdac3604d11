import { getEventListeners } from "node:events";
import type { IncomingMessage, ServerResponse } from "node:http";
import { isMessage, type Message } from "@bufbuild/protobuf";
import { ConnectError, createContextValues, type Transport } from "@connectrpc/connect";
import { parleyErrorDomain, SendMessageRequestSchema, headers as wire } from "@parley/proto";
import { noteRequest } from "@parley/server";
import { clientAddressKey } from "@parley/serving";
import type { AgentCheck, UnknownAgent } from "./card-source.js";
import { contentTypeError } from "./content-type.js";
import { sendJson } from "./http-response.js";
import { errorInfoData, isInternal, JsonRpcCode, JsonRpcError, toJsonRpcError } from "./json-rpc-error.js";
import { type JsonRpcId, parseEnvelope, parseJsonBody, readBody, salvageId } from "./json-rpc-request.js";
import type { Logger } from "./logger.js";
import { findMethod, type UpstreamStream } from "./methods.js";
import { checkVersion, negotiateVersion } from "./protocol-version.js";
import { headerValue, upstreamHeaders } from "./request-headers.js";
import { resumePointOf } from "./sse-resume.js";
import type { SseWriter } from "./sse-writer.js";

export interface BridgeLimits {
  /** Largest request body. */
  readonly maxBodyBytes: number;
  /** Deepest JSON nesting accepted. */
  readonly maxJsonDepth: number;
  /** Most parts one message may carry. */
  readonly maxPartsPerMessage: number;
}

export const defaultLimits: BridgeLimits = { maxBodyBytes: 1024 * 1024, maxJsonDepth: 64, maxPartsPerMessage: 64 };

export interface RpcHandlerOptions {
  /** The Connect transport every A2A call goes through. */
  readonly upstream: Transport;
  readonly limits: BridgeLimits;
  readonly checkAgent: AgentCheck;
  readonly sse: SseWriter;
  readonly logger: Logger;
}

/** Answers one POSTed JSON-RPC request: a JSON result, an SSE stream, or a JSON-RPC error. */
export type RpcHandler = (req: IncomingMessage, res: ServerResponse, url: URL, agent?: string) => Promise<void>;

/** Refuses a message with more parts than `max` (LIMIT_EXCEEDED), on every binding. */
export function checkParts(input: Message, max: number): void {
  if (!isMessage(input, SendMessageRequestSchema)) return;
  const count = input.message?.parts.length ?? 0;
  if (count > max) {
    throw new JsonRpcError(
      JsonRpcCode.LimitExceeded,
      `message.parts has ${count} parts; at most ${max} are accepted per message`,
      { data: errorInfoData("LIMIT_EXCEEDED", parleyErrorDomain, { limit: "maxPartsPerMessage", max: String(max) }) },
    );
  }
}

/**
 * The AbortControllers of calls that are over, never aborted and with no listener left on their signal, for the
 * next requests: making one is costly enough to show in a send's and a stream's profile. Handed back only from the
 * response's close event, once the response is finished (a stream's once the SSE writer is done with it), so the
 * client going away can no longer abort it; a signal something still listens on (a remote transport's linked
 * controller) is not reused, so no listener piles up on it.
 */
const spareControllers: AbortController[] = [];
const maxSpareControllers = 256;

function giveBack(controller: AbortController): void {
  if (controller.signal.aborted || spareControllers.length >= maxSpareControllers) return;
  if (getEventListeners(controller.signal, "abort").length > 0) return;
  spareControllers.push(controller);
}

/** Any failure as the error a client is answered with (both bindings map it from here). */
function asRpcError(error: unknown): JsonRpcError {
  if (error instanceof JsonRpcError || error instanceof ConnectError) return toJsonRpcError(error);
  return new JsonRpcError(JsonRpcCode.InternalError, `internal error in the bridge: ${(error as Error).message}`);
}

/** The error a client is answered with; the bridge's own faults are logged as errors, refusals at debug. */
export function loggedRpcError(logger: Logger, error: unknown, method: string): JsonRpcError {
  const rpcError = asRpcError(error);
  if (isInternal(rpcError)) logger.error({ err: error, method }, "request failed");
  else logger.debug({ code: rpcError.code, message: rpcError.message, method }, "request refused");
  return rpcError;
}

export function createRpcHandler(options: RpcHandlerOptions): RpcHandler {
  const { upstream, limits, checkAgent, sse, logger } = options;
  const failure = (error: unknown, method: string) => loggedRpcError(logger, error, method);

  return async (req, res, url, agent) => {
    if (req.method !== "POST") {
      sendJson(
        res,
        405,
        {
          jsonrpc: "2.0",
          id: null,
          error: {
            code: JsonRpcCode.InvalidRequest,
            message: `HTTP method ${req.method} is not allowed on ${url.pathname}; JSON-RPC requests are POSTed`,
          },
        },
        { Allow: "POST" },
      );
      return;
    }
    const upstreamAbort = spareControllers.pop() ?? new AbortController();
    let reusable = true;
    res.on("close", () => {
      // A response closed before it finished means the client went away: stop the upstream work now.
      if (!res.writableFinished) upstreamAbort.abort();
      else if (reusable) giveBack(upstreamAbort);
    });
    let id: JsonRpcId = null;
    let method = "";
    let notification = false;
    try {
      // A URL that names no hosted agent is wrong whatever the request holds, so this comes first.
      const unknown = await checkAgent(agent);
      if (unknown) {
        // The body is only read for the id, which JSON-RPC asks to answer with.
        id = salvageIdOf(() => readBody(req, limits.maxBodyBytes), limits.maxJsonDepth);
        throw unknownAgentError(unknown);
      }
      const wrongType = contentTypeError(headerValue(req, "content-type"));
      const body = readBody(req, limits.maxBodyBytes);
      if (wrongType) {
        // Refused before any other check of the request; the body is only read for the id, as above.
        id = salvageIdOf(() => body, limits.maxJsonDepth);
        throw wrongType;
      }
      const parsed = parseJsonBody(body, limits.maxJsonDepth);
      id = salvageId(parsed);
      const envelope = parseEnvelope(parsed);
      method = envelope.method;
      notification = envelope.notification;
      const version = checkVersion(negotiateVersion(req, url).version);
      const spec = findMethod(version, envelope.method);
      // Only a known method names the metrics label: what a client typed could be anything.
      noteRequest(res, { method: spec.name });
      const input = spec.parse(envelope.params);
      checkParts(input, limits.maxPartsPerMessage);
      const headers = upstreamHeaders(req, agent);
      const values = createContextValues().set(clientAddressKey, req.socket.remoteAddress);
      if (notification) {
        // Processed as any call, answered with nothing (204); a stream's events are read to its end and dropped.
        const output = await spec.call(upstream, input, upstreamAbort.signal, headers, values);
        if (spec.streaming) {
          reusable = false;
          void drain((output as UpstreamStream).events, (error) => failure(error, spec.name));
        }
        res.writeHead(204).end();
        return;
      }
      if (spec.streaming) {
        // The SSE writer keeps the controller for the stream's life (and aborts it on a slow reader); once it is
        // done with it, the controller may go back to the spares like a unary call's (the close event decides).
        reusable = false;
        const resume = resumePointOf(input, headerValue(req, "last-event-id"));
        if (resume) headers[wire.resumeAfter] = String(resume.afterSeq);
        const events = await (spec.call(
          upstream,
          input,
          upstreamAbort.signal,
          headers,
          values,
        ) as Promise<UpstreamStream>);
        await sse.write(res, {
          upstream: events,
          render: spec.render,
          id,
          resume,
          upstreamAbort,
          failure: (error) => {
            const rpcError = failure(error, spec.name);
            noteRequest(res, { code: String(rpcError.code), error: rpcError.message });
            return rpcError.toObject();
          },
        });
        reusable = true;
      } else {
        const output = await (spec.call(upstream, input, upstreamAbort.signal, headers, values) as Promise<Message>);
        sendJson(res, 200, { jsonrpc: "2.0", id, result: spec.render(output) });
      }
    } catch (error) {
      if (upstreamAbort.signal.aborted && res.destroyed) return;
      const rpcError = failure(error, method);
      noteRequest(res, { code: String(rpcError.code), error: rpcError.message });
      if (notification && !res.headersSent) {
        // A notification gets no reply, its failure included (JSON-RPC 2.0 section 4.1).
        res.writeHead(204).end();
        return;
      }
      sendJson(res, rpcError.httpStatus, { jsonrpc: "2.0", id, error: rpcError.toObject() }, rpcError.options.headers);
      // A body left unread (it did not pass the body reader) would otherwise be read on to its end.
      if (rpcError.httpStatus === 413 && rpcError.options.headers?.Connection === "close") req.destroy();
    }
  };
}

/** Reads a notification's stream to its end (the task runs on regardless); a failure is only logged. */
async function drain(events: AsyncIterable<unknown>, onError: (error: unknown) => void): Promise<void> {
  try {
    for await (const _ of events);
  } catch (error) {
    onError(error);
  }
}

/** The id of a body that may not be JSON at all, or too long: null unless it reads and parses. */
function salvageIdOf(read: () => Buffer, maxDepth: number): JsonRpcId {
  try {
    return salvageId(parseJsonBody(read(), maxDepth));
  } catch {
    return null;
  }
}

/**
 * The refusal of a JSON-RPC URL that names no hosted agent: HTTP 404 with
 * -32602, the code the bridge gives gRPC's NOT_FOUND without an A2A reason,
 * which is what the server answers an unknown `parley-agent` with (so the
 * mistake gets the same code when a remote-mode bridge could not list the
 * agents and the upstream refuses it). -32001 would say a task is unknown.
 */
function unknownAgentError(unknown: UnknownAgent): JsonRpcError {
  return new JsonRpcError(JsonRpcCode.InvalidParams, unknown.message, {
    httpStatus: 404,
    data: { agent: unknown.agent, agents: unknown.known },
  });
}
