/**
 * The operational settings of both ports (server and bridge): browser origins,
 * metrics and request logs: the `operations` section of the configuration
 * (PARLEY_CORS_ORIGINS, PARLEY_METRICS, PARLEY_REQUEST_LOG, PARLEY_LOG_TENANT).
 */
export interface OperationsOptions {
  /** Browser origins allowed to call (CORS); empty: none. */
  readonly corsOrigins: readonly string[];
  readonly metrics: boolean;
  readonly requestLog: boolean;
  /** How request log lines show the tenant. */
  readonly logTenant: "hash" | "omit";
}

export const defaultOperationsOptions: OperationsOptions = {
  corsOrigins: [],
  metrics: true,
  requestLog: true,
  logTenant: "hash",
};
