import type { Message } from "@parley/proto";
import { type AgentTurn, turnStop } from "../agents/agent.js";
import type { ChainLedger } from "../chain/chain-budget.js";
import { formatHistory, type HistoryEntry } from "./history.js";
import type { TaskRun } from "./task-run.js";

/** What the engine hands an agent for one turn, besides the run it belongs to. */
export interface EngineTurnInit {
  readonly tenant: string;
  readonly contextId: string;
  readonly taskId: string;
  readonly message: Message;
  readonly text: string;
  readonly history: readonly HistoryEntry[];
  readonly hops: readonly string[];
  readonly chain: ChainLedger;
  readonly streaming: boolean;
  /** history.maxChars: the guard block's bound. */
  readonly maxChars: number;
}

/**
 * The turn an engine run hands its agent. Its guard block and its signal are
 * made when the agent first reads them: the echo agent, and any turn of a
 * fresh context, never need the block, and most agents never look at the
 * signal (an AbortController costs several microseconds on Node 20).
 *
 * A class, not an object literal with `get` accessors: V8 (11.3, Node 20)
 * gives such a literal a map of its own, made in the old generation, that
 * holds the accessor closures, so every scavenge kept each turn's closure
 * context (its run, task, history, chain and messages) alive until the next
 * mark-compact: about 6 KB of a send's garbage promoted instead of dying
 * young (bench/alloc-cost.mjs --survivors: 12.1 KB before, 5.8 after). Getters on a class live on its
 * prototype, one map for every turn.
 */
export class EngineTurn implements AgentTurn {
  readonly tenant: string;
  readonly contextId: string;
  readonly taskId: string;
  readonly message: Message;
  readonly text: string;
  readonly history: readonly HistoryEntry[];
  readonly hops: readonly string[];
  readonly chain: ChainLedger;
  readonly streaming: boolean;
  private readonly maxChars: number;
  private framed: string | undefined;

  constructor(
    private readonly run: TaskRun,
    init: EngineTurnInit,
  ) {
    this.tenant = init.tenant;
    this.contextId = init.contextId;
    this.taskId = init.taskId;
    this.message = init.message;
    this.text = init.text;
    this.history = init.history;
    this.hops = init.hops;
    this.chain = init.chain;
    this.streaming = init.streaming;
    this.maxChars = init.maxChars;
  }

  /** Built when an agent reads it (its nonce drawn then). */
  get framedText(): string {
    this.framed ??= formatHistory(this.history, this.text, { maxChars: this.maxChars });
    return this.framed;
  }

  /** The run's signal, made when the agent asks for it (see TaskRun.signal). */
  get signal(): AbortSignal {
    return this.run.signal;
  }

  [turnStop](): unknown {
    return this.run.abortReason;
  }
}
