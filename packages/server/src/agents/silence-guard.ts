import { create } from "@bufbuild/protobuf";
import { type Part, PartSchema } from "@parley/proto";
import { messageText } from "../engine/history.js";
import { sessionStepOf } from "../sessions/session-step.js";
import { isSilentReply, silenceHoldFrom, silenceTokenSet } from "../sessions/silence.js";
import type { Agent, AgentEvent, AgentTurn } from "./agent.js";

/**
 * Wraps an agent so that a reply which is a silence token (by the rule
 * `Converse` uses: the whole reply, or its last non-empty line) is never
 * passed on as text on plain sends either: the agent yields `silent`
 * instead, and the engine completes the task with no text artifact and
 * `metadata.parley.silent`. Text passes on as soon as it can no longer
 * become silent by itself: only a last line that could still be a token is
 * held back, so the token is never streamed. When the reply ends in a token
 * after other lines, those lines (already streamed to live subscribers) are
 * withdrawn: the final task has no text artifact and the thread no reply.
 * Session steps pass through: their guard withholds more than silence.
 */
export function guardSilence(agent: Agent, configuredTokens: readonly string[]): Agent {
  const tokens = silenceTokenSet(configuredTokens);
  const tokenList = [...tokens];
  // A silent reply's last line, undecorated, is a token: a text that holds none needs no split into lines.
  const mayHoldToken = (text: string) => tokenList.some((token) => text.includes(token));
  return {
    name: agent.name,
    description: agent.description,
    async *run(turn: AgentTurn): AsyncIterable<AgentEvent> {
      if (sessionStepOf(turn.message)) {
        yield* agent.run(turn);
        return;
      }
      let emitted = "";
      let held = "";
      // Events that came after held text keep their place behind it.
      const deferred: AgentEvent[] = [];
      for await (const event of agent.run(turn)) {
        if (event.type === "message") {
          // The init shapes' text as messageText reads it, without making a Part message of each one first.
          const text = messageText({
            parts: event.parts.map((p) => (p.content?.case !== undefined ? (p as Part) : create(PartSchema, p))),
          });
          if (mayHoldToken(text) && isSilentReply(text, tokens)) {
            yield { type: "silent" };
            return;
          }
          yield event;
          continue;
        }
        if (event.type !== "text") {
          if (held === "") yield event;
          else deferred.push(event);
          continue;
        }
        held += event.text;
        if (deferred.length > 0) continue;
        const hold = silenceHoldFrom(held, tokens);
        if (hold > 0) {
          yield { type: "text", text: held.slice(0, hold) };
          emitted += held.slice(0, hold);
          held = held.slice(hold);
        }
      }
      const whole = emitted + held;
      if (isSilentReply(whole, tokens)) {
        // The token never left; text streamed above it is withdrawn from the task and never stored.
        yield { type: "silent" };
        return;
      }
      if (held !== "") {
        yield { type: "text", text: held };
      }
      yield* deferred;
    },
  };
}
