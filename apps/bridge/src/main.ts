#!/usr/bin/env node
import { configHelp, createParley, exitOnSignals, loadConfig, type Parley } from "@parley/server";
import { type BridgeOptions, createBridge } from "./bridge.js";
import { createBridgeLogger } from "./logger.js";
import { agentCardPath, jsonRpcPath } from "./routes.js";
import { createRemoteUpstream } from "./upstream.js";

const help = `parley-bridge: A2A JSON-RPC 2.0 + SSE (A2A 1.0 and 0.3) in front of Parley.

By default it runs the Parley server in the same process (embedded mode) and
also serves gRPC/Connect on the server's h2c port.

Usage: parley-bridge [--upstream URL] [server options]
  --upstream URL   remote mode: forward to a running parley-server (e.g. http://127.0.0.1:8081)
  --help, -h       this text
Environment:
  PORT             JSON-RPC port (default 8080; 0 = any)
  BRIDGE_HOST      JSON-RPC listen address (default 127.0.0.1)
  BRIDGE_PUBLIC_URL  base URL the agent cards advertise (default http://HOST:PORT)
  BRIDGE_KEEPALIVE_MS  SSE keep-alive comment interval (default 15000)

Server options (embedded mode):
${configHelp}`;

interface BridgeArgs {
  readonly upstream?: string;
  readonly help: boolean;
  /** Everything else, handed to the server's loadConfig. */
  readonly rest: string[];
}

function splitArgs(argv: readonly string[]): BridgeArgs {
  let upstream: string | undefined;
  let showHelp = false;
  const rest: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === "--help" || arg === "-h") showHelp = true;
    else if (arg === "--upstream") {
      upstream = argv[++i];
      if (upstream === undefined) throw new Error("--upstream needs a URL, e.g. --upstream http://127.0.0.1:8081");
    } else if (arg.startsWith("--upstream=")) upstream = arg.slice("--upstream=".length);
    else rest.push(arg);
  }
  return { upstream, help: showHelp, rest };
}

function intEnv(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === "") return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 0)
    throw new Error(`${name} must be a non-negative integer, got ${JSON.stringify(raw)}`);
  return n;
}

async function main(): Promise<void> {
  let args: BridgeArgs;
  let config: ReturnType<typeof loadConfig> | undefined;
  let port: number;
  let keepAliveMs: number;
  try {
    args = splitArgs(process.argv.slice(2));
    if (args.help) {
      process.stdout.write(`${help}\n`);
      return;
    }
    if (args.upstream === undefined) config = loadConfig({ argv: args.rest });
    else if (args.rest.length > 0) throw new Error(`remote mode takes no server options, got ${args.rest.join(" ")}`);
    port = intEnv("PORT", 8080);
    keepAliveMs = intEnv("BRIDGE_KEEPALIVE_MS", 15_000);
  } catch (error) {
    process.stderr.write(`parley-bridge: ${(error as Error).message}\n\nRun parley-bridge --help for the options.\n`);
    process.exit(2);
  }
  const logger = createBridgeLogger(config?.logLevel ?? process.env.PARLEY_LOG_LEVEL ?? "info");
  const host = process.env.BRIDGE_HOST || "127.0.0.1";
  const publicUrl = process.env.BRIDGE_PUBLIC_URL || undefined;

  let parley: Parley | undefined;
  let upstream: Pick<BridgeOptions, "upstream" | "cards" | "grpcAddress">;
  let closeUpstream = () => {};
  if (config) {
    parley = await createParley(config, { logger: logger.child({ component: "server" }) });
    const { address } = await parley.listen();
    upstream = { upstream: parley.inProcessTransport(), cards: parley, grpcAddress: address };
  } else {
    const remote = createRemoteUpstream(args.upstream!);
    closeUpstream = () => remote.close();
    upstream = { upstream: remote.transport, cards: remote.cards, grpcAddress: new URL(args.upstream!).host };
  }
  const { grpcAddress } = upstream;
  const bridge = await createBridge({ ...upstream, host, port, publicUrl, keepAliveMs, logger });

  const cardUrl = new URL(agentCardPath.slice(1), bridge.url).href;
  const example = JSON.stringify({
    jsonrpc: "2.0",
    id: 1,
    method: "SendMessage",
    params: { message: { messageId: "m1", role: "ROLE_USER", parts: [{ text: "hello" }] } },
  });
  process.stdout.write(
    [
      `parley-bridge (${parley ? "embedded" : `remote: ${args.upstream}`})`,
      `  JSON-RPC    ${bridge.url}`,
      `  agent card  ${cardUrl}`,
      `  gRPC        ${grpcAddress}`,
      ...(parley && parley.agentNames().length > 1
        ? [
            `  agents      ${parley
              .agentNames()
              .map((n) => new URL(jsonRpcPath(n).slice(1), bridge.url).href)
              .join(" ")}`,
          ]
        : []),
      `Try: curl -s ${bridge.url} -H 'content-type: application/json' -H 'A2A-Version: 1.0' -d '${example}'`,
      "",
    ].join("\n"),
  );

  exitOnSignals(logger, () => bridge.close().then(() => (parley ? parley.close() : closeUpstream())));
}

main().catch((error: unknown) => {
  process.stderr.write(`parley-bridge: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
