import { execFile } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { createParley, loadConfig, type Parley } from "@parley/server";

export interface TestServer {
  readonly parley: Parley;
  readonly baseUrl: string;
  close(): Promise<void>;
}

/** A real Parley on a loopback h2c port with its own LevelDB directory. */
export async function startServer(env: NodeJS.ProcessEnv = {}, extraArgv: string[] = []): Promise<TestServer> {
  const dataDir = mkdtempSync(join(tmpdir(), "parley-client-test-"));
  const config = loadConfig({
    argv: ["--port", "0", "--data-dir", dataDir, "--log-level", "silent", ...extraArgv],
    env,
  });
  const parley = await createParley(config);
  const { address } = await parley.listen();
  return {
    parley,
    baseUrl: `http://${address}`,
    async close() {
      await parley.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

export function tempDir(prefix: string): { path: string; remove(): void } {
  const path = mkdtempSync(join(tmpdir(), prefix));
  return { path, remove: () => rmSync(path, { recursive: true, force: true }) };
}

/** The parley command as npm links it: the committed bin entry, which loads the build. */
const cli = fileURLToPath(new URL("../bin/parley.js", import.meta.url));

export interface CliResult {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * Runs the built `parley` CLI as a child process with exactly `env`; async,
 * because the server it talks to lives in this process.
 */
export function runCli(
  args: string[],
  options: { env: NodeJS.ProcessEnv; stdin?: string; cwd?: string },
): Promise<CliResult> {
  return new Promise((done) => {
    const spawnOptions = { env: options.env, ...(options.cwd ? { cwd: options.cwd } : {}) };
    const child = execFile(process.execPath, [cli, ...args], spawnOptions, (error, stdout, stderr) => {
      const code = error ? (typeof error.code === "number" ? error.code : 1) : 0;
      done({ code, stdout, stderr });
    });
    child.stdin?.end(options.stdin ?? "");
  });
}
