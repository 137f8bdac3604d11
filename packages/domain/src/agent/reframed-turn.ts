import { type AgentTurn, turnStop, turnStopReason } from "./agent.js";
import { TurnFields } from "./turn-fields.js";

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

class ReframedTurn extends TurnFields implements AgentTurn {
  override readonly text: string;

  constructor(
    private readonly base: AgentTurn,
    text: string,
    readonly framedText: string,
  ) {
    super(base);
    this.text = text;
  }

  get signal(): AbortSignal {
    return this.base.signal;
  }

  [turnStop](): unknown {
    return turnStopReason(this.base);
  }
}
