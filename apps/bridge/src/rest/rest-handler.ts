import type { IncomingMessage, ServerResponse } from "node:http";
import type { Message } from "@bufbuild/protobuf";
import type { Transport } from "@connectrpc/connect";
import { A2AService, a2aErrorDomain, headers as wire } from "@parley/proto";
import { noteRequest } from "@parley/server";
import type { AgentCheck } from "../card-source.js";
import { sendJson } from "../http-response.js";
import { errorInfoData, JsonRpcCode, JsonRpcError } from "../json-rpc-error.js";
import { type BridgeLimits, checkParts, loggedRpcError } from "../json-rpc-handler.js";
import { readBody } from "../json-rpc-request.js";
import type { Logger } from "../logger.js";
import { findMethod, type UpstreamStream } from "../methods.js";
import { checkVersion, negotiateVersion } from "../protocol-version.js";
import { headerValue, upstreamHeaders } from "../request-headers.js";
import { resumePointOf } from "../sse-resume.js";
import type { SseFrames, SseWriter } from "../sse-writer.js";
import { restStatusOf, sendRestError } from "./rest-error.js";
import { restRequestJson } from "./rest-request.js";
import type { RestRoute } from "./rest-routes.js";

export interface RestHandlerOptions {
  /** The Connect transport every A2A call goes through, as for JSON-RPC. */
  readonly upstream: Transport;
  readonly limits: BridgeLimits;
  readonly checkAgent: AgentCheck;
  readonly sse: SseWriter;
  readonly logger: Logger;
}

/** Answers one HTTP+JSON request: a ProtoJSON result, an SSE stream of StreamResponses, or a google.rpc.Status. */
export type RestHandler = (req: IncomingMessage, res: ServerResponse, url: URL, route: RestRoute) => Promise<void>;

/** The events of an HTTP+JSON stream: each StreamResponse as it is, an error as `{"error": google.rpc.Status}`. */
const restFrames: SseFrames = {
  result: (result) => result,
  error: (error) => ({ error: restStatusOf(error) }),
};

const jsonMediaTypes = new Set(["application/json", "application/a2a+json"]);

/** The query parameter that activates extensions, beside the A2A-Extensions header (section 3.2.6). */
const extensionsParameter = "A2A-Extensions";

const methodInputs = new Map(A2AService.methods.map((m) => [m.name, m.input]));

/**
 * The HTTP+JSON binding onto the same calls as JSON-RPC: methods.ts decodes the request (built from the path,
 * query and body) and renders the answer, the upstream transport carries the caller's credentials, version and
 * extensions (so API keys, tenants, rate limits and the server's traces apply alike), and streams go through the
 * same SSE writer, resumable with Last-Event-ID. Only A2A 1.0 is served: 0.3's REST paths were others (/v1/...).
 */
export function createRestHandler(options: RestHandlerOptions): RestHandler {
  const { upstream, limits, checkAgent, sse, logger } = options;

  const failure = (error: unknown, method: string) => loggedRpcError(logger, error, method);

  return async (req, res, url, route) => {
    noteRequest(res, { method: route.method });
    const upstreamAbort = new AbortController();
    res.on("close", () => {
      // A response closed before it finished means the client went away: stop the upstream work now.
      if (!res.writableFinished) upstreamAbort.abort();
    });
    try {
      if (!route.httpMethods.includes(req.method ?? "")) {
        throw new JsonRpcError(
          JsonRpcCode.MethodNotFound,
          `HTTP method ${req.method} is not allowed on ${url.pathname}; use ${route.httpMethods.join(" or ")}`,
          { httpStatus: 405, headers: { Allow: route.httpMethods.join(", ") } },
        );
      }
      const unknown = await checkAgent(route.agent);
      if (unknown) throw new JsonRpcError(JsonRpcCode.InvalidParams, unknown.message, { httpStatus: 404 });
      checkRestVersion(negotiateVersion(req, url).version);
      const body = readBody(req, limits.maxBodyBytes);
      if (body.length > 0) checkContentType(headerValue(req, "content-type"));
      const spec = findMethod("1.0", route.method);
      const input = spec.parse(
        restRequestJson(route, methodInputs.get(route.method)!, body, url.searchParams, limits.maxJsonDepth),
      );
      checkParts(input, limits.maxPartsPerMessage);
      const headers = upstreamHeaders(req, route.agent);
      const extensions = url.searchParams.get(extensionsParameter);
      if (extensions && headers[wire.a2aExtensions] === undefined) headers[wire.a2aExtensions] = extensions;
      if (spec.streaming) {
        const resume = resumePointOf(input, headerValue(req, "last-event-id"));
        if (resume) headers[wire.resumeAfter] = String(resume.afterSeq);
        const events = await (spec.call(upstream, input, upstreamAbort.signal, headers) as Promise<UpstreamStream>);
        await sse.write(res, {
          upstream: events,
          render: spec.render,
          id: null,
          resume,
          upstreamAbort,
          frames: restFrames,
          failure: (error) => {
            const rpcError = failure(error, spec.name);
            noteRequest(res, { code: String(rpcError.code), error: rpcError.message });
            return rpcError.toObject();
          },
        });
      } else {
        const output = await (spec.call(upstream, input, upstreamAbort.signal, headers) as Promise<Message>);
        sendJson(res, 200, spec.render(output));
      }
    } catch (error) {
      if (upstreamAbort.signal.aborted && res.destroyed) return;
      const rpcError = failure(error, route.method);
      noteRequest(res, { code: String(rpcError.code), error: rpcError.message });
      sendRestError(res, rpcError);
      // A body left unread (it did not pass the body reader) would otherwise be read on to its end.
      if (rpcError.httpStatus === 413 && rpcError.options.headers?.Connection === "close") req.destroy();
    }
  };
}

/** A body that is not JSON by its Content-Type: ContentTypeNotSupportedError, naming what was sent. */
function checkContentType(contentType: string | undefined): void {
  const mediaType = contentType?.split(";", 1)[0]?.trim().toLowerCase() ?? "";
  if (jsonMediaTypes.has(mediaType)) return;
  const received = contentType?.trim() ? JSON.stringify(contentType.slice(0, 200)) : "no Content-Type";
  throw new JsonRpcError(
    JsonRpcCode.ContentTypeNotSupported,
    `content type not supported: the request body has ${received}; HTTP+JSON bodies are application/json (or application/a2a+json)`,
    { data: errorInfoData("CONTENT_TYPE_NOT_SUPPORTED", a2aErrorDomain, { received: contentType ?? "" }) },
  );
}

/** Refuses a request whose version is not 1.0 (as checkVersion reads it); 0.3's REST paths were others (/v1/...). */
function checkRestVersion(requested: string): void {
  let version: string;
  try {
    version = checkVersion(requested);
  } catch {
    version = requested;
  }
  if (version !== "1.0") throw versionRefusal(requested);
}

/** A request read as another version than 1.0 (without A2A-Version: 0.3): the refusal says what to send. */
function versionRefusal(version: string): JsonRpcError {
  return new JsonRpcError(
    JsonRpcCode.VersionNotSupported,
    `A2A protocol version ${JSON.stringify(version)} is not served over HTTP+JSON; send the header "A2A-Version: 1.0" (or the query parameter A2A-Version=1.0)`,
    {
      data: errorInfoData("VERSION_NOT_SUPPORTED", a2aErrorDomain, { requested: version, supported: "1.0" }),
    },
  );
}
