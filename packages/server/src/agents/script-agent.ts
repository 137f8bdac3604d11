import { ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { Phase, SessionService, StopReason, headers as wireHeaders } from "@parley/proto";
import { chainReportFromTrailer } from "../chain/chain-budget.js";
import { ChainRefusedError, isChainRefusalReason } from "../chain/chain-refusal.js";
import type { PeerConfig } from "../config.js";
import { errorReasonOf } from "../errors.js";
import { injectTraceHeaders } from "../observability/tracing.js";
import { encodeHops, hopsHeader, parseSessionSpec, resolvePeer } from "../sessions/session-ref.js";
import { type Agent, type AgentEvent, type AgentTurn, sleep } from "./agent.js";

/** Opens a conversation from this agent's session while it answers a turn. */
export interface ScriptConverse {
  /** The Parley server that runs the conversation: a configured peer's name or a URL. */
  readonly server: string;
  /** SESSION syntax: agent[/contextId], a2a:peer[/contextId] or a2a:URL[#contextId]. */
  readonly to: string;
  /** SESSION syntax; default: this agent in the thread of the turn being answered. */
  readonly from?: string;
  readonly text: string;
  /** Ping-pong turns; default 0, since this agent's own thread is busy until its turn ends. */
  readonly turns?: number;
}

/**
 * One scripted reply. A string is the reply itself ("" is an empty reply).
 * `delayMs` waits first, `fail` makes the turn fail with that message,
 * `converse` opens a conversation and replies with how it went (or `reply`).
 */
export type ScriptEntry =
  | string
  | { readonly reply?: string; readonly delayMs?: number; readonly fail?: string; readonly converse?: ScriptConverse };

const trackedThreads = 10_000;

function entryError(name: string, index: number, why: string): Error {
  return new Error(`agent ${name}: options.replies[${index}] ${why}`);
}

/** Checks a script from configuration, so a typo fails at startup rather than mid-conversation. */
export function parseScript(name: string, value: unknown): ScriptEntry[] {
  if (!Array.isArray(value) || value.length === 0) {
    throw new Error(`agent ${name}: option replies must be a non-empty array of strings or objects`);
  }
  return value.map((entry, i): ScriptEntry => {
    if (typeof entry === "string") return entry;
    if (typeof entry !== "object" || entry === null || Array.isArray(entry)) {
      throw entryError(name, i, "must be a string or an object with reply, delayMs, fail or converse");
    }
    const e = entry as Record<string, unknown>;
    const unknown = Object.keys(e).filter((k) => !["reply", "delayMs", "fail", "converse"].includes(k));
    if (unknown.length > 0) throw entryError(name, i, `has unknown key(s) ${unknown.join(", ")}`);
    if (e.reply !== undefined && typeof e.reply !== "string") throw entryError(name, i, "reply must be a string");
    if (e.fail !== undefined && typeof e.fail !== "string") throw entryError(name, i, "fail must be a string");
    if (e.delayMs !== undefined && (typeof e.delayMs !== "number" || !(e.delayMs >= 0))) {
      throw entryError(name, i, "delayMs must be a non-negative number");
    }
    if (e.converse !== undefined) {
      const c = e.converse as Record<string, unknown>;
      if (typeof c !== "object" || c === null || typeof c.server !== "string" || typeof c.to !== "string") {
        throw entryError(name, i, "converse needs string fields server and to");
      }
      if (typeof c.text !== "string" || c.text === "")
        throw entryError(name, i, "converse.text must be a non-empty string");
      parseSessionSpec(c.to);
      if (c.from !== undefined) parseSessionSpec(String(c.from));
    }
    return e as ScriptEntry;
  });
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
