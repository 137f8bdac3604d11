import type { Message } from "@parley/proto";
import { headers } from "@parley/proto";
import { ChainLedger } from "./chain-budget.js";
import {
  type ChainLimits,
  chainOf,
  checkChain,
  clampChain,
  decodeChainHeader,
  enterChain,
  startChain,
} from "./chain-context.js";

/**
 * The ingress check of every chain: run on each inbound message before the
 * busy guard, before anything is stored and before any agent runs.
 */
export interface ChainGuard {
  /** This server's id in chain traces. */
  readonly serverId: string;
  readonly limits: ChainLimits;
  /**
   * Admits a message to `agent` (the message's chain context, or a new chain
   * when it has none) and returns the budget its turn runs with. Throws
   * LOOP_DETECTED, HOP_LIMIT or BUDGET_EXHAUSTED, or INVALID_ARGUMENT for a
   * malformed chain context.
   */
  admit(message: Pick<Message, "metadata">, agent: string): ChainLedger;
  /**
   * Admits a conversation (Converse): the `parley-chain` header's chain, or
   * a new one. A conversation is no hop of its own; each of its steps is,
   * at the agent that takes it. Throws BUDGET_EXHAUSTED when nothing is left.
   */
  admitConversation(header: string | null): ChainLedger;
}

export function createChainGuard(options: {
  readonly serverId: string;
  readonly limits: ChainLimits;
  readonly now?: () => number;
}): ChainGuard {
  const { serverId, limits } = options;
  const now = options.now ?? Date.now;
  return {
    serverId,
    limits,
    admit(message, agent) {
      const at = now();
      const incoming = chainOf(message.metadata);
      const chain = incoming ? clampChain(incoming, limits, at) : startChain(limits, at);
      const here = { server: serverId, agent };
      checkChain(chain, here, at);
      return new ChainLedger(enterChain(chain, here));
    },
    admitConversation(header) {
      const at = now();
      const chain =
        header === null || header === ""
          ? startChain(limits, at)
          : clampChain(decodeChainHeader(header, headers.chain), limits, at);
      checkChain(chain, undefined, at);
      return new ChainLedger(chain);
    },
  };
}
