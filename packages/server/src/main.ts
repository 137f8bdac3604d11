#!/usr/bin/env node
import { ConfigError, configHelp, type LoadedConfig, loadConfig } from "./config.js";
import { createLogger } from "./logger.js";
import { startTracing, stopTracing } from "./observability/tracing.js";
import { createParley } from "./parley.js";
import { exitOnSignals } from "./shutdown.js";
import { startNotices } from "./start-notices.js";

async function main(): Promise<void> {
  let config: LoadedConfig;
  try {
    config = loadConfig({ argv: process.argv.slice(2), program: "parley-server" });
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    process.stderr.write(`parley-server: ${error.message}\nRun parley-server --help for every setting.\n`);
    process.exit(2);
  }
  if (config.help) {
    process.stdout.write(`${configHelp}\n`);
    return;
  }
  try {
    await startTracing("parley-server");
  } catch (error) {
    // An OTEL_* variable Parley cannot honour; the message names it.
    process.stderr.write(`parley-server: ${(error as Error).message}\n`);
    process.exit(2);
  }
  const logger = createLogger(config.logLevel);
  const parley = await createParley(config, { logger });
  const { address } = await parley.listen();
  const notices = startNotices(config, config.notices, logger);
  // Before the banner: a supervisor may send SIGTERM as soon as it reads the ready line.
  exitOnSignals(logger, () => parley.close().then(stopTracing));
  process.stdout.write(
    [
      `parley-server listening on ${address} (gRPC, Connect, gRPC-Web over ${config.tls.certFile ? "TLS: h2 and HTTP/1.1 by ALPN" : "h2c; Connect and gRPC-Web also over HTTP/1.1"}); data in ${config.storeUrl ? "PostgreSQL" : config.dataDir}; agents: ${parley.agentNames().join(", ")}`,
      ...notices.map((n) => `  ${n}`),
      "",
    ].join("\n"),
  );
}

main().catch((error: unknown) => {
  process.stderr.write(`parley-server: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
