import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
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
