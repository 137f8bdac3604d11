import { create, type JsonObject } from "@bufbuild/protobuf";
import { PartSchema } from "@parley/proto";
import { messageText } from "../engine/history.js";
import { parleyAnnotations, parleyMetadataKey } from "../engine/parley-metadata.js";
import { recordedPhases, sessionStepOf, stepInstructions } from "../sessions/session-step.js";
import { isSilentReply, replyDigest, silenceTokenSet } from "../sessions/silence.js";
import type { Agent, AgentEvent, AgentTurn } from "./agent.js";

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
    async *run(turn: AgentTurn): AsyncIterable<AgentEvent> {
      const step = sessionStepOf(turn.message);
      if (!step || recordedPhases.has(step.phase)) {
        yield* agent.run(turn);
        return;
      }
      const instructions = stepInstructions(step);
      const framed: AgentTurn = {
        ...turn,
        text: `${instructions}\n\n${turn.text}`,
        framedText: `${instructions}\n\n${turn.framedText}`,
      };
      let reply = "";
      for await (const event of agent.run(framed)) {
        if (event.type === "text") reply += event.text;
        else if (event.type === "message")
          reply += messageText({ parts: event.parts.map((p) => create(PartSchema, p)) });
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
    },
  };
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
