import { createHash } from "node:crypto";
import { ChainRefusedError } from "./chain-refusal.js";

/** An a2a agent's bound on its own forwards to its peer, in a sliding window (a2a-options.ts). */
export interface ForwardBudgetOptions {
  /** The window's length. */
  readonly windowMs: number;
  /** Forwards of the same text to the peer within the window; 0 turns the bound off. */
  readonly maxRepeats: number;
  /** Forwards of any text to the peer within the window; 0 turns the bound off. */
  readonly maxForwards: number;
}

export const defaultForwardBudget: ForwardBudgetOptions = { windowMs: 10_000, maxRepeats: 5, maxForwards: 1000 };

/** Charges one forward, or throws when it would go over the budget. */
export type ForwardBudget = (text: string) => void;

/**
 * The budget of one a2a agent's forwards. Parley's chain metadata stops loops between Parley servers; a relay
 * that drops it (and the contextId) makes every pass look like a new conversation, so this hop bounds itself:
 * the same text sent to the same peer again and again within the window is a loop suspected, and any peer gets
 * at most maxForwards a window. A refused forward fails the turn with BUDGET_EXHAUSTED and a LOOP_SUSPECTED text.
 */
export function createForwardBudget(
  agent: string,
  peer: { readonly name: string; readonly url: string },
  options: ForwardBudgetOptions,
  now: () => number = Date.now,
): ForwardBudget {
  // Forwards in the window, oldest first, and how many of them carry each text.
  const sent: { readonly at: number; readonly digest: string }[] = [];
  const repeats = new Map<string, number>();
  const where = `agent ${agent} -> peer ${peer.name} (${peer.url})`;
  return (text) => {
    const t = now();
    while (sent.length > 0 && sent[0]!.at <= t - options.windowMs) {
      const old = sent.shift()!;
      const left = (repeats.get(old.digest) ?? 1) - 1;
      if (left === 0) repeats.delete(old.digest);
      else repeats.set(old.digest, left);
    }
    const digest = createHash("sha256").update(text).digest("base64url");
    const same = repeats.get(digest) ?? 0;
    if (options.maxRepeats > 0 && same >= options.maxRepeats) {
      throw new ChainRefusedError(
        "BUDGET_EXHAUSTED",
        `LOOP_SUSPECTED: ${where} already forwarded this same text ${same} times within ${options.windowMs} ms (forwardBudget.maxRepeats ${options.maxRepeats}); a relay that drops Parley's chain metadata may be sending it back here`,
      );
    }
    if (options.maxForwards > 0 && sent.length >= options.maxForwards) {
      throw new ChainRefusedError(
        "BUDGET_EXHAUSTED",
        `forward budget used up: ${where} already forwarded ${sent.length} messages within ${options.windowMs} ms (forwardBudget.maxForwards ${options.maxForwards})`,
      );
    }
    sent.push({ at: t, digest });
    repeats.set(digest, same + 1);
  };
}
