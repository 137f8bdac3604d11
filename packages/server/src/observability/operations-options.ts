import type { ParleyConfig } from "../config/schema.js";

/**
 * The operational settings of both ports (server and bridge): browser origins,
 * metrics and request logs: the `operations` section of the configuration
 * (PARLEY_CORS_ORIGINS, PARLEY_METRICS, PARLEY_REQUEST_LOG, PARLEY_LOG_TENANT).
 */
export type OperationsOptions = ParleyConfig["operations"];

export const defaultOperationsOptions: OperationsOptions = {
  corsOrigins: [],
  metrics: true,
  requestLog: true,
  logTenant: "hash",
};
