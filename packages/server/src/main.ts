#!/usr/bin/env node
import { configHelp, loadConfig } from "./config.js";
import { createLogger } from "./logger.js";
import { createParley } from "./parley.js";
import { exitOnSignals } from "./shutdown.js";

async function main(): Promise<void> {
  let config: ReturnType<typeof loadConfig>;
  try {
    config = loadConfig({ argv: process.argv.slice(2) });
  } catch (error) {
    process.stderr.write(`parley-server: ${(error as Error).message}\n\n${configHelp}\n`);
    process.exit(2);
  }
  if (config.help) {
    process.stdout.write(`${configHelp}\n`);
    return;
  }
  const logger = createLogger(config.logLevel);
  const parley = await createParley(config, { logger });
  const { address } = await parley.listen();
  if (Object.keys(config.apiKeys).length === 0) {
    logger.warn(
      "open mode: no API keys configured, every caller is tenant 'default' (set PARLEY_API_KEYS to require keys)",
    );
  }
  process.stdout.write(
    `parley-server listening on ${address} (gRPC, Connect, gRPC-Web over h2c); data in ${config.dataDir}; agents: ${parley.agentNames().join(", ")}\n`,
  );
  exitOnSignals(logger, () => parley.close());
}

main().catch((error: unknown) => {
  process.stderr.write(`parley-server: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
