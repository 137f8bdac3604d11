import type { AgentCard } from "@parley/proto";
import type { Logger } from "./logger.js";

/** Where agent cards and agent names come from: a Parley instance in embedded mode, the upstream otherwise. */
export interface CardSource {
  agentNames(): readonly string[] | Promise<readonly string[]>;
  agentCard(options: { jsonRpcUrl: string; grpcAddress?: string; agent?: string }): AgentCard | Promise<AgentCard>;
}

/** A named agent that is not hosted, with the names that are. */
export interface UnknownAgent {
  readonly agent: string;
  readonly known: readonly string[];
  /** `no agent named "x"; known agents: a, b`, what the 404 says. */
  readonly message: string;
}

/**
 * Whether a request's named agent exists: undefined when it does (the
 * default agent always does), else what the 404 tells the client. Each route
 * answers it in its own form: a card lookup as plain JSON, a JSON-RPC request
 * as a JSON-RPC error.
 */
export type AgentCheck = (agent: string | undefined) => Promise<UnknownAgent | undefined>;

export function createAgentCheck(cards: CardSource, logger: Logger): AgentCheck {
  return async (agent) => {
    if (agent === undefined) return undefined;
    let names: readonly string[];
    try {
      names = await cards.agentNames();
    } catch (error) {
      // Without the list the upstream still knows: it answers an unknown parley-agent with an error of its own.
      logger.warn({ err: error }, "could not list the upstream's agents");
      return undefined;
    }
    if (names.includes(agent)) return undefined;
    return {
      agent,
      known: names,
      message: `no agent named ${JSON.stringify(agent)}; known agents: ${names.join(", ")}`,
    };
  };
}
