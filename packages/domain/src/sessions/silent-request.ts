import type { Message } from "@parley/proto";
import { invalidArgument } from "../errors.js";
import { messageText } from "../thread/history.js";
import { isSilentRequest, silenceTokenSet } from "./silence.js";

/**
 * A request that is a silence token says there is nothing to say: it is not
 * delivered to the agent and nothing of it is stored. The caller gets
 * INVALID_ARGUMENT naming the token, so a sender that forwards silence learns
 * that it did. Only text-only messages are judged: a file or data part is
 * something to deliver.
 */
export function createSilentRequestCheck(configuredTokens: readonly string[]) {
  const tokens = silenceTokenSet(configuredTokens);
  return (message: Message, agent: string): void => {
    if (message.parts.some((p) => p.content.case !== "text")) return;
    const text = messageText(message);
    if (!isSilentRequest(text, tokens)) return;
    throw invalidArgument(
      `the message is the silence token ${JSON.stringify(text.trim())}: there is nothing to deliver, so it was not sent to agent ${agent} and nothing was stored`,
    );
  };
}
