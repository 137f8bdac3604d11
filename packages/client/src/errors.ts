import { Code, ConnectError } from "@connectrpc/connect";
import { ErrorInfoSchema, type ErrorReason } from "@parley/proto";
import { ConfigError } from "./config.js";
import { TaskFailedError } from "./conversation.js";

/** The parley CLI's exit codes. */
export const ExitCode = {
  ok: 0,
  /** The server, the peer or the agent failed (including a failed task). */
  remote: 1,
  /** Bad flags or arguments, a bad config file, an ambiguous target. */
  usage: 2,
  /** No target, thread or peer by that name. */
  notFound: 3,
  /** The thread is busy with another task, or another conflict. */
  busy: 4,
} as const;

/** The command line was wrong; the message says how. */
export class UsageError extends Error {
  override readonly name = "UsageError";
}

export function exitCodeOf(error: unknown): number {
  if (error instanceof UsageError || error instanceof ConfigError) return ExitCode.usage;
  if (error instanceof Error && error.name === "TargetNotFoundError") {
    return (error as Error & { ambiguous?: boolean }).ambiguous ? ExitCode.usage : ExitCode.notFound;
  }
  if (error instanceof TaskFailedError) return ExitCode.remote;
  if (error instanceof ConnectError) {
    const reason = error.findDetails(ErrorInfoSchema)[0]?.reason;
    if (
      reason === ("CONTEXT_BUSY" satisfies ErrorReason) ||
      error.code === Code.Aborted ||
      error.code === Code.AlreadyExists
    ) {
      return ExitCode.busy;
    }
    if (error.code === Code.NotFound) return ExitCode.notFound;
    return ExitCode.remote;
  }
  return ExitCode.remote;
}
