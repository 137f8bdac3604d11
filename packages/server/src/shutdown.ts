import type { Logger } from "pino";

/**
 * Runs `close` once on the first SIGTERM or SIGINT, then exits: 0 when it
 * finished, 1 when it failed. Shared by the parley-server and parley-bridge
 * binaries so both stop the same way.
 */
export function exitOnSignals(logger: Logger, close: () => Promise<unknown>): void {
  let stopping = false;
  const stop = (signal: NodeJS.Signals) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, "shutting down");
    close().then(
      () => process.exit(0),
      (error: unknown) => {
        logger.error({ err: error }, "shutdown failed");
        process.exit(1);
      },
    );
  };
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
}
