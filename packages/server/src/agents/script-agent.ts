import { ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import {
  type Agent,
  type AgentEvent,
  type AgentTurn,
  ChainRefusedError,
  errorReasonOf,
  parseSessionSpec,
  sleep,
} from "@parley/domain";
import {
  chainReportFromTrailer,
  encodeHops,
  hopsHeader,
  isChainRefusalReason,
  resolvePeer,
} from "@parley/domain/internal";
import { Phase, SessionService, StopReason, headers as wireHeaders } from "@parley/proto";
import { injectTraceHeaders } from "../observability/tracing.js";
import { displayPath, issueKeys } from "../options/issue-path.js";
import type { PeerConfig } from "./peer-options.js";
import { type ScriptConverse, type ScriptEntry, scriptOptionsSchema } from "./script-options.js";

export type { ScriptConverse, ScriptEntry } from "./script-options.js";

const trackedThreads = 10_000;

/**
 * Checks a script built outside the configuration (which checks its own with
 * the same schema), so a typo fails at startup rather than mid-conversation.
 */
export function parseScript(name: string, value: unknown): ScriptEntry[] {
  const result = scriptOptionsSchema.shape.replies.safeParse(value);
  if (result.success) return result.data;
  const problems = result.error.issues.map(
    (issue) => `${displayPath(["options", "replies", ...issueKeys(issue)])}: ${issue.message}`,
  );
  throw new Error(`agent ${name}: ${problems.join("; ")}`);
}

function sessionRef(spec: string) {
  const parsed = parseSessionSpec(spec);
  return {
    endpoint:
      parsed.peer !== undefined
        ? { case: "peer" as const, value: parsed.peer }
        : { case: "agent" as const, value: parsed.agent ?? "" },
    contextId: parsed.contextId,
  };
}

/**
 * An agent that answers from a fixed script: the Nth turn in a thread gets
 * the Nth entry, and once the script is used up the last entry repeats.
 * Deterministic, so it serves demos and tests alike; its `converse` entries
 * let a scripted agent open a conversation of its own, passing on the hop
 * trace of the turn it is answering so chains of conversations stop.
 */
export function createScriptAgent(options: {
  readonly name: string;
  readonly description?: string;
  readonly replies: readonly ScriptEntry[];
  readonly peers: readonly PeerConfig[];
}): Agent {
  const { name, replies } = options;
  const used = new Map<string, number>();

  function nextEntry(turn: AgentTurn): ScriptEntry {
    const key = `${turn.tenant}\u0000${turn.contextId}`;
    const index = used.get(key) ?? 0;
    used.delete(key);
    used.set(key, index + 1);
    if (used.size > trackedThreads) used.delete(used.keys().next().value as string);
    return replies[Math.min(index, replies.length - 1)]!;
  }

  async function converse(spec: ScriptConverse, turn: AgentTurn): Promise<string> {
    const peer = resolvePeer(spec.server, options.peers);
    if (!peer) throw new Error(`converse.server ${JSON.stringify(spec.server)} is neither a configured peer nor a URL`);
    // SessionService is served at the server's base URL whatever protocol its A2A endpoint uses.
    const client = createClient(SessionService, createGrpcTransport({ baseUrl: peer.url }));
    // The nested conversation is part of this turn's chain: it gets what is left and is charged what it used.
    const hand = turn.chain.hand();
    const headers: Record<string, string> = injectTraceHeaders({
      [hopsHeader]: encodeHops(turn.hops),
      [wireHeaders.chain]: hand.header,
      ...(peer.token ? { authorization: `Bearer ${peer.token}` } : {}),
    });
    let report: string | null = null;
    let roundOne = "";
    let ended = "";
    const stream = client.converse(
      {
        requester: spec.from
          ? sessionRef(spec.from)
          : { endpoint: { case: "agent", value: name }, contextId: turn.contextId },
        target: sessionRef(spec.to),
        text: spec.text,
        maxTurns: spec.turns ?? 0,
      },
      { headers, signal: turn.signal, onTrailer: (trailer) => (report = trailer.get(wireHeaders.chain)) },
    );
    try {
      for await (const { event } of stream) {
        if (!event) continue;
        if (event.phase === Phase.ROUND_ONE) roundOne = event.silent ? "(silent)" : event.text;
        if (event.phase === Phase.DONE) ended = `${StopReason[event.stopReason]}: ${event.detail}`;
      }
    } catch (error) {
      const reason = errorReasonOf(error);
      if (isChainRefusalReason(reason)) {
        throw new ChainRefusedError(
          reason,
          `conversation with ${spec.to} was refused: ${ConnectError.from(error).rawMessage}`,
        );
      }
      throw error;
    } finally {
      hand.settle(chainReportFromTrailer(report));
    }
    return `conversation with ${spec.to}: ${roundOne !== "" ? `round one: ${roundOne}; ` : ""}ended ${ended}`;
  }

  return {
    name,
    description: options.description ?? "Answers from a fixed script of replies",
    async *run(turn: AgentTurn): AsyncIterable<AgentEvent> {
      const entry = nextEntry(turn);
      if (typeof entry === "string") {
        if (entry !== "") yield { type: "text", text: entry };
        return;
      }
      if (entry.delayMs !== undefined) await sleep(entry.delayMs, turn.signal);
      if (entry.fail !== undefined) throw new Error(entry.fail);
      let text = entry.reply;
      if (entry.converse) {
        const summary = await converse(entry.converse, turn);
        text ??= summary;
      }
      text ??= entry.delayMs !== undefined ? `replied after ${entry.delayMs} ms` : "";
      if (text !== "") yield { type: "text", text };
    },
  };
}
