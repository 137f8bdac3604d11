import { parseSessionSpec } from "@parley/domain";
import { z } from "zod";
import { millis } from "../options/timer-range.js";

/** A session in SESSION syntax, checked at startup rather than mid-conversation. */
const sessionSpec = z.string().superRefine((spec, ctx) => {
  try {
    parseSessionSpec(spec);
  } catch (error) {
    ctx.addIssue({ code: "custom", message: (error as Error).message });
  }
});

/** Opens a conversation from this agent's session while it answers a turn. */
const converseSchema = z.strictObject({
  /** The Parley server that runs the conversation: a configured peer's name or a URL. */
  server: z.string().min(1),
  /** SESSION syntax: agent[/contextId], a2a:peer[/contextId] or a2a:URL[#contextId]. */
  to: sessionSpec,
  /** SESSION syntax; default: this agent in the thread of the turn being answered. */
  from: sessionSpec.optional(),
  text: z.string().min(1),
  /** Ping-pong turns; default 0, since this agent's own thread is busy until its turn ends. */
  turns: z.int().min(0).optional(),
});

/**
 * One scripted reply. A string is the reply itself ("" is an empty reply).
 * `delayMs` waits first, `fail` makes the turn fail with that message,
 * `converse` opens a conversation and replies with how it went (or `reply`).
 */
const scriptEntrySchema = z.union(
  [
    z.string(),
    z.strictObject({
      reply: z.string().optional(),
      delayMs: millis(0).optional(),
      fail: z.string().optional(),
      converse: converseSchema.optional(),
    }),
  ],
  { error: "expected a string, or an object with reply, delayMs, fail or converse" },
);

/** The `options` of a script agent in the configuration. */
export const scriptOptionsSchema = z.strictObject({
  /** The Nth turn in a thread gets the Nth entry; once the script is used up the last entry repeats. */
  replies: z.array(scriptEntrySchema).min(1),
});

export type ScriptConverse = z.output<typeof converseSchema>;
export type ScriptEntry = z.output<typeof scriptEntrySchema>;
export type ScriptOptions = z.output<typeof scriptOptionsSchema>;
