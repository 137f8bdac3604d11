// The settings of a bench/run.mjs run: its flags (--help, a refusal of unknown ones) and the sizes of its rows.
import { cpus } from "node:os";
import { countFlag } from "./embedded.mjs";

const help = `npm run bench [-- FLAGS]   (or: node bench/run.mjs FLAGS, after npm run build)

Runs every server in its own process against one load generator and prints one table of req/s, latency and
CPU per request with each Parley row's ratio to its anchor, LevelDB's group commit and V8's garbage collector per
request under it, then the scaling figures.

  --no-scaling           only the table
  --scaling              only the scaling figures
  --quick                one shorter round, smaller scaling blocks
  --only=ID,...          a subset of rows (bridge-send, anchor-jsonrpc-send, ...; history, growth, flat,
                         streams name the scaling parts)
  --profile              node --cpu-prof profiles of the Parley server in bench/profiles/
  --no-durable-anchors   skip the SDK's DatabaseTaskStore rows (SQLite, PostgreSQL)
  --warmup-ms=N          each row's warm-up (default 1000, --quick 500)
  --measure-ms=N         each row's measured phase (default 3000, --quick 1500)
  --rounds=N             rounds of the table, each row on a fresh server per round, the best kept (default 2,
                         --quick 1)
  --flat-threads=N       stored threads for the flat-cost part (default 100000, --quick 20000)
  --base=DIR             also run every Parley row on another built checkout, in the same rounds
  --pin                  every server on CPU 0 (its helper threads too), the load generator on CPU 1
  --no-docs              do not write the table into docs/benchmarks.md (a run with the default rows, rounds
                         and phases writes it; --only, --quick, --scaling, --base and --pin runs never do)
  --help                 this text

docs/benchmarks.md explains the rows and the targets.
`;

const switches = new Set([
  "--scaling",
  "--no-scaling",
  "--quick",
  "--profile",
  "--no-durable-anchors",
  "--pin",
  "--no-docs",
]);
const valued = ["--only=", "--base=", "--flat-threads=", "--warmup-ms=", "--measure-ms=", "--rounds="];

/** The run's settings from its arguments; prints --help, or a bad flag's error, and exits. */
export function readRunSettings(argv) {
  const args = new Set(argv);
  if (args.has("--help") || args.has("-h")) {
    process.stdout.write(help);
    process.exit(0);
  }
  for (const arg of args) {
    if (switches.has(arg) || valued.some((prefix) => arg.startsWith(prefix))) continue;
    process.stderr.write(
      `bench: unknown flag ${JSON.stringify(arg)}; the flags are ${[...switches].join(", ")}, ` +
        `${valued.map((v) => `${v}...`).join(", ")} (--help lists them; see docs/benchmarks.md)\n`,
    );
    process.exit(2);
  }
  /** The text after `--name=` of that flag, or undefined without it. */
  const flagValue = (name) => [...args].find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
  const onlyArg = flagValue("only");
  const quick = args.has("--quick");
  // --pin: as issue 16 measured its starting point, each server gets one core (LevelDB's and V8's threads share it
  // with its event loop) and the load generator the other, so a server never competes with the client for a core.
  const pin = args.has("--pin");
  if (pin && cpus().length < 2) {
    process.stderr.write(
      `bench: --pin needs two CPUs (one for the servers, one for the load); this machine has ${cpus().length}\n`,
    );
    process.exit(2);
  }
  const count = (name, fallback) => countFlag("bench", name, flagValue(name), fallback);
  // --warmup-ms and --measure-ms lengthen a row's phases: every server keeps compiling hot code in V8's worker
  // threads for seconds after it starts, so the short defaults measure some of that work on both sides (figures in
  // docs/benchmarks.md).
  const warmupMs = count("warmup-ms", quick ? 500 : 1_000);
  // Every row is measured in each round, each time on a freshly started server, and the
  // round with the most requests/s is kept: on a shared VM a neighbour can halve one
  // row's figures, and taking the best of independent samples treats every server alike.
  const rounds = count("rounds", quick ? 1 : 2);
  const measureMs = count("measure-ms", quick ? 1_500 : 3_000);
  // Flat cost: CPU per send on an empty store, then after this many stored threads (--flat-threads=N;
  // issue 16's target names 1 000 000, which takes minutes to fill here, so the default run fills fewer).
  const flatThreads = count("flat-threads", quick ? 20_000 : 100_000);
  // Only a run of every row with the default rounds and phases stands for "the latest run" in the documentation.
  const defaultPhases =
    flagValue("rounds") === undefined && flagValue("warmup-ms") === undefined && flagValue("measure-ms") === undefined;
  return {
    only: onlyArg !== undefined ? new Set(onlyArg.split(",")) : undefined,
    scalingOnly: args.has("--scaling"),
    withScaling: !args.has("--no-scaling"),
    quick,
    profile: args.has("--profile"),
    pin,
    // --base=DIR: every Parley row also runs on the servers of another checkout (built, with node_modules),
    // in the same rounds, so a change is measured against what it replaces under the same load.
    baseDir: flagValue("base")?.replace(/\/$/, ""),
    durableAnchors: !args.has("--no-durable-anchors"),
    noDocs: args.has("--no-docs"),
    defaultPhases,
    warmupMs,
    rounds,
    measureMs,
    maxRequests: 200_000,
    concurrency: 64,
    heldStreams: 1_000,
    streamDelayMs: 700,
    growthBlocks: quick ? 3 : 6,
    growthBlock: quick ? 2_000 : 10_000,
    // Unmeasured sends before the first block: without them the first block also paid for compiling the send path,
    // which made it the dearest and hid part of the growth the rows are there to show.
    growthWarmup: quick ? 500 : 2_000,
    flatThreads,
    flatBlock: quick ? 1_000 : 4_000,
  };
}

// Task replies as the durable anchors give them: a COMPLETED task with the whole text in one artifact
// (PARLEY_ECHO_CHUNKS=1; the echo agent's default streams a task reply in 8 chunks, 12 events per send).
export const taskReply = { PARLEY_ECHO_REPLY: "task", PARLEY_ECHO_CHUNKS: "1" };
