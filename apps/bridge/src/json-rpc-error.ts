import { toJson } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { type ErrorInfo, ErrorInfoSchema, type ErrorReason } from "@parley/proto";

/** JSON-RPC 2.0 and A2A error codes the bridge answers with. */
export const JsonRpcCode = {
  ParseError: -32700,
  InvalidRequest: -32600,
  MethodNotFound: -32601,
  InvalidParams: -32602,
  InternalError: -32603,
  TaskNotFound: -32001,
  TaskNotCancelable: -32002,
  PushNotificationNotSupported: -32003,
  UnsupportedOperation: -32004,
  ContentTypeNotSupported: -32005,
  InvalidAgentResponse: -32006,
  ExtendedAgentCardNotConfigured: -32007,
  ExtensionSupportRequired: -32008,
  VersionNotSupported: -32009,
  ContextBusy: -32050,
  RateLimited: -32051,
  LimitExceeded: -32052,
  Unauthenticated: -32053,
  PermissionDenied: -32054,
  LoopDetected: -32055,
  HopLimit: -32056,
  BudgetExhausted: -32057,
} as const;

/**
 * Every ErrorInfo reason (A2A's and Parley's) and the JSON-RPC code it becomes;
 * undefined: the plain Connect code decides. Keyed by wire.ts's ErrorReason, so
 * a new reason does not compile until it has a row here.
 */
const codeByReason: Readonly<Record<ErrorReason, number | undefined>> = {
  TASK_NOT_FOUND: JsonRpcCode.TaskNotFound,
  TASK_NOT_CANCELABLE: JsonRpcCode.TaskNotCancelable,
  PUSH_NOTIFICATION_NOT_SUPPORTED: JsonRpcCode.PushNotificationNotSupported,
  UNSUPPORTED_OPERATION: JsonRpcCode.UnsupportedOperation,
  CONTENT_TYPE_NOT_SUPPORTED: JsonRpcCode.ContentTypeNotSupported,
  INVALID_AGENT_RESPONSE: JsonRpcCode.InvalidAgentResponse,
  EXTENDED_AGENT_CARD_NOT_CONFIGURED: JsonRpcCode.ExtendedAgentCardNotConfigured,
  EXTENSION_SUPPORT_REQUIRED: JsonRpcCode.ExtensionSupportRequired,
  VERSION_NOT_SUPPORTED: JsonRpcCode.VersionNotSupported,
  CONTEXT_BUSY: JsonRpcCode.ContextBusy,
  RATE_LIMITED: JsonRpcCode.RateLimited,
  LIMIT_EXCEEDED: JsonRpcCode.LimitExceeded,
  LOOP_DETECTED: JsonRpcCode.LoopDetected,
  HOP_LIMIT: JsonRpcCode.HopLimit,
  BUDGET_EXHAUSTED: JsonRpcCode.BudgetExhausted,
};

/** The code of a reason an upstream sent; a reason this bridge does not know (or "toString") has none. */
function codeOfReason(reason: string): number | undefined {
  return Object.hasOwn(codeByReason, reason) ? codeByReason[reason as ErrorReason] : undefined;
}

export interface JsonRpcErrorObject {
  readonly code: number;
  readonly message: string;
  readonly data?: unknown;
}

/** An error the bridge answers with, plus the HTTP status it travels under. */
export class JsonRpcError extends Error {
  override readonly name = "JsonRpcError";
  constructor(
    readonly code: number,
    message: string,
    readonly options: {
      readonly data?: unknown;
      readonly httpStatus?: number;
      readonly headers?: Readonly<Record<string, string>>;
    } = {},
  ) {
    super(message);
  }

  get httpStatus(): number {
    return this.options.httpStatus ?? 200;
  }

  toObject(): JsonRpcErrorObject {
    return this.options.data === undefined
      ? { code: this.code, message: this.message }
      : { code: this.code, message: this.message, data: this.options.data };
  }
}

const errorInfoTypeUrl = `type.googleapis.com/${ErrorInfoSchema.typeName}`;

/** An ErrorInfo as the ProtoJSON `Any` that A2A 1.0 puts into `error.data`. */
export function errorInfoAsAny(info: ErrorInfo): Record<string, unknown> {
  return { "@type": errorInfoTypeUrl, ...(toJson(ErrorInfoSchema, info) as object) };
}

/** `error.data` of an error the bridge raises itself: one ErrorInfo with a reason from wire.ts. */
export function errorInfoData(reason: ErrorReason, domain: string, metadata: Record<string, string> = {}): unknown[] {
  return [{ "@type": errorInfoTypeUrl, reason, domain, metadata }];
}

/** Plain Connect codes (no ErrorInfo attached) and the nearest JSON-RPC meaning. */
const codeByConnectCode: Partial<Record<Code, number>> = {
  [Code.InvalidArgument]: JsonRpcCode.InvalidParams,
  [Code.OutOfRange]: JsonRpcCode.InvalidParams,
  [Code.NotFound]: JsonRpcCode.InvalidParams,
  [Code.AlreadyExists]: JsonRpcCode.InvalidParams,
  [Code.FailedPrecondition]: JsonRpcCode.UnsupportedOperation,
  [Code.Unimplemented]: JsonRpcCode.UnsupportedOperation,
  [Code.ResourceExhausted]: JsonRpcCode.LimitExceeded,
  [Code.Unauthenticated]: JsonRpcCode.Unauthenticated,
  [Code.PermissionDenied]: JsonRpcCode.PermissionDenied,
};

/**
 * Turns an upstream failure into the JSON-RPC error a client sees. A typed
 * ErrorInfo wins over the plain Connect code, because the reason is what the
 * A2A error table is keyed on.
 */
export function toJsonRpcError(error: unknown): JsonRpcError {
  if (error instanceof JsonRpcError) return error;
  const connectError = ConnectError.from(error);
  const infos = connectError.findDetails(ErrorInfoSchema);
  const info = infos[0];
  const data = infos.length > 0 ? infos.map(errorInfoAsAny) : undefined;
  const message = connectError.rawMessage || Code[connectError.code] || "upstream error";
  if (connectError.code === Code.Unauthenticated) {
    return new JsonRpcError(JsonRpcCode.Unauthenticated, message, {
      data,
      httpStatus: 401,
      headers: { "WWW-Authenticate": 'Bearer realm="parley"' },
    });
  }
  if (connectError.code === Code.PermissionDenied) {
    return new JsonRpcError(JsonRpcCode.PermissionDenied, message, { data, httpStatus: 403 });
  }
  const byReason = info ? codeOfReason(info.reason) : undefined;
  if (byReason !== undefined) return new JsonRpcError(byReason, message, { data });
  const byCode = codeByConnectCode[connectError.code];
  if (byCode !== undefined) return new JsonRpcError(byCode, message, { data });
  return new JsonRpcError(
    JsonRpcCode.InternalError,
    `upstream failed (${Code[connectError.code] ?? connectError.code}): ${message}`,
    { data },
  );
}

/** True for failures the bridge itself should log as faults rather than client mistakes. */
export function isInternal(error: JsonRpcError): boolean {
  return error.code === JsonRpcCode.InternalError || error.code === JsonRpcCode.InvalidAgentResponse;
}
