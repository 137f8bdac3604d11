import type { ServerResponse } from "node:http";
import { a2aErrorDomain, type ErrorReason } from "@parley/proto";
import { sendJson } from "../http-response.js";
import { errorInfoData, JsonRpcCode, type JsonRpcError, type JsonRpcErrorObject } from "../json-rpc-error.js";

/**
 * Errors of the HTTP+JSON binding (A2A 1.0 section 11.6, AIP-193): an HTTP status and a `google.rpc.Status` body,
 * `{"error":{"code","status","message","details":[ErrorInfo...]}}`. Every failure first becomes the JsonRpcError
 * the JSON-RPC route would answer (json-rpc-error.ts maps upstream errors once, for both bindings); its code picks
 * the status from the table of section 5.4.
 */

interface StatusRow {
  readonly http: number;
  /** The google.rpc.Code name. */
  readonly status: string;
  /** The A2A ErrorInfo reason, for A2A errors (section 3.3.2). */
  readonly reason?: ErrorReason;
}

const rows: Readonly<Record<number, StatusRow>> = {
  [JsonRpcCode.ParseError]: { http: 400, status: "INVALID_ARGUMENT" },
  [JsonRpcCode.InvalidRequest]: { http: 400, status: "INVALID_ARGUMENT" },
  [JsonRpcCode.MethodNotFound]: { http: 404, status: "NOT_FOUND" },
  [JsonRpcCode.InvalidParams]: { http: 400, status: "INVALID_ARGUMENT" },
  [JsonRpcCode.InternalError]: { http: 500, status: "INTERNAL" },
  [JsonRpcCode.TaskNotFound]: { http: 404, status: "NOT_FOUND", reason: "TASK_NOT_FOUND" },
  [JsonRpcCode.TaskNotCancelable]: { http: 409, status: "FAILED_PRECONDITION", reason: "TASK_NOT_CANCELABLE" },
  [JsonRpcCode.PushNotificationNotSupported]: {
    http: 400,
    status: "UNIMPLEMENTED",
    reason: "PUSH_NOTIFICATION_NOT_SUPPORTED",
  },
  [JsonRpcCode.UnsupportedOperation]: { http: 400, status: "UNIMPLEMENTED", reason: "UNSUPPORTED_OPERATION" },
  [JsonRpcCode.ContentTypeNotSupported]: {
    http: 415,
    status: "INVALID_ARGUMENT",
    reason: "CONTENT_TYPE_NOT_SUPPORTED",
  },
  [JsonRpcCode.InvalidAgentResponse]: { http: 502, status: "INTERNAL", reason: "INVALID_AGENT_RESPONSE" },
  [JsonRpcCode.ExtendedAgentCardNotConfigured]: {
    http: 400,
    status: "FAILED_PRECONDITION",
    reason: "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
  },
  [JsonRpcCode.ExtensionSupportRequired]: {
    http: 400,
    status: "FAILED_PRECONDITION",
    reason: "EXTENSION_SUPPORT_REQUIRED",
  },
  [JsonRpcCode.VersionNotSupported]: { http: 400, status: "UNIMPLEMENTED", reason: "VERSION_NOT_SUPPORTED" },
  // Parley's own errors (their ErrorInfo, domain parley.dev, comes from the server).
  [JsonRpcCode.ContextBusy]: { http: 409, status: "ABORTED" },
  [JsonRpcCode.RateLimited]: { http: 429, status: "RESOURCE_EXHAUSTED" },
  [JsonRpcCode.LimitExceeded]: { http: 400, status: "RESOURCE_EXHAUSTED" },
  [JsonRpcCode.Unauthenticated]: { http: 401, status: "UNAUTHENTICATED" },
  [JsonRpcCode.PermissionDenied]: { http: 403, status: "PERMISSION_DENIED" },
  [JsonRpcCode.LoopDetected]: { http: 400, status: "FAILED_PRECONDITION" },
  [JsonRpcCode.HopLimit]: { http: 400, status: "RESOURCE_EXHAUSTED" },
  [JsonRpcCode.BudgetExhausted]: { http: 400, status: "RESOURCE_EXHAUSTED" },
};

/** The google.rpc.Code names of the HTTP statuses the bridge sets itself (404 of an agent, 408, 413). */
const statusByHttp: Readonly<Record<number, string>> = {
  400: "INVALID_ARGUMENT",
  401: "UNAUTHENTICATED",
  403: "PERMISSION_DENIED",
  404: "NOT_FOUND",
  405: "UNIMPLEMENTED",
  408: "DEADLINE_EXCEEDED",
  409: "ABORTED",
  413: "RESOURCE_EXHAUSTED",
  415: "INVALID_ARGUMENT",
  429: "RESOURCE_EXHAUSTED",
  502: "INTERNAL",
  503: "UNAVAILABLE",
};

/** The `error` member of an HTTP+JSON error body. */
export interface RestStatus {
  readonly code: number;
  readonly status: string;
  readonly message: string;
  readonly details: readonly unknown[];
}

/**
 * The google.rpc.Status of an error object: its details are the ErrorInfos the JSON-RPC error carries in `data`
 * (other data, such as an unknown agent's list of agents, is said in the message already); an A2A error always
 * carries its A2A ErrorInfo, added when the error came without one.
 */
export function restStatusOf(error: JsonRpcErrorObject, httpStatus?: number): RestStatus {
  const row = rows[error.code];
  const http = httpStatus ?? row?.http ?? 500;
  const details = Array.isArray(error.data) ? [...error.data] : [];
  if (row?.reason && !details.some((d) => isErrorInfo(d, a2aErrorDomain))) {
    details.unshift(...errorInfoData(row.reason, a2aErrorDomain));
  }
  const status = httpStatus !== undefined && httpStatus !== row?.http ? statusByHttp[httpStatus] : row?.status;
  return { code: http, status: status ?? "UNKNOWN", message: error.message, details };
}

function isErrorInfo(detail: unknown, domain: string): boolean {
  if (typeof detail !== "object" || detail === null) return false;
  const d = detail as { "@type"?: unknown; domain?: unknown };
  return typeof d["@type"] === "string" && d["@type"].endsWith("google.rpc.ErrorInfo") && d.domain === domain;
}

/** The HTTP status the bridge chose for an error itself (413, 401, ...), when it did. */
function explicitStatus(error: JsonRpcError): number | undefined {
  return error.options.httpStatus;
}

/** The seconds a rate-limited caller should wait, from the RATE_LIMITED ErrorInfo's retryAfterMs. */
function retryAfter(details: readonly unknown[]): Record<string, string> {
  for (const detail of details) {
    const ms = Number((detail as { metadata?: { retryAfterMs?: unknown } } | null)?.metadata?.retryAfterMs);
    if (Number.isFinite(ms) && ms >= 0) return { "Retry-After": String(Math.max(1, Math.ceil(ms / 1000))) };
  }
  return {};
}

/** Answers an error as the binding does: its HTTP status, its headers, a google.rpc.Status body. */
export function sendRestError(res: ServerResponse, error: JsonRpcError): RestStatus {
  const status = restStatusOf(error.toObject(), explicitStatus(error));
  const headers =
    status.code === 429 ? { ...retryAfter(status.details), ...error.options.headers } : error.options.headers;
  sendJson(res, status.code, { error: status }, headers);
  return status;
}
