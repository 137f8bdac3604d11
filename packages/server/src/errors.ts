import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { ErrorInfoSchema } from "@parley/proto";

/** The domain of the A2A specification's error reasons. */
export const a2aErrorDomain = "a2a-protocol.org";
/** The domain of Parley's own error reasons. */
export const parleyErrorDomain = "parley.dev";

/**
 * Every typed error Parley raises: its ErrorInfo reason, domain and gRPC code.
 * The A2A ones follow the specification's table (section 5.4); the bridge maps
 * the same reasons to JSON-RPC codes.
 */
export const errorReasons = {
  TASK_NOT_FOUND: { domain: a2aErrorDomain, code: Code.NotFound },
  TASK_NOT_CANCELABLE: { domain: a2aErrorDomain, code: Code.FailedPrecondition },
  PUSH_NOTIFICATION_NOT_SUPPORTED: { domain: a2aErrorDomain, code: Code.FailedPrecondition },
  UNSUPPORTED_OPERATION: { domain: a2aErrorDomain, code: Code.FailedPrecondition },
  CONTENT_TYPE_NOT_SUPPORTED: { domain: a2aErrorDomain, code: Code.InvalidArgument },
  INVALID_AGENT_RESPONSE: { domain: a2aErrorDomain, code: Code.Internal },
  EXTENDED_AGENT_CARD_NOT_CONFIGURED: { domain: a2aErrorDomain, code: Code.FailedPrecondition },
  EXTENSION_SUPPORT_REQUIRED: { domain: a2aErrorDomain, code: Code.FailedPrecondition },
  VERSION_NOT_SUPPORTED: { domain: a2aErrorDomain, code: Code.FailedPrecondition },
  /** A task is already running in this contextId; metadata.taskId names it. */
  CONTEXT_BUSY: { domain: parleyErrorDomain, code: Code.Aborted },
  /** The tenant sent more requests per second than allowed. */
  RATE_LIMITED: { domain: parleyErrorDomain, code: Code.ResourceExhausted },
  /** A configured size or count limit was exceeded; metadata.limit names it. */
  LIMIT_EXCEEDED: { domain: parleyErrorDomain, code: Code.ResourceExhausted },
} as const;

export type ErrorReason = keyof typeof errorReasons;

/** A ConnectError that carries a google.rpc.ErrorInfo with the reason. */
export function createTypedError(reason: ErrorReason, message: string, metadata: Record<string, string> = {}) {
  const { domain, code } = errorReasons[reason];
  return new ConnectError(message, code, undefined, [
    { desc: ErrorInfoSchema, value: create(ErrorInfoSchema, { reason, domain, metadata }) },
  ]);
}

/** The ErrorInfo reason of an error, if it carries one. */
export function errorReasonOf(error: unknown): string | undefined {
  const connectError = ConnectError.from(error);
  return connectError.findDetails(ErrorInfoSchema)[0]?.reason;
}

export function invalidArgument(message: string): ConnectError {
  return new ConnectError(message, Code.InvalidArgument);
}
