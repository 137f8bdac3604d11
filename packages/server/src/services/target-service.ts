import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import type { ServiceImpl } from "@connectrpc/connect";
import type { Agent } from "@parley/domain";
import { invalidArgument } from "@parley/domain";
import { fromStore } from "@parley/domain/internal";
import { TargetKind, type TargetService } from "@parley/proto";
import type { ThreadStore } from "@parley/store";
import type { PeerConfig } from "../config.js";
import { callerOf } from "../interceptors/caller-interceptor.js";

/** The prefix of server-generated contextIds (any live thread is a target, whatever its id). */
export const threadTargetPrefix = "ctx-";

/** The agent name under which a configured peer is addressable (`parley-agent: a2a:<peer>`). */
export function peerAgentName(peer: string): string {
  return `a2a:${peer}`;
}

export function createTargetServiceImpl(deps: {
  store: ThreadStore;
  agents: readonly Agent[];
  peers: readonly PeerConfig[];
}): ServiceImpl<typeof TargetService> {
  return {
    async listTargets(req, ctx) {
      const limit = req.threadLimit === 0 ? 20 : req.threadLimit;
      if (limit < 0 || limit > 100) throw invalidArgument(`threadLimit must be between 1 and 100, got ${limit}`);
      const page = await fromStore(deps.store.listThreads(callerOf(ctx).tenant, { limit }));
      return {
        targets: [
          ...deps.agents.map((a) => ({ kind: TargetKind.AGENT, ref: a.name, description: a.description })),
          ...deps.peers.map((p) => ({
            kind: TargetKind.PEER,
            ref: peerAgentName(p.name),
            description: p.description ?? `A2A peer over ${p.protocol}`,
            url: p.url,
          })),
          ...page.threads.map((t) => ({
            kind: TargetKind.THREAD,
            ref: t.contextId,
            description: `${t.messageCount} messages`,
            updateTime: timestampFromMs(t.updatedAt),
          })),
        ],
      };
    },
  };
}
