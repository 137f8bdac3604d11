import type { Message } from "@parley/proto";
import type { ChainLedger } from "../chain/chain-budget.js";
import type { HistoryEntry } from "../thread/history.js";
import type { AgentTurn, turnStop } from "./agent.js";

/** A turn's plain fields: everything but what is made or read when asked. */
export type TurnInit = Omit<AgentTurn, "framedText" | "signal" | typeof turnStop>;

/**
 * The plain fields of a turn object, copied from `init`; the subclass adds
 * the guard block, the signal and the stop reason as getters. A class, not an
 * object literal with `get` accessors: V8 gives such a literal a map of its
 * own, made in the old generation, that holds the accessor closures, so every
 * scavenge kept each turn's closure context (its run, task, history, chain
 * and messages) alive until the next mark-compact (bench/alloc-cost.mjs
 * --survivors shows it). Getters on a class live on its prototype, one map
 * for every turn.
 */
export abstract class TurnFields implements TurnInit {
  readonly tenant: string;
  readonly contextId: string;
  readonly taskId: string;
  readonly message: Message;
  readonly text: string;
  readonly history: readonly HistoryEntry[];
  readonly hops: readonly string[];
  readonly chain: ChainLedger;
  readonly streaming: boolean;

  constructor(init: TurnInit) {
    this.tenant = init.tenant;
    this.contextId = init.contextId;
    this.taskId = init.taskId;
    this.message = init.message;
    this.text = init.text;
    this.history = init.history;
    this.hops = init.hops;
    this.chain = init.chain;
    this.streaming = init.streaming;
  }
}
