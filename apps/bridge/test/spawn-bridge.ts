import { type ChildProcess, spawn } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

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
}

/** Runs `parley-bridge --config FILE` embedded on free ports (config written into `dir`) and waits for its banner. */
export async function spawnBridge(options: {
  readonly dir: string;
  readonly config: Record<string, unknown>;
  readonly env?: Record<string, string>;
}): Promise<SpawnedBridge> {
  const configFile = join(options.dir, "bridge-config.json");
  writeFileSync(configFile, JSON.stringify(options.config));
  const child = spawn(
    process.execPath,
    [bridgeBin, "--config", configFile, "--port", "0", "--grpc-port", "0", "--data-dir", join(options.dir, "data")],
    {
      // A clean environment, so a developer's PARLEY_* variables cannot change what is tested.
      env: { PATH: process.env.PATH ?? "", PARLEY_LOG_LEVEL: "warn", ...options.env },
      cwd: options.dir,
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  let stderr = "";
  let stdout = "";
  child.stderr!.setEncoding("utf8").on("data", (chunk: string) => {
    stderr += chunk;
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once("exit", (code, signal) => resolve({ code, signal })),
  );
  const { url, grpcAddress } = await new Promise<{ url: string; grpcAddress: string }>((resolve, reject) => {
    child.stdout!.setEncoding("utf8").on("data", (chunk: string) => {
      stdout += chunk;
      const rpc = /JSON-RPC {4}(\S+)/.exec(stdout);
      const grpc = /gRPC {8}(\S+)/.exec(stdout);
      if (rpc && grpc && stdout.includes("Try: ")) resolve({ url: rpc[1]!, grpcAddress: grpc[1]! });
    });
    void exited.then(({ code, signal }) =>
      reject(new Error(`parley-bridge exited (code ${code}, signal ${signal}) before serving; stderr:\n${stderr}`)),
    );
  });
  return {
    child,
    url,
    grpcAddress,
    stderr: () => stderr,
    exited,
    rssBytes() {
      const status = readFileSync(`/proc/${child.pid}/status`, "utf8");
      const kb = /VmRSS:\s+(\d+) kB/.exec(status);
      if (!kb) throw new Error(`no VmRSS in /proc/${child.pid}/status`);
      return Number(kb[1]) * 1024;
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
