import { Code, ConnectError } from "@connectrpc/connect";
import { ErrorInfoSchema, type ErrorReason } from "@parley/proto";

/** An error as the console shows it: what happened, and what to do about it. */
export interface ShownError {
  readonly title: string;
  readonly detail: string;
  /** The ErrorInfo reason, when the server sent one. */
  readonly reason?: string;
  /** For CONTEXT_BUSY: the task that holds the thread. */
  readonly taskId?: string;
}

const titles: Partial<Record<ErrorReason, string>> = {
  CONTEXT_BUSY: "This thread is busy: a task is still running in it",
  RATE_LIMITED: "Too many requests for this tenant",
  LIMIT_EXCEEDED: "A limit was exceeded",
  LOOP_DETECTED: "Loop detected: the conversation came back to a session it already passed",
  HOP_LIMIT: "Hop limit: the conversation passed through too many sessions",
  BUDGET_EXHAUSTED: "The conversation used up its step budget",
  TASK_NOT_FOUND: "No such task for this tenant",
  TASK_NOT_CANCELABLE: "The task can no longer be canceled",
  VERSION_NOT_SUPPORTED: "The server does not speak this A2A version",
};

function byCode(code: Code): string {
  switch (code) {
    case Code.Unauthenticated:
      return "The API key was refused";
    case Code.PermissionDenied:
      return "Not allowed";
    case Code.NotFound:
      return "Not found";
    case Code.InvalidArgument:
      return "The request was refused";
    case Code.Unavailable:
      return "Parley is unreachable";
    case Code.DeadlineExceeded:
      return "The request took too long";
    case Code.ResourceExhausted:
      return "A limit was exceeded";
    case Code.Canceled:
      return "Canceled";
    default:
      return "The request failed";
  }
}

/** A network failure (no answer at all), worth retrying, as opposed to an answer that says no. */
export function isNetworkError(error: unknown): boolean {
  const e = ConnectError.from(error);
  return e.code === Code.Unavailable || (e.code === Code.Unknown && /fetch|network|Failed/i.test(e.rawMessage));
}

export function describeError(error: unknown): ShownError {
  const e = ConnectError.from(error);
  const info = e.findDetails(ErrorInfoSchema)[0];
  const reason = info?.reason;
  const title = (reason && titles[reason as ErrorReason]) || byCode(e.code);
  const extra: string[] = [];
  if (reason === "RATE_LIMITED" && info?.metadata.retryAfterMs) extra.push(`retry in ${info.metadata.retryAfterMs} ms`);
  if (reason === "LIMIT_EXCEEDED" && info?.metadata.limit) extra.push(`limit: ${info.metadata.limit}`);
  const detail = [e.rawMessage || Code[e.code], ...extra].join("; ");
  return {
    title,
    detail,
    ...(reason ? { reason } : {}),
    ...(info?.metadata.taskId ? { taskId: info.metadata.taskId } : {}),
  };
}
