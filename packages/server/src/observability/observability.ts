import { type Cors, createCors } from "@parley/serving";
import type { Logger } from "pino";
import { createParleyMetrics, type ParleyMetrics } from "./metrics.js";
import { defaultOperationsOptions, type OperationsOptions } from "./operations-options.js";
import { createRequestLog, type RequestLog } from "./request-log.js";

/**
 * What one process observes itself with: its metrics, its request log and its
 * CORS policy. The server and an embedded bridge share one, so /metrics on
 * either port shows the whole process.
 */
export interface Observability {
  readonly options: OperationsOptions;
  /** Absent when metrics are switched off. */
  readonly metrics: ParleyMetrics | undefined;
  /** Absent when request logs are switched off. */
  readonly requestLog: RequestLog | undefined;
  readonly cors: Cors;
}

export function createObservability(logger: Logger, options: Partial<OperationsOptions> = {}): Observability {
  const resolved: OperationsOptions = { ...defaultOperationsOptions, ...options };
  return {
    options: resolved,
    metrics: resolved.metrics ? createParleyMetrics() : undefined,
    requestLog: resolved.requestLog ? createRequestLog(logger, resolved) : undefined,
    cors: createCors(resolved.corsOrigins),
  };
}
