import { type Agent, type AgentEvent, type AgentTurn, sleep } from "./agent.js";

export interface EchoAgentOptions {
  readonly name?: string;
  /** Pause before each chunk, to behave like a slow model. */
  readonly delayMs?: number;
  /** How many chunks the reply is streamed in. */
  readonly chunks?: number;
}

/**
 * Replies with exactly the input it was given (the history guard block, then
 * the new message), streamed in chunks, so anyone trying Parley sees the
 * history injection at work.
 */
export function createEchoAgent(options: EchoAgentOptions = {}): Agent {
  const delayMs = options.delayMs ?? 0;
  const chunks = Math.max(1, options.chunks ?? 8);
  return {
    name: options.name ?? "echo",
    description: "Replies with exactly the input it was given: the history block, then the new message",
    async *run(turn: AgentTurn): AsyncIterable<AgentEvent> {
      const text = turn.framedText;
      const size = Math.max(1, Math.ceil(text.length / chunks));
      for (let at = 0; at < text.length; at += size) {
        if (delayMs > 0) await sleep(delayMs, turn.signal);
        yield { type: "text", text: text.slice(at, at + size) };
      }
    },
  };
}
