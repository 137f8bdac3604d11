import { type AgentTurn, turnStop } from "../agent/agent.js";
import { TurnFields, type TurnInit } from "../agent/turn-fields.js";
import { formatHistory } from "../thread/history.js";
import type { TaskRun } from "./task-run.js";

/**
 * The turn an engine run hands its agent. Its guard block and its signal are
 * made when the agent first reads them: the echo agent, and any turn of a
 * fresh context, never need the block, and most agents never look at the
 * signal, which is costly to make (see TaskRun). A class for the reason
 * TurnFields gives.
 */
export class EngineTurn extends TurnFields implements AgentTurn {
  private framed: string | undefined;

  constructor(
    private readonly run: TaskRun,
    init: TurnInit,
    /** history.maxChars: the guard block's bound. */
    private readonly maxChars: number,
  ) {
    super(init);
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
