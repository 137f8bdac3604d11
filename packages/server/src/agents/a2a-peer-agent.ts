import { randomUUID } from "node:crypto";
import { create } from "@bufbuild/protobuf";
import { extensionUris, MessageSchema, Role, TaskState } from "@parley/proto";
import { ChainRefusedError, chainRefusalOf } from "../chain/chain-refusal.js";
import type { PeerConfig } from "../config.js";
import { messageText } from "../engine/history.js";
import { parleyMetadataKey } from "../engine/parley-metadata.js";
import type { Agent, AgentEvent, AgentTurn } from "./agent.js";
import { createForwardBudget, defaultForwardBudget, type ForwardBudgetOptions } from "./forward-budget.js";
import { callPeer, PeerError } from "./peer-call.js";

/**
 * A remote A2A agent. Each turn is forwarded with the same contextId (the
 * remote keeps its own history of the thread, so only the raw text goes),
 * and the message carries the turn's chain context, so a chain of servers
 * stops at a loop, at the hop limit or when its budget is used up, and the
 * remote's work is charged to the chain's budget when its answer comes back.
 * A failed remote task, or a remote that cannot be reached, fails this turn
 * with the cause; a refused chain fails it with the refusal's reason. The
 * agent bounds its own forwards (forward-budget.ts) for loops that the chain
 * metadata cannot see.
 */
export function createA2APeerAgent(options: {
  readonly name: string;
  readonly peer: PeerConfig;
  readonly self: string;
  readonly forwardBudget?: ForwardBudgetOptions;
}): Agent {
  const { peer } = options;
  const charge = createForwardBudget(options.name, peer, options.forwardBudget ?? defaultForwardBudget);
  return {
    name: options.name,
    description: peer.description ?? `Remote A2A agent ${peer.name} (${peer.protocol}, ${peer.url})`,
    async *run(turn: AgentTurn): AsyncIterable<AgentEvent> {
      charge(turn.text);
      const hand = turn.chain.hand();
      const message = create(MessageSchema, {
        messageId: randomUUID(),
        contextId: turn.contextId,
        role: Role.USER,
        parts: [{ content: { case: "text", value: turn.text } }],
        metadata: {
          [parleyMetadataKey]: { hops: [...turn.hops, options.self] },
          [extensionUris.chain]: hand.metadata,
        },
      });
      const answer = await callPeer(peer, message, turn.signal);
      if (answer.kind === "message") {
        hand.settle(answer.message.metadata);
        if (silentReply(answer.message.metadata)) {
          yield { type: "silent" };
          return;
        }
        const text = messageText(answer.message);
        if (text !== "") yield { type: "text", text };
        return;
      }
      const task = answer.task;
      hand.settle(task.metadata);
      const state = task.status?.state ?? TaskState.UNSPECIFIED;
      const status = task.status?.message ? messageText(task.status.message) : "";
      if (state === TaskState.FAILED || state === TaskState.REJECTED) {
        const text = `peer ${peer.name}'s task at ${peer.url} ended ${TaskState[state]}: ${status || "without a status message"}`;
        const refused = chainRefusalOf(task.metadata);
        throw refused ? new ChainRefusedError(refused, text) : new PeerError(text);
      }
      // A Parley peer whose agent stayed silent says so; this hop stays silent too rather than empty.
      if (silentReply(task.metadata)) {
        yield { type: "silent" };
        return;
      }
      const text = task.artifacts.map((a) => messageText(a)).join("");
      if (text !== "") yield { type: "text", text };
      if (state !== TaskState.COMPLETED && state !== TaskState.UNSPECIFIED) {
        yield { type: "state", state, ...(status ? { text: status } : {}) };
      }
    },
  };
}

function silentReply(metadata: { readonly [key: string]: unknown } | undefined): boolean {
  const parley = metadata?.[parleyMetadataKey];
  return typeof parley === "object" && parley !== null && (parley as { silent?: unknown }).silent === true;
}
