import { type Logger, pino } from "pino";

export type { Logger };

/**
 * The bridge's one logger: JSON lines on stderr, so stdout stays free for the
 * URLs main prints. PARLEY_LOG_LEVEL picks the level without a flag.
 */
export function createBridgeLogger(level: string = process.env.PARLEY_LOG_LEVEL ?? "info"): Logger {
  return pino({ name: "parley-bridge", level }, pino.destination(2));
}
