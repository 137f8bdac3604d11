import { type Agent, type AgentEvent, type AgentTurn, sleep } from "@parley/domain";
import { type EchoOptions, echoInputs, echoReplies } from "./echo-options.js";
import { echoSummary } from "./echo-summary.js";

export type { EchoInput, EchoReply } from "./echo-options.js";

/** The options of a configured echo agent (see echo-options.ts), and its name. */
export type EchoAgentOptions = Readonly<EchoOptions> & { readonly name?: string };

/**
 * A demo agent that shows what reached it, streamed in chunks: by default a summary (turn, earlier messages by
 * sender, the new text), so anyone trying Parley sees the history arrive without the guard block repeated turn
 * after turn; `framed` repeats the whole input (guard block, then the new message), `text` the new message.
 */
const descriptions: Readonly<Record<(typeof echoInputs)[number], string>> = {
  summary: "Says what reached it: the turn, the earlier messages that came with it and from whom, the new text",
  framed: "Replies with exactly the input it was given: the history block, then the new message",
  text: "Replies with the new message's text (the history is read back, not repeated)",
};

export function createEchoAgent(options: EchoAgentOptions = {}): Agent {
  // The configuration's schema checks these too; these checks are for agents built in code.
  const delayMs = options.delayMs ?? 0;
  const chunks = options.chunks ?? 8;
  if (!Number.isInteger(chunks) || chunks < 1) {
    throw new RangeError(`echo chunks must be a whole number of at least 1, got ${JSON.stringify(options.chunks)}`);
  }
  const reply = options.reply ?? "task";
  if (!echoReplies.includes(reply)) {
    throw new RangeError(`echo reply must be one of ${echoReplies.join(", ")}, got ${JSON.stringify(reply)}`);
  }
  const input = options.input ?? "summary";
  const repeat = options.repeat ?? 1;
  if (!Number.isInteger(repeat) || repeat < 1) {
    throw new RangeError(`echo repeat must be a whole number of at least 1, got ${JSON.stringify(options.repeat)}`);
  }
  if (!echoInputs.includes(input)) {
    throw new RangeError(`echo input must be one of ${echoInputs.join(", ")}, got ${JSON.stringify(input)}`);
  }
  return {
    name: options.name ?? "echo",
    description: descriptions[input],
    async *run(turn: AgentTurn): AsyncIterable<AgentEvent> {
      const said = input === "framed" ? turn.framedText : input === "text" ? turn.text : echoSummary(turn);
      const text = said.repeat(repeat);
      if (reply === "message" || (reply === "auto" && !turn.streaming)) {
        if (delayMs > 0) await sleep(delayMs, turn.signal);
        yield { type: "message", parts: [{ content: { case: "text", value: text } }] };
        return;
      }
      const size = Math.max(1, Math.ceil(text.length / chunks));
      for (let at = 0; at < text.length; at += size) {
        if (delayMs > 0) await sleep(delayMs, turn.signal);
        yield { type: "text", text: text.slice(at, at + size) };
      }
    },
  };
}
