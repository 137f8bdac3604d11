// The "growth" scaling part of bench/run.mjs: CPU per send over successive blocks of fresh-context sends on one
// server, while its store fills.
import { taskReply } from "./run-settings.mjs";

async function growth({ settings, startServer, measure, elapsed }, label, script, env) {
  process.stderr.write(`  growth: ${label} ... [${elapsed()}]\n`);
  const server = await startServer(script, { env });
  const blocks = [];
  const spec = { protocol: "jsonrpc", op: "send", contexts: "fresh", url: server.info.jsonRpcUrl };
  try {
    await measure(server, {
      id: "growth-warmup",
      spec,
      overrides: { warmupMs: 0, durationMs: 120_000, maxRequests: settings.growthWarmup },
    });
    for (let b = 0; b < settings.growthBlocks; b++) {
      const r = await measure(server, {
        id: `growth-${b}`,
        spec,
        overrides: { warmupMs: 0, durationMs: 120_000, maxRequests: settings.growthBlock },
      });
      blocks.push({ requests: r.requests, rps: r.rps, cpuMsPerRequest: r.cpuMsPerRequest });
    }
  } finally {
    await server.stop();
  }
  return blocks;
}

/** Each server's blocks, by the name the report gives it. */
export async function growthPart(ctx) {
  return {
    "Parley bridge, task replies": await growth(ctx, "Parley bridge, task replies", "servers/parley.mjs", taskReply),
    ...(ctx.durableAnchors
      ? {
          "SDK DatabaseTaskStore on SQLite": await growth(ctx, "SDK on SQLite", "anchors/anchor-db.mjs", {
            ANCHOR_DB: "sqlite",
          }),
        }
      : {}),
  };
}
