import { z } from "zod";

/** setTimeout's largest delay; a longer one would fire at once. */
export const maxTimerMs = 2_147_483_647;

/** A duration in whole milliseconds that a timer can wait out, from `min`. */
export const millis = (min: number) => z.int().min(min).max(maxTimerMs);
