import type { ServiceImpl } from "@connectrpc/connect";
import type { AccessService } from "@parley/proto";
import { callerOf } from "../interceptors/caller-interceptor.js";

/**
 * Answers who the interceptors took the caller to be. A console or a CLI
 * shows it next to the key field, so a wrong key is seen before any data.
 */
export function createAccessServiceImpl(deps: {
  readonly openMode: boolean;
  readonly agentNames: readonly string[];
}): ServiceImpl<typeof AccessService> {
  return {
    getCaller(_req, ctx) {
      const caller = callerOf(ctx);
      return { tenant: caller.tenant, openMode: deps.openMode, agent: caller.agent, agents: [...deps.agentNames] };
    },
  };
}
