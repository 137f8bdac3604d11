#!/usr/bin/env node
// The long version of the crash-safety test: SIGKILLs the built server binary
// under mixed gRPC load many times in a row (50 by default) and prints what it
// survived. The CI suite runs the same test with 5 cycles.
//
//   node scripts/crash-loop.mjs [cycles] [seed]
//
// Needs a built server (npm run build). A failure prints the seed to replay.
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const serverDir = join(root, "packages", "server");
const cycles = process.argv[2] ?? "50";
const seed = process.argv[3];
if (!/^\d+$/.test(cycles) || Number(cycles) < 1) {
  console.error(`crash-loop: cycles must be a positive integer, got ${JSON.stringify(cycles)}`);
  process.exit(2);
}
if (!existsSync(join(serverDir, "dist", "main.js"))) {
  console.error("crash-loop: packages/server/dist/main.js is missing; run `npm run build` first");
  process.exit(2);
}

const work = mkdtempSync(join(tmpdir(), "parley-crash-loop-"));
const figuresFile = join(work, "figures.json");
const started = Date.now();
const run = spawnSync("npx", ["vitest", "run", "test/reliability-crash.spec.ts"], {
  cwd: serverDir,
  stdio: "inherit",
  env: {
    ...process.env,
    PARLEY_CRASH_CYCLES: cycles,
    PARLEY_CRASH_FIGURES: figuresFile,
    ...(seed !== undefined ? { PARLEY_CRASH_SEED: seed } : {}),
  },
});
const seconds = ((Date.now() - started) / 1000).toFixed(1);
if (!existsSync(figuresFile)) {
  rmSync(work, { recursive: true, force: true });
  console.error(`crash-loop: the test wrote no figures (exit ${run.status}); see its output above`);
  process.exit(1);
}
const figures = JSON.parse(readFileSync(figuresFile, "utf8"));
rmSync(work, { recursive: true, force: true });
console.log(
  [
    "",
    `crash loop: ${run.status === 0 ? "PASSED" : "FAILED"} in ${seconds} s (seed ${figures.seed})`,
    `  SIGKILL cycles survived       ${figures.cycles} of ${cycles}`,
    `  requests sent                 ${figures.requests}`,
    `  messages acknowledged         ${figures.acknowledged}`,
    `  acknowledged messages lost    ${figures.lost}`,
    `  messages stored twice         ${figures.duplicated}`,
    `  running tasks failed on restart as interrupted  ${figures.interruptedTasksFailed}`,
    `  task records checked          ${figures.tasksChecked}`,
  ].join("\n"),
);
process.exit(run.status === 0 && figures.lost === 0 && figures.duplicated === 0 ? 0 : 1);
