#!/usr/bin/env node
import {
  ConfigError,
  createHealthMonitor,
  createObservability,
  createParley,
  exitOnSignals,
  type LoadedConfig,
  loadConfig,
  type Parley,
  renderHelp,
  startNotices,
  startTracing,
  stopTracing,
} from "@parley/server";
import { tlsEnabled } from "@parley/serving";
import { type BridgeOptions, createBridge } from "./bridge.js";
import { createConnectRoutes } from "./connect-routes.js";
import { consolePath, createConsoleRoute } from "./console-route.js";
import { defaultLimits } from "./json-rpc-handler.js";
import { createBridgeLogger } from "./logger.js";
import { agentCardPath, jsonRpcPath } from "./routes.js";
import { createRemoteUpstream } from "./upstream.js";

/** Settings a remote-mode bridge uses itself; every other flag would configure a server it does not run. */
function isRemoteModeSetting(path: string): boolean {
  return (
    path.startsWith("bridge.") ||
    path.startsWith("operations.") ||
    path.startsWith("connections.") ||
    path === "logLevel"
  );
}

function load(): LoadedConfig {
  const config = loadConfig({ argv: process.argv.slice(2), program: "parley-bridge" });
  const serverFlags = config.setByFlag.filter((path) => !isRemoteModeSetting(path));
  if (config.bridge.upstream !== undefined && serverFlags.length > 0) {
    throw new ConfigError(
      serverFlags.map((path) => ({
        path,
        source: "flags",
        message: "remote mode (--upstream) runs no server, so it takes no server settings",
      })),
    );
  }
  return config;
}

async function main(): Promise<void> {
  let config: LoadedConfig;
  try {
    config = load();
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    process.stderr.write(`parley-bridge: ${error.message}\nRun parley-bridge --help for every setting.\n`);
    process.exit(2);
  }
  if (config.help) {
    process.stdout.write(`${renderHelp("parley-bridge")}\n`);
    return;
  }
  try {
    // The first pipeline of the process wins, so the embedded server's spans carry the bridge's service name.
    await startTracing("parley-bridge");
  } catch (error) {
    process.stderr.write(`parley-bridge: ${(error as Error).message}\n`);
    process.exit(2);
  }
  const logger = createBridgeLogger(config.logLevel);
  const { upstream } = config.bridge;
  const bridgeOptions = {
    host: config.bridge.host,
    port: config.bridge.port,
    keepAliveMs: config.bridge.keepAliveMs,
    connections: config.connections,
    sse: {
      streamBufferBytes: config.bridge.sseStreamBufferBytes,
      bufferBytes: config.bridge.sseBufferBytes,
      stallMs: config.bridge.sseStallMs,
    },
    ...(config.bridge.publicUrl ? { publicUrl: config.bridge.publicUrl } : {}),
    ...(tlsEnabled(config.tls) ? { tls: { files: config.tls } } : {}),
    logger,
  };

  let parley: Parley | undefined;
  let connection: Pick<BridgeOptions, "upstream" | "cards" | "grpcAddress" | "observability" | "health">;
  let closeUpstream = () => {};
  if (upstream === undefined) {
    parley = await createParley(config, { logger: logger.child({ component: "server" }) });
    const { address } = await parley.listen();
    connection = {
      upstream: parley.inProcessTransport(),
      cards: parley,
      grpcAddress: address,
      observability: parley.observability,
      health: parley.health,
    };
  } else {
    const remote = createRemoteUpstream(upstream);
    closeUpstream = () => remote.close();
    connection = {
      upstream: remote.transport,
      cards: remote.cards,
      grpcAddress: new URL(upstream).host,
      observability: createObservability(logger, config.operations),
      health: createHealthMonitor({ probe: (signal) => remote.readiness(signal) }),
    };
  }
  const { grpcAddress } = connection;
  // The console and the Connect RPCs it calls, on the JSON-RPC port, in both modes.
  const routes = [
    createConnectRoutes({
      upstream: connection.upstream,
      maxBodyBytes: parley ? config.limits.maxMessageBytes : defaultLimits.maxBodyBytes,
    }),
    createConsoleRoute(),
  ];
  const bridge = await createBridge({ ...connection, ...bridgeOptions, routes });

  const cardUrl = new URL(agentCardPath.slice(1), bridge.url).href;
  const example = JSON.stringify({
    jsonrpc: "2.0",
    id: 1,
    method: "SendMessage",
    params: { message: { messageId: "m1", role: "ROLE_USER", parts: [{ text: "hello" }] } },
  });
  // In remote mode the server's own start line says how it is protected.
  const notices = parley ? startNotices(config, config.notices, logger) : [];
  // Before the banner: a supervisor may send SIGTERM as soon as it reads the ready line.
  exitOnSignals(logger, async () => {
    // Readiness turns false on both ports, and both stop taking connections, at once; what is in flight
    // goes on: every protocol drains alike.
    parley?.health.drain();
    bridge.stopAccepting();
    if (parley) {
      // Running tasks get the grace period; what is still running then ends FAILED (interrupted), so a
      // waiting JSON-RPC caller gets that task and a stream following it its final event.
      await parley.drain();
      // The answers of those calls are being written: a moment for them before connections are closed.
      await bridge.settled(1_000);
    } else {
      // The upstream server drains its own tasks; the calls in flight through this bridge get the same grace.
      await bridge.settled(config.shutdownGraceMs);
    }
    await bridge.close("the server is shutting down; resubscribe to the task on another instance to follow it");
    await (parley ? parley.close() : closeUpstream());
    await stopTracing();
  });
  process.stdout.write(
    [
      `parley-bridge (${parley ? "embedded" : `remote: ${upstream}`})`,
      `  JSON-RPC    ${bridge.url}   (--port / PORT, --host / BRIDGE_HOST)`,
      `  HTTP+JSON   ${bridge.url.replace(/\/$/, "")}   (A2A REST: POST /message:send, GET /tasks/{id}, ...)`,
      `  agent card  ${cardUrl}`,
      `  console     ${new URL(`${consolePath.slice(1)}/`, bridge.url).href}`,
      `  gRPC        ${grpcAddress}   (${parley ? "--grpc-port / PARLEY_GRPC_PORT, --grpc-host / PARLEY_HOST" : "--upstream"})`,
      ...(parley && parley.agentNames().length > 1
        ? [
            `  agents      ${parley
              .agentNames()
              .map((n) => new URL(jsonRpcPath(n).slice(1), bridge.url).href)
              .join(" ")}`,
          ]
        : []),
      ...notices.map((n) => `  ${n}`),
      `Try: curl -s ${bridge.url} -H 'content-type: application/json' -H 'A2A-Version: 1.0' -d '${example}'`,
      "",
    ].join("\n"),
  );
}

main().catch((error: unknown) => {
  process.stderr.write(`parley-bridge: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
