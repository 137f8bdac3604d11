import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import {
  a2aErrorDomain,
  a2aErrorReasons,
  ErrorInfoSchema,
  isTerminalState,
  parleyErrorDomain,
  TaskState,
  type ErrorReason as WireErrorReason,
} from "@parley/proto";
import { isDatabaseError, isDatabaseUnavailable, StoreError } from "@parley/store";

/**
 * The one place where the server turns what went wrong into the error a
 * caller sees: typed A2A / Parley errors (google.rpc.ErrorInfo with a reason
 * from @parley/proto's wire vocabulary) and store failures.
 */

/**
 * The gRPC code of every reason the server raises. The A2A ones follow the
 * specification's table (section 5.4); the bridge maps the same reasons to
 * JSON-RPC codes. Keyed by the wire vocabulary's reasons, so a reason the
 * bridge and client do not know cannot be raised.
 */
export const errorReasons = {
  TASK_NOT_FOUND: { code: Code.NotFound },
  TASK_NOT_CANCELABLE: { code: Code.FailedPrecondition },
  PUSH_NOTIFICATION_NOT_SUPPORTED: { code: Code.FailedPrecondition },
  UNSUPPORTED_OPERATION: { code: Code.FailedPrecondition },
  CONTENT_TYPE_NOT_SUPPORTED: { code: Code.InvalidArgument },
  INVALID_AGENT_RESPONSE: { code: Code.Internal },
  EXTENDED_AGENT_CARD_NOT_CONFIGURED: { code: Code.FailedPrecondition },
  EXTENSION_SUPPORT_REQUIRED: { code: Code.FailedPrecondition },
  VERSION_NOT_SUPPORTED: { code: Code.FailedPrecondition },
  CONTEXT_BUSY: { code: Code.Aborted },
  RATE_LIMITED: { code: Code.ResourceExhausted },
  LIMIT_EXCEEDED: { code: Code.ResourceExhausted },
  /** A chain came back to a server and agent it already passed; metadata.chainId and .hop name them. */
  LOOP_DETECTED: { code: Code.FailedPrecondition },
  /** A chain would take more hops than its limit; metadata.maxHops names the limit. */
  HOP_LIMIT: { code: Code.ResourceExhausted },
  /** A chain has no agent steps left or passed its deadline; metadata.budget says which. */
  BUDGET_EXHAUSTED: { code: Code.ResourceExhausted },
} as const satisfies { readonly [R in WireErrorReason]?: { readonly code: Code } };

/** The reasons this server raises (a subset of the wire vocabulary's). */
export type ErrorReason = keyof typeof errorReasons;

const a2aReasons: ReadonlySet<string> = new Set(a2aErrorReasons);

/** A ConnectError that carries a google.rpc.ErrorInfo with the reason. */
export function createTypedError(reason: ErrorReason, message: string, metadata: Record<string, string> = {}) {
  const domain = a2aReasons.has(reason) ? a2aErrorDomain : parleyErrorDomain;
  return new ConnectError(message, errorReasons[reason].code, undefined, [
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

/** A task id the tenant does not have (another tenant's ids answer the same). */
export function taskNotFound(taskId: string): ConnectError {
  return createTypedError("TASK_NOT_FOUND", `task ${JSON.stringify(taskId)} was not found`, { taskId });
}

/**
 * What a call that waits on task `taskId` (a blocking send, a stream) ends with when `reason`, its signal's abort
 * reason, is its deadline (grpc-timeout, connect-timeout-ms): DEADLINE_EXCEEDED naming the task, which runs on.
 * Undefined for any other reason.
 */
export function deadlinePassed(taskId: string, reason: unknown): ConnectError | undefined {
  if (!(reason instanceof ConnectError) || reason.code !== Code.DeadlineExceeded) return undefined;
  return new ConnectError(
    `the call's deadline passed before task ${JSON.stringify(taskId)} ended; the task runs on (GetTask or SubscribeToTask reads it)`,
    Code.DeadlineExceeded,
  );
}

/**
 * A context that already runs a task. `runningTaskId` is empty when the task
 * is not known here (it runs on another replica whose lease could not be read).
 */
export function contextBusy(contextId: string, runningTaskId: string, doing = "send to it"): ConnectError {
  const task = runningTaskId === "" ? "another task" : `task ${runningTaskId}`;
  return createTypedError(
    "CONTEXT_BUSY",
    `context ${JSON.stringify(contextId)} is busy: ${task} is still running; wait for it to finish or cancel it before you ${doing}`,
    { taskId: runningTaskId, contextId },
  );
}

/** A task that already ended cannot be canceled. */
export function taskNotCancelable(taskId: string, state: TaskState): ConnectError {
  return createTypedError("TASK_NOT_CANCELABLE", `task ${taskId} is already ${TaskState[state]}`, { taskId });
}

/** A task that ended cannot do what was asked; `instead` says what the caller can do. */
export function terminalTask(taskId: string, state: TaskState, instead: string): ConnectError {
  return createTypedError("UNSUPPORTED_OPERATION", `task ${taskId} is ${TaskState[state]} (terminal)${instead}`, {
    taskId,
  });
}

/** SubscribeToTask follows a task that has not ended; a finished one is refused. */
export function requireSubscribable(taskId: string, state: TaskState): void {
  if (isTerminalState(state)) {
    throw terminalTask(taskId, state, "; subscribe only works on tasks that are not finished");
  }
}

/**
 * A failure of the database (PostgreSQL away, a statement past its timeout, or any error PostgreSQL raised)
 * as the caller sees it: UNAVAILABLE when a retry can succeed, else INTERNAL, never with the database's own
 * text, which stays in the server log (the ConnectError's cause, written to the request log line).
 */
export function databaseFailure(error: unknown): ConnectError {
  if (isDatabaseUnavailable(error)) {
    return new ConnectError(
      "the database is unavailable or did not answer in time; retry shortly (the cause is in the server log)",
      Code.Unavailable,
      undefined,
      undefined,
      error,
    );
  }
  return new ConnectError(
    "the database failed this request (the cause is in the server log)",
    Code.Internal,
    undefined,
    undefined,
    error,
  );
}

/** A ConnectError (or raw error) whose text came from the database, made safe for the caller; others unchanged. */
export function withoutDatabaseText(error: unknown): unknown {
  if (error instanceof ConnectError) return isDatabaseError(error.cause) ? databaseFailure(error.cause) : error;
  return isDatabaseError(error) ? databaseFailure(error) : error;
}

/** Maps a store failure to the RPC error a caller should see; ConnectErrors pass unchanged. */
export function storeFailure(error: unknown): ConnectError {
  if (error instanceof ConnectError) return error;
  // Only store work reaches here, so a bare socket error is the database's too.
  if (isDatabaseError(error) || isDatabaseUnavailable(error)) return databaseFailure(error);
  if (error instanceof StoreError) {
    switch (error.code) {
      case "INVALID_ID":
      case "INVALID_CURSOR":
        return new ConnectError(error.message, Code.InvalidArgument);
      case "CLOSED":
        return new ConnectError(`storage is closed: ${error.message}`, Code.Unavailable);
      case "UNAVAILABLE":
        return new ConnectError(error.message, Code.Unavailable);
      case "CONFLICT":
        return new ConnectError(error.message, Code.FailedPrecondition);
      default:
        return new ConnectError(error.message, Code.Internal);
    }
  }
  return ConnectError.from(error, Code.Internal);
}

/** Awaits store work, turning its failure into the caller's error (see storeFailure). */
export async function fromStore<T>(work: Promise<T>): Promise<T> {
  try {
    return await work;
  } catch (error) {
    throw storeFailure(error);
  }
}
