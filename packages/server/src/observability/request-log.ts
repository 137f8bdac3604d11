import { createHash } from "node:crypto";
import type { Logger } from "pino";
import type { RequestProtocol } from "./metrics.js";

/** One finished request, as its log line carries it. */
export interface FinishedRequest {
  readonly requestId: string;
  readonly protocol: RequestProtocol;
  /** The RPC ("lf.a2a.v1.A2AService/SendMessage"), the JSON-RPC method, or "GET /path" for plain HTTP. */
  readonly method: string;
  /** "ok", a gRPC code name, or a JSON-RPC error code. */
  readonly code: string;
  readonly durationMs: number;
  readonly tenant?: string;
  /** The typed error reason (ErrorInfo.reason), when refused with one. */
  readonly reason?: string;
  /** The error message of a failed request. */
  readonly error?: string;
  /** What caused it when the caller was told less: a database's own text stays here, in the server's log. */
  readonly cause?: string;
}

export interface RequestLog {
  /** Whether a request of this protocol and outcome gets a line: callers build the line only then. */
  writes(protocol: RequestProtocol, code: string): boolean;
  write(request: FinishedRequest): void;
}

/** Codes that mean the server failed rather than refused the caller: logged at warn. */
const serverFailures = new Set(["internal", "unknown", "data_loss", "-32603"]);

/**
 * Writes one pino line per finished request ("request finished"): request id,
 * protocol, method, outcome code, duration, the tenant as a 16-hex-digit
 * SHA-256 digest (or omitted), and the reason of a refusal. In-process calls
 * (the embedded bridge's) log at debug: their JSON-RPC request has its own line.
 */
export function createRequestLog(logger: Logger, options: { readonly logTenant: "hash" | "omit" }): RequestLog {
  const digests = new Map<string, string>();
  const tenantOf = (tenant: string): string => {
    let digest = digests.get(tenant);
    if (digest === undefined) {
      digest = createHash("sha256").update(tenant).digest("hex").slice(0, 16);
      // Tenants come from configured API keys, so this stays small; the bound guards against surprises.
      if (digests.size < 10_000) digests.set(tenant, digest);
    }
    return digest;
  };
  const levelOf = (protocol: RequestProtocol, code: string) =>
    protocol === "in-process" ? "debug" : serverFailures.has(code) ? "warn" : "info";
  return {
    writes: (protocol, code) => logger.isLevelEnabled(levelOf(protocol, code)),
    write(request) {
      const level = levelOf(request.protocol, request.code);
      if (!logger.isLevelEnabled(level)) return;
      const { tenant, ...rest } = request;
      const line = tenant !== undefined && options.logTenant === "hash" ? { ...rest, tenant: tenantOf(tenant) } : rest;
      logger[level](line, "request finished");
    },
  };
}
