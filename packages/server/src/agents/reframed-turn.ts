import type { Message } from "@parley/proto";
import type { ChainLedger } from "../chain/chain-budget.js";
import type { HistoryEntry } from "../engine/history.js";
import { type AgentTurn, turnStop, turnStopReason } from "./agent.js";

/**
 * `turn` with other input text (a session step's instructions above it, say):
 * every other field is the turn's own, and its signal and stop reason are
 * read from the turn when asked. Not a spread: an engine turn's signal and
 * stop reason are read on its prototype (see engine-turn.ts), so a spread
 * would drop them (and a spread of getters would make the signal at once).
 */
export function reframeTurn(turn: AgentTurn, text: string, framedText: string): AgentTurn {
  return new ReframedTurn(turn, text, framedText);
}

class ReframedTurn implements AgentTurn {
  readonly tenant: string;
  readonly contextId: string;
  readonly taskId: string;
  readonly message: Message;
  readonly history: readonly HistoryEntry[];
  readonly hops: readonly string[];
  readonly chain: ChainLedger;
  readonly streaming: boolean;

  constructor(
    private readonly base: AgentTurn,
    readonly text: string,
    readonly framedText: string,
  ) {
    this.tenant = base.tenant;
    this.contextId = base.contextId;
    this.taskId = base.taskId;
    this.message = base.message;
    this.history = base.history;
    this.hops = base.hops;
    this.chain = base.chain;
    this.streaming = base.streaming;
  }

  get signal(): AbortSignal {
    return this.base.signal;
  }

  [turnStop](): unknown {
    return turnStopReason(this.base);
  }
}
