import { type Agent, type AgentEvent, type AgentTurn, sleep } from "./agent.js";

/**
 * How the echo agent answers: `task` streams the reply as artifact chunks of a
 * task (the default); `message` answers with one Message and no task state;
 * `auto` does the first for streaming callers and the second for callers that
 * wait for the whole answer, the way many hosted agents behave.
 */
export type EchoReply = "task" | "message" | "auto";
export const echoReplies: readonly EchoReply[] = ["task", "message", "auto"];

/** What the echo agent repeats: the framed input (history block + new message, the default) or the new text only. */
export type EchoInput = "framed" | "text";
export const echoInputs: readonly EchoInput[] = ["framed", "text"];

export interface EchoAgentOptions {
  readonly name?: string;
  /** Pause before each chunk, to behave like a slow model. */
  readonly delayMs?: number;
  /** How many chunks the reply is streamed in. */
  readonly chunks?: number;
  /** Task with streamed chunks (default), one Message, or chosen by whether the caller streams. */
  readonly reply?: EchoReply;
  /**
   * Repeat the framed input (default) or only the new message's text. The
   * history is read and framed either way; `text` keeps replies as short as
   * the caller's messages (the benchmark uses it to match the anchor's echo).
   */
  readonly input?: EchoInput;
  /** Says what it repeats this many times over (default 1): a long reply from a short message, for load tests. */
  readonly repeat?: number;
}

/**
 * By default replies with exactly the input it was given (the history guard
 * block, then the new message), streamed in chunks, so anyone trying Parley
 * sees the history injection at work.
 */
export function createEchoAgent(options: EchoAgentOptions = {}): Agent {
  const delayMs = options.delayMs ?? 0;
  const chunks = options.chunks ?? 8;
  if (!Number.isInteger(chunks) || chunks < 1) {
    throw new RangeError(`echo chunks must be a whole number of at least 1, got ${JSON.stringify(options.chunks)}`);
  }
  const reply = options.reply ?? "task";
  if (!echoReplies.includes(reply)) {
    throw new RangeError(`echo reply must be one of ${echoReplies.join(", ")}, got ${JSON.stringify(reply)}`);
  }
  const input = options.input ?? "framed";
  const repeat = options.repeat ?? 1;
  if (!Number.isInteger(repeat) || repeat < 1) {
    throw new RangeError(`echo repeat must be a whole number of at least 1, got ${JSON.stringify(options.repeat)}`);
  }
  if (!echoInputs.includes(input)) {
    throw new RangeError(`echo input must be one of ${echoInputs.join(", ")}, got ${JSON.stringify(input)}`);
  }
  return {
    name: options.name ?? "echo",
    description:
      input === "framed"
        ? "Replies with exactly the input it was given: the history block, then the new message"
        : "Replies with the new message's text (the history is read back, not repeated)",
    async *run(turn: AgentTurn): AsyncIterable<AgentEvent> {
      const text = (input === "framed" ? turn.framedText : turn.text).repeat(repeat);
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
