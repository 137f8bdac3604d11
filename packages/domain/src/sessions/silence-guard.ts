import { create } from "@bufbuild/protobuf";
import { type Part, PartSchema } from "@parley/proto";
import type { Agent, AgentEvent, AgentTurn } from "../agent/agent.js";
import { sessionStepOf } from "./session-step.js";
import { silenceHoldFrom, silenceTokenSet, trailingTokenAt } from "./silence.js";

/**
 * Wraps an agent so that silence on plain sends follows one append-only rule
 * (the token grammar is silence.ts's): a reply that is only a silence token
 * is silent (the agent yields `silent`; the engine completes the task with no
 * text artifact and `metadata.parley.silent`), and a reply that ends in a
 * token line loses that line and stands otherwise. Text is passed on as soon
 * as it cannot become part of a trailing token line: only the reply's current
 * last line is held back, while it could still be a token line, so
 * a token line reaches no one and nothing passed on is ever taken back: the
 * stored reply is exactly what a subscriber saw. Session steps pass through:
 * their guard withholds the whole step reply.
 */
export function guardSilence(agent: Agent, configuredTokens: readonly string[]): Agent {
  const tokens = silenceTokenSet(configuredTokens);
  return {
    name: agent.name,
    description: agent.description,
    async *run(turn: AgentTurn): AsyncIterable<AgentEvent> {
      if (sessionStepOf(turn.message)) {
        yield* agent.run(turn);
        return;
      }
      let emitted = false;
      let held = "";
      // Events that came after held text keep their place behind it.
      const deferred: AgentEvent[] = [];
      for await (const event of agent.run(turn)) {
        if (event.type === "message") {
          yield* directReply(event, tokens);
          return;
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
          emitted = true;
          held = held.slice(hold);
        }
      }
      const at = trailingTokenAt(held, tokens);
      if (at >= 0) {
        // Nothing but the token (and blank lines) was held: a reply of nothing else is silent.
        if (!emitted && held.slice(0, at).trim() === "") {
          yield { type: "silent" };
          return;
        }
        held = held.slice(0, at);
      }
      if (held !== "") yield { type: "text", text: held };
      yield* deferred;
    },
  };
}

/** A direct reply by the same rule: only a token is silence; a trailing token line of its last text part is dropped. */
function* directReply(
  event: Extract<AgentEvent, { type: "message" }>,
  tokens: ReadonlySet<string>,
): Iterable<AgentEvent> {
  // The init shapes' text as messageText reads it, without making a Part message of each one first.
  const parts = event.parts.map((p) => (p.content?.case !== undefined ? (p as Part) : create(PartSchema, p)));
  const last = parts[parts.length - 1];
  if (last?.content.case !== "text") {
    yield event;
    return;
  }
  const text = last.content.value;
  const at = trailingTokenAt(text, tokens);
  if (at < 0) {
    yield event;
    return;
  }
  if (parts.length === 1 && text.slice(0, at).trim() === "") {
    yield { type: "silent" };
    return;
  }
  const kept = text.slice(0, at);
  const rest =
    kept.trim() === ""
      ? parts.slice(0, -1)
      : [...parts.slice(0, -1), { ...last, content: { case: "text" as const, value: kept } }];
  yield { type: "message", parts: rest };
}
