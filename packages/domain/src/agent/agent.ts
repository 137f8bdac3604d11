import type { MessageInitShape } from "@bufbuild/protobuf";
import type { ArtifactSchema, Message, PartSchema, TaskState } from "@parley/proto";
import type { ChainLedger } from "../chain/chain-budget.js";
import type { HistoryEntry } from "../thread/history.js";

/** The engine's turns answer turnStopReason from their run; other AgentTurn objects from their signal. */
export const turnStop: unique symbol = Symbol("parley.turnStop");

/** One turn an agent is asked to answer. */
export interface AgentTurn {
  readonly tenant: string;
  readonly contextId: string;
  readonly taskId: string;
  /** The raw inbound message, as the caller sent it. */
  readonly message: Message;
  /** The raw message's text. */
  readonly text: string;
  /** What a model should read: the history guard block, then the new message. */
  readonly framedText: string;
  /** The earlier messages that went into the guard block, oldest first. */
  readonly history: readonly HistoryEntry[];
  /** Sessions this message already passed through (for loop guards across hops). */
  readonly hops: readonly string[];
  /**
   * The chain this turn belongs to, with this hop in its trace and its
   * budget: whatever the agent forwards hands it on (`chain.hand()`).
   */
  readonly chain: ChainLedger;
  /** Fires on cancel, timeout, a lost lease and shutdown (a client disconnect does not stop a task). */
  readonly signal: AbortSignal;
  /** Whether the caller watches the reply as a stream rather than waiting for the whole answer. */
  readonly streaming: boolean;
  /** Set by the engine: see turnStopReason. */
  readonly [turnStop]?: () => unknown;
}

/**
 * Why the turn was stopped (cancel, timeout, a lost lease, shutdown), or undefined while it was not: what
 * `signal.reason` says once `signal.aborted`, without making the engine build the signal of a turn whose
 * agent never asked for it.
 */
export function turnStopReason(turn: AgentTurn): unknown {
  // Called as a method: an engine turn's is one (engine-turn.ts).
  if (turn[turnStop]) return turn[turnStop]();
  return turn.signal.aborted ? turn.signal.reason : undefined;
}

/** What an agent produces while it answers, in order. */
export type AgentEvent =
  /** A chunk of the reply text; chunks are appended, never edited. */
  | { readonly type: "text"; readonly text: string }
  /** An artifact (or a chunk of one, with append/lastChunk). */
  | {
      readonly type: "artifact";
      readonly artifact: MessageInitShape<typeof ArtifactSchema>;
      readonly append?: boolean;
      readonly lastChunk?: boolean;
    }
  /** A direct reply without a task; must be the agent's only event. */
  | { readonly type: "message"; readonly parts: MessageInitShape<typeof PartSchema>[] }
  /** The agent stays silent: its reply was a silence token, so there is nothing to deliver or store. */
  | { readonly type: "silent" }
  /** The state the turn ends in (default COMPLETED), with an optional status message. */
  | { readonly type: "state"; readonly state: TaskState; readonly text?: string };

export interface Agent {
  readonly name: string;
  readonly description: string;
  run(turn: AgentTurn): AsyncIterable<AgentEvent>;
}

/** Resolves after `ms`, or rejects with the signal's reason when it fires first. */
export function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    signal.addEventListener("abort", onAbort, { once: true });
  });
}
