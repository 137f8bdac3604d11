import { create, type JsonObject } from "@bufbuild/protobuf";
import { PartSchema } from "@parley/proto";
import type { Agent, AgentEvent, AgentTurn } from "../agent/agent.js";
import { reframeTurn } from "../agent/reframed-turn.js";
import { messageText } from "../thread/history.js";
import { parleyAnnotations, parleyMetadataKey } from "../thread/parley-metadata.js";
import { recordedPhases, type SessionStep, sessionStepOf, stepInstructions } from "./session-step.js";
import { isSilentReply, replyDigest, silenceTokenSet } from "./silence.js";

/** Artifact id of the marker a guarded step leaves on its task instead of a withheld reply. */
export const stepOutcomeArtifactId = "parley-session-step";

/** Why a guarded step's reply was withheld. */
export type WithheldOutcome = { readonly outcome: "silent" } | { readonly outcome: "repeat"; readonly of: number };

function marker(withheld: WithheldOutcome): AgentEvent {
  return {
    type: "artifact",
    artifact: {
      artifactId: stepOutcomeArtifactId,
      name: stepOutcomeArtifactId,
      parts: [],
      metadata: { [parleyMetadataKey]: withheld as unknown as JsonObject },
    },
  };
}

/**
 * Wraps an agent so that turns which are steps of an agent-to-agent
 * conversation (a message carrying metadata.parley.session) get the protocol
 * instructions above their input, and their reply is held back until it is
 * complete: a silence token or a repeat of an earlier reply is then never
 * yielded, so the engine stores nothing of it and no reader of the thread,
 * the task or the history block ever sees it. A marker artifact without
 * parts records why. Every other turn passes through untouched.
 */
export function guardSessionSteps(agent: Agent, configuredTokens: readonly string[]): Agent {
  const tokens = silenceTokenSet(configuredTokens);
  return {
    name: agent.name,
    description: agent.description,
    run(turn: AgentTurn): AsyncIterable<AgentEvent> {
      const step = sessionStepOf(turn.message);
      // Not a step: the agent's own events, not passed through one more async generator (a promise and a
      // tick per event).
      if (!step || recordedPhases.has(step.phase)) return agent.run(turn);
      return guardStep(agent, turn, step, tokens);
    },
  };
}

/** A step's turn: the protocol instructions above its input, its reply held back until it is complete. */
async function* guardStep(
  agent: Agent,
  turn: AgentTurn,
  step: SessionStep,
  tokens: ReadonlySet<string>,
): AsyncIterable<AgentEvent> {
  const instructions = stepInstructions(step);
  const framed = reframeTurn(turn, `${instructions}\n\n${turn.text}`, `${instructions}\n\n${turn.framedText}`);
  let reply = "";
  for await (const event of agent.run(framed)) {
    if (event.type === "text") reply += event.text;
    else if (event.type === "message") reply += messageText({ parts: event.parts.map((p) => create(PartSchema, p)) });
    else yield event;
  }
  if (isSilentReply(reply, tokens)) {
    yield marker({ outcome: "silent" });
    return;
  }
  const repeated = reply.trim() === "" ? -1 : step.suppress.indexOf(replyDigest(reply));
  if (repeated >= 0) {
    yield marker({ outcome: "repeat", of: repeated });
    return;
  }
  if (reply !== "") yield { type: "text", text: reply };
}

/** Reads the marker back from an artifact, if it is one. */
export function withheldOf(artifact: {
  readonly artifactId: string;
  readonly metadata?: JsonObject | undefined;
}): WithheldOutcome | undefined {
  if (artifact.artifactId !== stepOutcomeArtifactId) return undefined;
  const o = parleyAnnotations(artifact.metadata);
  if (!o) return { outcome: "silent" };
  if (o.outcome === "repeat" && typeof o.of === "number") return { outcome: "repeat", of: o.of };
  return { outcome: "silent" };
}
