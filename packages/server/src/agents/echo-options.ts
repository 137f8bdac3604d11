import { z } from "zod";
import { millis } from "../options/timer-range.js";

/**
 * How the echo agent answers: `task` streams the reply as artifact chunks of a
 * task (the default); `message` answers with one Message and no task state;
 * `auto` does the first for streaming callers and the second for callers that
 * wait for the whole answer, the way many hosted agents behave.
 */
export const echoReplies = ["task", "message", "auto"] as const;
export type EchoReply = (typeof echoReplies)[number];

/**
 * What the echo agent answers with: `summary` (the default) says what reached it (turn, earlier messages by
 * sender, the new text), `framed` repeats its whole input (history block + new message), `text` the new text only.
 */
export const echoInputs = ["summary", "framed", "text"] as const;
export type EchoInput = (typeof echoInputs)[number];

/** The `options` of an echo agent in the configuration; createEchoAgent supplies the defaults. */
export const echoOptionsSchema = z.strictObject({
  /** Pause before each chunk, to behave like a slow model. */
  delayMs: millis(0).optional(),
  /** How many chunks the reply is streamed in (default 8). */
  chunks: z.int().min(1).optional(),
  /** Task with streamed chunks (default), one Message, or chosen by whether the caller streams. */
  reply: z.enum(echoReplies).optional(),
  /**
   * Summarise what arrived (default), repeat the framed input, or only the new message's text. The history is
   * read either way; `text` keeps replies as short as the caller's messages (the benchmark uses it to match the
   * anchor's echo).
   */
  input: z.enum(echoInputs).optional(),
  /** Says what it repeats this many times over (default 1): a long reply from a short message, for load tests. */
  repeat: z.int().min(1).optional(),
});

export type EchoOptions = z.output<typeof echoOptionsSchema>;
