import { randomUUID } from "node:crypto";
import { performance } from "node:perf_hooks";
import type { DescMethod } from "@bufbuild/protobuf";
import { Code, ConnectError, type ContextValues, type Interceptor } from "@connectrpc/connect";
import { type Context, context, type Span, SpanKind, trace } from "@opentelemetry/api";
import { withoutDatabaseText } from "@parley/domain/internal";
import { ErrorInfoSchema, headers as wireHeaders } from "@parley/proto";
import type { RequestProtocol } from "./metrics.js";
import type { Observability } from "./observability.js";
import { extractTraceContext, failSpan, parleyTracer, tracingActive } from "./tracing.js";
import { watchIterable } from "./watch-iterable.js";

/** How a stream the client stopped reading ends, in its metrics and log line. */
const streamAbandoned = new ConnectError("the client stopped reading the stream", Code.Canceled);

/** Connect's snake_case code names ("not_found"), the outcome label of metrics and logs. */
const codeNames = new Map<Code, string>(
  Object.entries(Code)
    .filter(([, v]) => typeof v === "number")
    .map(([k, v]) => [v as Code, k.replace(/[A-Z]/g, (c, i) => (i === 0 ? c : `_${c}`)).toLowerCase()]),
);

export function codeName(code: Code): string {
  return codeNames.get(code) ?? "unknown";
}

function protocolOf(contentType: string | null): RequestProtocol {
  // The in-process transport carries no content type: nothing was encoded.
  if (contentType === null) return "in-process";
  if (contentType.startsWith("application/grpc-web")) return "grpc-web";
  if (contentType.startsWith("application/grpc")) return "grpc";
  return "connect";
}

const methodNames = new WeakMap<DescMethod, string>();

/** "lf.a2a.v1.A2AService/SendMessage", the method label, made once per method rather than once per call. */
function methodName(method: DescMethod): string {
  let name = methodNames.get(method);
  if (name === undefined) {
    name = `${method.parent.typeName}/${method.name}`;
    methodNames.set(method, name);
  }
  return name;
}

/** What a finished call reports: its code, and for an error its typed reason and message. */
interface Outcome {
  readonly code: string;
  readonly reason?: string;
  readonly error?: string;
  /** What caused it, when the caller was shown less (a database's own text). */
  readonly cause?: string;
}

const succeeded: Outcome = { code: "ok" };

function outcomeOf(error: unknown): Outcome {
  if (error === undefined) return succeeded;
  const connectError = ConnectError.from(error);
  const reason = connectError.findDetails(ErrorInfoSchema)[0]?.reason;
  return {
    code: codeName(connectError.code),
    ...(reason ? { reason } : {}),
    error: connectError.rawMessage,
    ...(connectError.cause instanceof Error && connectError.cause.message !== connectError.rawMessage
      ? { cause: connectError.cause.message }
      : {}),
  };
}

/**
 * The outermost interceptor of the server: per finished call it counts the
 * request (method, outcome code), observes its latency, counts typed
 * refusals by reason, tracks open streams, writes the request log line and,
 * with tracing on, wraps the call in a SERVER span whose parent is the
 * caller's traceparent. Outermost, so refusals by authentication and rate
 * limits are seen too.
 */
export function createObservingInterceptor(
  observability: Observability,
  tenantOf: (values: ContextValues) => string | undefined,
): Interceptor {
  const { metrics, requestLog } = observability;
  return (next) => async (req) => {
    const start = performance.now();
    const protocol = protocolOf(req.header.get("content-type"));
    const method = methodName(req.method);
    const requestId = req.header.get(wireHeaders.requestId) ?? randomUUID();
    let span: Span | undefined;
    let spanContext: Context | undefined;
    if (tracingActive()) {
      const parent = extractTraceContext(req.header);
      span = parleyTracer().startSpan(
        method,
        {
          kind: SpanKind.SERVER,
          attributes: {
            "rpc.system": protocol === "connect" ? "connect_rpc" : "grpc",
            "rpc.service": req.service.typeName,
            "rpc.method": req.method.name,
            "parley.protocol": protocol,
            "parley.request_id": requestId,
          },
        },
        parent,
      );
      spanContext = trace.setSpan(parent, span);
    }
    const finish = (error?: unknown) => {
      const outcome = outcomeOf(error);
      const seconds = (performance.now() - start) / 1000;
      if (metrics) {
        metrics.request(protocol, method, outcome.code, seconds);
        if (outcome.reason) metrics.rejection(outcome.reason);
      }
      // A line is built only to be written: an in-process call's (at debug) usually is not.
      if (requestLog?.writes(protocol, outcome.code)) {
        const tenant = tenantOf(req.contextValues);
        requestLog.write({
          requestId,
          protocol,
          method,
          code: outcome.code,
          durationMs: Math.round(seconds * 1e6) / 1e3,
          ...(tenant !== undefined ? { tenant } : {}),
          ...(outcome.reason ? { reason: outcome.reason } : {}),
          ...(outcome.error !== undefined ? { error: outcome.error } : {}),
          ...(outcome.cause !== undefined ? { cause: outcome.cause } : {}),
        });
      }
      if (span) {
        span.setAttribute("rpc.connect_rpc.error_code", outcome.code);
        if (error !== undefined) failSpan(span, error);
        span.end();
      }
    };
    try {
      const res = spanContext ? await context.with(spanContext, () => next(req)) : await next(req);
      if (!res.stream) {
        finish();
        return res;
      }
      metrics?.streamOpened(protocol);
      return {
        ...res,
        message: watchIterable(
          () => res.message[Symbol.asyncIterator](),
          (error) => {
            metrics?.streamClosed(protocol);
            finish(error);
          },
          {
            ...(spanContext ? { spanContext } : {}),
            abandoned: () => streamAbandoned,
            mapError: withoutDatabaseText,
          },
        ),
      };
    } catch (thrown) {
      const error = withoutDatabaseText(thrown);
      finish(error);
      throw error;
    }
  };
}
