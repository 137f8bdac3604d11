import { defaultForwardBudget } from "@parley/domain/internal";
import { z } from "zod";
import { millis } from "../options/timer-range.js";

/**
 * The `options` of an a2a agent in the configuration. That the peer is one of
 * the configured peers is a rule across settings (config/schema.ts).
 */
export const a2aOptionsSchema = z.strictObject({
  /** The name of the entry in `peers` each turn is forwarded to. */
  peer: z.string().min(1),
  /**
   * The agent's bound on its own forwards (forward-budget.ts), on by default: within `windowMs` (default 10000)
   * at most `maxRepeats` forwards of the same text (default 5) and `maxForwards` of any (default 1000); 0 turns
   * a bound off. It stops loops through relays that drop Parley's chain metadata.
   */
  forwardBudget: z
    .strictObject({
      windowMs: millis(1).default(defaultForwardBudget.windowMs),
      maxRepeats: z.int().min(0).default(defaultForwardBudget.maxRepeats),
      maxForwards: z.int().min(0).default(defaultForwardBudget.maxForwards),
    })
    .optional(),
});

export type A2AOptions = z.output<typeof a2aOptionsSchema>;
