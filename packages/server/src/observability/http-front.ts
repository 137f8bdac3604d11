import { performance } from "node:perf_hooks";
import { context, type Span, SpanKind, trace } from "@opentelemetry/api";
import { headers as wireHeaders } from "@parley/proto";
import { type NodeRequest, type NodeResponse, requestIdOf, writeHead } from "@parley/serving";
import type { HealthMonitor } from "../health/health-monitor.js";
import type { RequestProtocol } from "./metrics.js";
import type { Observability } from "./observability.js";
import { extractTraceContext, parleyTracer, tracingActive } from "./tracing.js";

export interface HttpFrontOptions {
  readonly observability: Observability;
  readonly health: HealthMonitor;
}

/**
 * What runs in front of every request on both ports, before the RPC handler:
 * the request id (kept in the request headers, so the handlers and the next
 * hop see it, and answered in the `parley-request-id` response header), the
 * CORS check, and the operational endpoints: GET /healthz (the process is
 * alive), GET /readyz (dependencies reachable, not draining; 503 otherwise)
 * and GET /metrics (Prometheus text). Returns the handler to call.
 */
export function createHttpFront<Req extends NodeRequest, Res extends NodeResponse>(
  options: HttpFrontOptions,
  handler: (req: Req, res: Res) => void,
): (req: Req, res: Res) => void {
  const { observability, health } = options;
  const { cors, metrics } = observability;
  const text = (res: NodeResponse, status: number, body: string, contentType = "text/plain; charset=utf-8") => {
    writeHead(res, status, { "Content-Type": contentType, "Cache-Control": "no-store" });
    res.end(body);
  };
  return (req: Req, res: Res) => {
    const requestId = requestIdOf(req);
    req.headers[wireHeaders.requestId] = requestId;
    res.setHeader(wireHeaders.requestId, requestId);
    if (cors.check(req, res) !== "pass") return;
    const url = req.url ?? "/";
    const path = url.includes("?") ? url.slice(0, url.indexOf("?")) : url;
    if ((req.method === "GET" || req.method === "HEAD") && path.length <= 8) {
      if (path === "/healthz") return text(res, 200, "ok\n");
      if (path === "/readyz") {
        health.readiness().then(
          (readiness) =>
            text(
              res,
              readiness.ready ? 200 : 503,
              `${JSON.stringify({ status: readiness.ready ? "ready" : "not ready", ...readiness })}\n`,
              "application/json",
            ),
          (error: unknown) => text(res, 503, `${JSON.stringify({ status: "not ready", error: String(error) })}\n`),
        );
        return;
      }
      if (path === "/metrics") {
        if (!metrics) return text(res, 404, "metrics are switched off (PARLEY_METRICS=off)\n");
        metrics.render().then(
          (body) => text(res, 200, body, metrics.contentType),
          (error: unknown) => text(res, 500, `metrics failed: ${String(error)}\n`),
        );
        return;
      }
    }
    handler(req, res);
  };
}

interface RequestNotes {
  /** The protocol the request turned out to speak, when not the route's own (Connect calls on the bridge's port). */
  protocol?: RequestProtocol;
  method?: string;
  code?: string;
  error?: string;
}

/** A tracked response's notes: a property of the response rather than a WeakMap entry per request. */
const notesKey = Symbol("parley.requestNotes");
type WithNotes = { [notesKey]?: RequestNotes };

/** Tells the request tracker which method a request called and how it ended (the bridge knows, HTTP does not). */
export function noteRequest(res: object, update: RequestNotes): void {
  const current = (res as WithNotes)[notesKey];
  if (current) Object.assign(current, update);
}

/**
 * Metrics, the request log line and (with tracing on) a SERVER span for
 * requests that do not pass the Connect interceptors: the bridge's JSON-RPC
 * and agent cards. The handler names the method and outcome with
 * noteRequest; a request it never named counts as method "http" with code
 * "http_<status>".
 */
export function trackHttpRequests<Req extends NodeRequest, Res extends NodeResponse>(
  observability: Observability,
  protocol: RequestProtocol,
  handler: (req: Req, res: Res) => void,
): (req: Req, res: Res) => void {
  const { metrics, requestLog } = observability;
  if (!metrics && !requestLog && !tracingActive()) return handler;
  return (req: Req, res: Res) => {
    const start = performance.now();
    const note: RequestNotes = {};
    (res as WithNotes)[notesKey] = note;
    let span: Span | undefined;
    res.once("close", () => {
      const seconds = (performance.now() - start) / 1000;
      const method = note.method ?? "http";
      const code = note.code ?? (res.statusCode < 400 && res.writableFinished ? "ok" : `http_${res.statusCode}`);
      const spoken = note.protocol ?? protocol;
      metrics?.request(spoken, method, code, seconds);
      if (requestLog?.writes(spoken, code)) {
        requestLog.write({
          requestId: String(req.headers[wireHeaders.requestId] ?? ""),
          protocol: spoken,
          method,
          code,
          durationMs: Math.round(seconds * 1e6) / 1e3,
          ...(note.error !== undefined ? { error: note.error } : {}),
        });
      }
      if (span) {
        span.updateName(method);
        span.setAttribute("rpc.method", method);
        span.setAttribute("parley.protocol", spoken);
        span.setAttribute("http.response.status_code", res.statusCode);
        span.setAttribute("rpc.jsonrpc.error_code", code);
        span.end();
      }
    });
    if (!tracingActive()) return handler(req, res);
    const parent = extractTraceContext(req.headers);
    span = parleyTracer().startSpan(
      `${req.method} ${protocol}`,
      { kind: SpanKind.SERVER, attributes: { "rpc.system": protocol, "parley.protocol": protocol } },
      parent,
    );
    context.with(trace.setSpan(parent, span), () => handler(req, res));
  };
}
