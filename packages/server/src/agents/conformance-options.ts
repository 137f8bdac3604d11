import { z } from "zod";
import { millis } from "../options/timer-range.js";

/** The `options` of a conformance agent in the configuration; createConformanceAgent supplies the default. */
export const conformanceOptionsSchema = z.strictObject({
  /**
   * How long `test-resubscribe-message-id` tasks stay WORKING (default 4000).
   * The kit needs at least twice its streaming timeout (2 s by default) to resubscribe in.
   */
  resubscribeWorkMs: millis(0).optional(),
});

export type ConformanceOptions = z.output<typeof conformanceOptionsSchema>;
