import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

export interface RunningBridge {
  /** The bridge's base URL, ending with "/". */
  readonly url: string;
  /** Everything the process printed, for failure messages. */
  output(): string;
  stop(): Promise<void>;
}

const bridgeMain = fileURLToPath(new URL("../../bridge/dist/main.js", import.meta.url));

/**
 * Starts the real `parley-bridge` binary (what `npm start` runs) in embedded
 * mode, on a free port with its own LevelDB directory and config file, and
 * resolves once it prints its URLs.
 */
export async function startBridge(config: object, env: Record<string, string> = {}): Promise<RunningBridge> {
  const dir = mkdtempSync(join(tmpdir(), "parley-console-e2e-"));
  const configFile = join(dir, "config.json");
  writeFileSync(configFile, JSON.stringify(config));
  const child: ChildProcess = spawn(
    process.execPath,
    [bridgeMain, "--port", "0", "--grpc-port", "0", "--data-dir", join(dir, "data"), "--log-level", "warn"],
    { env: { ...process.env, PORT: "0", PARLEY_CONFIG: configFile, ...env }, stdio: ["ignore", "pipe", "pipe"] },
  );
  let printed = "";
  child.stdout?.on("data", (b: Buffer) => {
    printed += b.toString();
  });
  child.stderr?.on("data", (b: Buffer) => {
    printed += b.toString();
  });
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the bridge did not start within 60 s:\n${printed}`)), 60_000);
    const check = () => {
      const match = /console\s+(http:\/\/\S+\/)console\//.exec(printed);
      if (match) {
        clearTimeout(timer);
        resolve(match[1]!);
      }
    };
    child.stdout?.on("data", check);
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`the bridge exited with ${code} before it was ready:\n${printed}`));
    });
  });
  return {
    url,
    output: () => printed,
    async stop() {
      if (child.exitCode === null) {
        const exited = new Promise((resolve) => child.once("exit", resolve));
        child.kill("SIGTERM");
        await exited;
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
