import { type ChildProcess, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";

const distIndex = fileURLToPath(new URL("../dist/index.js", import.meta.url));

/** Spawns `node` on a fixture (which imports the built package) and exposes its stdout lines. */
export function spawnFixture(name: string, args: string[]) {
  if (!existsSync(distIndex)) {
    throw new Error(`${distIndex} is missing: build the package (npx tsc -p tsconfig.build.json) before these tests`);
  }
  const fixture = fileURLToPath(new URL(`./fixtures/${name}`, import.meta.url));
  const child: ChildProcess = spawn(process.execPath, [fixture, ...args], { stdio: ["pipe", "pipe", "pipe"] });
  const lines: string[] = [];
  let stderr = "";
  let partial = "";
  const waiters: Array<() => void> = [];
  child.stdout!.setEncoding("utf8").on("data", (chunk: string) => {
    partial += chunk;
    const parts = partial.split("\n");
    partial = parts.pop()!;
    lines.push(...parts);
    for (const wake of waiters.splice(0)) wake();
  });
  child.stderr!.setEncoding("utf8").on("data", (chunk: string) => {
    stderr += chunk;
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.on("exit", (code, signal) => {
      resolve({ code, signal });
      for (const wake of waiters.splice(0)) wake();
    });
  });
  let done = false;
  void exited.then(() => {
    done = true;
  });
  return {
    child,
    lines,
    exited,
    stderr: () => stderr,
    /** Resolves once `predicate` holds for the lines seen so far; rejects if the child exits first. */
    async waitFor(predicate: (lines: readonly string[]) => boolean): Promise<void> {
      while (!predicate(lines)) {
        if (done) throw new Error(`fixture ${name} exited before the expected output; stderr: ${stderr}`);
        await new Promise<void>((wake) => waiters.push(wake));
      }
    },
  };
}
