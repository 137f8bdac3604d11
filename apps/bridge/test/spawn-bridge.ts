import type { ChildProcess } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { spawnUntilReady } from "../../../packages/server/test/fixtures/spawn-process.js";

/** The real parley-bridge command, through the committed entry npm links into node_modules/.bin. */
export const bridgeBin = fileURLToPath(new URL("../bin/parley-bridge.js", import.meta.url));

export interface SpawnedBridge {
  readonly child: ChildProcess;
  /** The JSON-RPC URL of the default agent (ends with "/"). */
  readonly url: string;
  /** host:port of the embedded server's gRPC port. */
  readonly grpcAddress: string;
  stderr(): string;
  readonly exited: Promise<{ readonly code: number | null; readonly signal: NodeJS.Signals | null }>;
  /** Resident set size of the bridge process now, from /proc (bytes). */
  rssBytes(): number;
  /**
   * Runs a full garbage collection in the bridge and resolves once it is done; only for a bridge spawned with
   * `collectGarbageOnSignal` (throws otherwise).
   */
  collectGarbage(): Promise<void>;
}

const gcOnSignal = new URL("./gc-on-signal.mjs", import.meta.url).href;
const collectedLine = "gc-on-signal: collected";

/** Runs `parley-bridge --config FILE` embedded on free ports (config written into `dir`) and waits for its banner. */
export async function spawnBridge(options: {
  readonly dir: string;
  readonly config: Record<string, unknown>;
  readonly env?: Record<string, string>;
  /** Preload gc-on-signal.mjs (with --expose-gc) so collectGarbage() works. */
  readonly collectGarbageOnSignal?: boolean;
}): Promise<SpawnedBridge> {
  const configFile = join(options.dir, "bridge-config.json");
  writeFileSync(configFile, JSON.stringify(options.config));
  const env = options.collectGarbageOnSignal
    ? {
        ...options.env,
        NODE_OPTIONS: `--expose-gc "--import=${gcOnSignal}" ${options.env?.NODE_OPTIONS ?? ""}`.trim(),
      }
    : options.env;
  const { child, ready, stderr, exited } = await spawnUntilReady({
    name: "parley-bridge",
    script: bridgeBin,
    args: ["--config", configFile, "--port", "0", "--grpc-port", "0", "--data-dir", join(options.dir, "data")],
    ...(env === undefined ? {} : { env }),
    cwd: options.dir,
    ready: (stdout) => {
      const rpc = /JSON-RPC {4}(\S+)/.exec(stdout);
      const grpc = /gRPC {8}(\S+)/.exec(stdout);
      return rpc && grpc && stdout.includes("Try: ") ? { url: rpc[1]!, grpcAddress: grpc[1]! } : undefined;
    },
  });
  const { url, grpcAddress } = ready;
  return {
    child,
    url,
    grpcAddress,
    stderr,
    exited,
    rssBytes() {
      const status = readFileSync(`/proc/${child.pid}/status`, "utf8");
      const kb = /VmRSS:\s+(\d+) kB/.exec(status);
      if (!kb) throw new Error(`no VmRSS in /proc/${child.pid}/status`);
      return Number(kb[1]) * 1024;
    },
    async collectGarbage() {
      if (!options.collectGarbageOnSignal) throw new Error("spawnBridge: collectGarbage needs collectGarbageOnSignal");
      const count = () => stderr().split(collectedLine).length;
      const before = count();
      child.kill("SIGUSR2");
      while (count() === before) {
        if (child.exitCode !== null || child.signalCode !== null)
          throw new Error("the bridge exited before collecting");
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    },
  };
}

/** One value of the process's /metrics (prom-client's default process metrics), e.g. nodejs_heap_size_used_bytes. */
export async function metric(bridgeUrl: string, name: string): Promise<number> {
  const text = await (await fetch(new URL("/metrics", bridgeUrl))).text();
  const line = text.split("\n").find((l) => l.startsWith(`${name} `) || l.startsWith(`${name}{`));
  if (!line) throw new Error(`/metrics has no ${name}`);
  return Number(line.slice(line.lastIndexOf(" ") + 1));
}

/** A JSON-RPC POST over its own connection (no agent, no pool), so each caller is one TCP connection. */
export function postOwnConnection(
  url: string,
  body: string,
  headers: Record<string, string> = {},
): Promise<import("node:http").IncomingMessage> {
  return new Promise((resolve, reject) => {
    const req = request(url, {
      method: "POST",
      agent: false,
      headers: { "content-type": "application/json", "A2A-Version": "1.0", ...headers },
    });
    req.once("response", resolve);
    req.once("error", reject);
    req.end(body);
  });
}
