import { type Logger, pino } from "pino";

/** Parley's structured logger: JSON lines on stderr, so stdout stays free for what a binary prints. */
export function createLogger(level: string, name = "parley"): Logger {
  return pino({ name, level }, pino.destination(2));
}

export type { Logger };
