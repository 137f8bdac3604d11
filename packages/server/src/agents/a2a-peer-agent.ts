import { randomUUID } from "node:crypto";
import { create } from "@bufbuild/protobuf";
import type { Agent, AgentEvent, AgentTurn } from "@parley/domain";
import { messageText, parleyMetadataKey } from "@parley/domain";
import { createForwardBudget, defaultForwardBudget, type ForwardBudgetOptions } from "@parley/domain/internal";
import { extensionUris, MessageSchema, Role, TaskState } from "@parley/proto";
import type { PeerConfig } from "./peer-options.js";
import { peerTaskFailure, relayPeerStream, silentReply } from "./peer-relay.js";
import { createPeerTransport } from "./peer-transport.js";

/**
 * A remote A2A agent. Each turn is forwarded with the same contextId (the
 * remote keeps its own history of the thread, so only the raw text goes);
 * a peer that streams is followed and its events relayed as they arrive
 * (peer-relay.ts), any other is sent to once and its answer given whole,
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
  const transport = createPeerTransport(peer);
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
      const events = await transport.stream(message, turn.signal);
      if (events) {
        yield* relayPeerStream(peer, transport, events, hand, turn.signal);
        return;
      }
      const answer = await transport.send(message, turn.signal);
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
        throw peerTaskFailure(peer, state, status, task.metadata);
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
