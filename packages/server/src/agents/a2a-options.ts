import { z } from "zod";

/**
 * The `options` of an a2a agent in the configuration. That the peer is one of
 * the configured peers is a rule across settings (config/schema.ts).
 */
export const a2aOptionsSchema = z.strictObject({
  /** The name of the entry in `peers` each turn is forwarded to. */
  peer: z.string().min(1),
});

export type A2AOptions = z.output<typeof a2aOptionsSchema>;
