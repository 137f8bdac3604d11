#!/usr/bin/env node
// npm run bench [-- --scaling | --no-scaling | --only=NAME,... | --profile | --quick | --warmup-ms=N | --measure-ms=N
//                   | --rounds=N | --flat-threads=N | --base=DIR | --no-durable-anchors | --pin | --no-docs | --help]
// Starts every server in its own process, drives each with the same load
// generator (its own process), and prints one table plus the scaling figures.
import { readFileSync } from "node:fs";
import { cpus } from "node:os";
import { performance } from "node:perf_hooks";
import { ensureAnchorDeps } from "./anchors/install.mjs";
import { startChild } from "./lib/children.mjs";
import { writeBenchDocs } from "./lib/docs-table.mjs";
import { printReport } from "./lib/report.mjs";
import { createMeasure } from "./lib/run-measure.mjs";
import { runScaling } from "./lib/run-scaling.mjs";
import { readRunSettings } from "./lib/run-settings.mjs";
import { runTable } from "./lib/run-table.mjs";

const settings = readRunSettings(process.argv.slice(2));
const { only, pin } = settings;
/** A server's child process: pinned to CPU 0 with --pin. */
const startServer = (script, options = {}) => startChild(script, { ...options, ...(pin ? { cpus: "0" } : {}) });
// After the flags are read, so a mistyped one stops the run before anything is installed. The durable anchors
// need better-sqlite3, which is compiled on first use (anchors/install.mjs).
const durableAnchors = settings.durableAnchors && (await ensureAnchorDeps());

const started = performance.now();
const elapsed = () => `${((performance.now() - started) / 1000).toFixed(0)} s`;
const load = await startChild("load.mjs", pin ? { cpus: "1" } : {});
const measure = createMeasure(load, settings);
/** The --only names that named a row, a group or a scaling part, so a mistyped one is reported; and every row id. */
const matched = new Set();
const rowIds = new Set();
const ctx = { settings, durableAnchors, startServer, load, measure, elapsed, matched, rowIds };

const rows = await runTable(ctx);
const scaling = await runScaling(ctx);

await load.stop();

const cpuModel =
  /model name\s*:\s*(.*)/.exec(readFileSync("/proc/cpuinfo", "utf8"))?.[1] ?? cpus()[0]?.model ?? "unknown";
const summary = printReport({
  machine: { nproc: cpus().length, cpuModel, node: process.version },
  settings: {
    warmupMs: settings.warmupMs,
    measureMs: settings.measureMs,
    rounds: settings.rounds,
    concurrency: settings.concurrency,
    heldStreams: settings.heldStreams,
    growthWarmup: settings.growthWarmup,
    pinned: pin,
  },
  rows,
  scaling,
  elapsedS: (performance.now() - started) / 1000,
});
const fullRun =
  !only && !settings.quick && !settings.scalingOnly && !settings.baseDir && !pin && settings.defaultPhases;
if (fullRun && !settings.noDocs) {
  writeBenchDocs(summary);
  process.stdout.write("bench: the table is written into docs/benchmarks.md\n");
}
const unmatched = only ? [...only].filter((name) => !matched.has(name)) : [];
if (unmatched.length > 0) {
  process.stderr.write(
    `bench: --only named ${unmatched.map((n) => JSON.stringify(n)).join(", ")}, which matched no row or scaling part; ` +
      `${rowIds.size > 0 ? `the rows are ${[...rowIds].join(", ")}` : "no table row ran (--scaling)"}; ` +
      "the scaling parts are history, growth, flat, streams (not with --no-scaling)\n",
  );
  process.exit(2);
}
