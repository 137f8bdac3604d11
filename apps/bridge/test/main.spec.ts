import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { renderHelp, settingList } from "@parley/server";
import { afterAll, describe, expect, it } from "vitest";

// The tests that start real node processes (each loads the whole server) get room on a loaded 2-core machine.
const spawning = { timeout: 180_000 };

// The real parley-bridge command, through the committed entry npm links into node_modules/.bin.
const bridgeBin = fileURLToPath(new URL("../bin/parley-bridge.js", import.meta.url));
const dir = mkdtempSync(join(tmpdir(), "parley-bridge-main-"));
const children: ChildProcess[] = [];
afterAll(() => {
  for (const child of children) child.kill("SIGKILL");
  rmSync(dir, { recursive: true, force: true });
});

/** A run that starts instead of refusing is killed after `timeout` and has no exit status. */
function bridge(args: string[], env: Record<string, string> = {}, timeout = 120_000) {
  const run = spawnSync(process.execPath, [bridgeBin, ...args], {
    encoding: "utf8",
    env: { PATH: process.env.PATH ?? "", ...env },
    timeout,
  });
  return { status: run.status, stdout: run.stdout, stderr: run.stderr };
}

describe("parley-bridge", spawning, () => {
  it("--help lists every setting, the bridge's own included, from the schema", () => {
    const run = bridge(["--help"]);
    expect(run.status).toBe(0);
    expect(run.stdout).toBe(`${renderHelp("parley-bridge")}\n`);
    for (const s of settingList) expect(run.stdout).toContain(`  ${s.path}`);
    expect(run.stdout).toContain("  bridge.port  PORT  --port");
    expect(run.stdout).toContain("  port  PARLEY_GRPC_PORT  --grpc-port");
  });

  it("refuses a bad file, variable or remote-mode flag, naming it", () => {
    const typo = join(dir, "typo.json");
    writeFileSync(typo, JSON.stringify({ histroy: {}, limits: { maxMessageBytes: "lots" } }));
    const bad = bridge(["--config", typo], { BRIDGE_KEEPALIVE_MS: "soon" });
    expect(bad.status).toBe(2);
    expect(bad.stderr).toContain("invalid configuration (3 problems)");
    expect(bad.stderr).toContain(`histroy = {} (config file ${typo}): unknown key`);
    expect(bad.stderr).toContain(`limits.maxMessageBytes = "lots" (config file ${typo})`);
    expect(bad.stderr).toContain('bridge.keepAliveMs = "soon" (environment BRIDGE_KEEPALIVE_MS)');
    const remote = bridge(["--upstream", "http://127.0.0.1:1", "--grpc-port", "9"]);
    expect(remote.status).toBe(2);
    expect(remote.stderr).toContain("port (flags): remote mode (--upstream) runs no server");
  });

  it("refuses a bad value in the file even where a variable or flag overrides it", () => {
    const overridden = join(dir, "overridden.json");
    writeFileSync(overridden, JSON.stringify({ port: 0, bridge: { port: "abc" }, history: { maxMessages: "lots" } }));
    const run = bridge(
      ["--config", overridden, "--data-dir", dir],
      { PORT: "0", PARLEY_HISTORY_MESSAGES: "5" },
      60_000,
    );
    expect(run.status).toBe(2);
    expect(run.stdout).toBe("");
    expect(run.stderr).toContain("invalid configuration (2 problems)");
    expect(run.stderr).toContain(
      `bridge.port = "abc" (config file ${overridden}): Invalid input: expected number, received string`,
    );
    expect(run.stderr).toContain(`history.maxMessages = "lots" (config file ${overridden})`);
  });

  it("refuses bad agent options with exit code 2, each at its full path with its source", () => {
    const options = join(dir, "options.json");
    writeFileSync(
      options,
      JSON.stringify({ agents: [{ name: "echo", type: "echo", options: { chunks: -1, delayMs: "slow", chunkz: 3 } }] }),
    );
    const run = bridge(["--config", options, "--port", "0", "--grpc-port", "0", "--data-dir", dir], {}, 60_000);
    expect(run.status).toBe(2);
    expect(run.stdout).toBe("");
    expect(run.stderr).toContain("invalid configuration (3 problems)");
    expect(run.stderr).toContain(
      `agents[0].options.chunks = -1 (config file ${options}): Too small: expected number to be >=1; allowed: a whole number, at least 1`,
    );
    expect(run.stderr).toContain(`agents[0].options.delayMs = "slow" (config file ${options})`);
    expect(run.stderr).toContain(
      `agents[0].options.chunkz = 3 (config file ${options}): unknown key (did you mean "chunks"?)`,
    );
  });

  it("starts embedded on both ports and says it runs in open mode without a rate limit", async () => {
    const child = spawn(process.execPath, [bridgeBin, "--port", "0", "--grpc-port", "0", "--data-dir", dir], {
      env: { PATH: process.env.PATH ?? "", PARLEY_LOG_LEVEL: "silent" },
      cwd: dir,
      stdio: ["ignore", "pipe", "pipe"],
    });
    children.push(child);
    let stdout = "";
    await new Promise<void>((resolve, reject) => {
      child.stdout!.on("data", (chunk: Buffer) => {
        stdout += chunk.toString();
        if (stdout.includes("Try: ")) resolve();
      });
      child.once("exit", (code) => reject(new Error(`parley-bridge exited with ${code}: ${stdout}`)));
    });
    expect(stdout).toMatch(/JSON-RPC {4}http:\/\/127\.0\.0\.1:\d+\/ {3}\(--port \/ PORT/);
    expect(stdout).toMatch(/gRPC {8}127\.0\.0\.1:\d+ {3}\(--grpc-port \/ PARLEY_GRPC_PORT/);
    expect(stdout).toContain("warning: open mode: no API keys configured, every caller is tenant 'default'");
    expect(stdout).toContain("no per-tenant rate limit (open mode has one tenant");
    const exited = new Promise((resolve) => child.once("exit", (code, signal) => resolve(code ?? signal)));
    child.kill("SIGTERM");
    expect(await exited).toBe(0);
  });
});
