// The commander parser of every contextId the CLI takes, as an argument or as --context.
import { InvalidArgumentError } from "commander";

/**
 * Refuses an empty contextId as a usage error (exit 2) before anything is
 * sent: the server would answer INVALID_ARGUMENT (exit 1), `threads show`
 * would fail inside the conversation helper, and `send --context ""` would
 * quietly start a new thread. A blank one (" ") is a real contextId and passes.
 */
export function parseContextId(value: string): string {
  if (value === "") throw new InvalidArgumentError("a contextId is never empty");
  return value;
}
