import type { ServerResponse } from "node:http";
import type { AgentCard } from "@parley/proto";
import { sendJson } from "./http-response.js";
import type { Logger } from "./logger.js";

/** Where agent cards and agent names come from: a Parley instance in embedded mode, the upstream otherwise. */
export interface CardSource {
  agentNames(): readonly string[] | Promise<readonly string[]>;
  agentCard(options: { jsonRpcUrl: string; grpcAddress?: string; agent?: string }): AgentCard | Promise<AgentCard>;
}

/**
 * Whether a request's named agent exists: answers 404 with the known names
 * (and returns false) when it does not. The default agent always exists.
 */
export type AgentCheck = (agent: string | undefined, res: ServerResponse) => Promise<boolean>;

export function createAgentCheck(cards: CardSource, logger: Logger): AgentCheck {
  return async (agent, res) => {
    if (agent === undefined) return true;
    let names: readonly string[];
    try {
      names = await cards.agentNames();
    } catch (error) {
      // Without the list the upstream still knows: it answers an unknown parley-agent with an error of its own.
      logger.warn({ err: error }, "could not list the upstream's agents");
      return true;
    }
    if (names.includes(agent)) return true;
    sendJson(res, 404, {
      error: `no agent named ${JSON.stringify(agent)}; known agents: ${names.join(", ")}`,
      agents: names,
    });
    return false;
  };
}
