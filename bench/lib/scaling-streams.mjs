// The "streams" scaling part of bench/run.mjs: what settings.heldStreams open streams cost a server's memory,
// on Parley, the anchor and a bare node:http server.

async function heldStreams({ settings, startServer, load, elapsed }, label, script, env) {
  process.stderr.write(`  ${settings.heldStreams} open streams: ${label} ... [${elapsed()}]\n`);
  const server = await startServer(script, { env, execArgv: ["--expose-gc"] });
  try {
    const url = server.info.jsonRpcUrl;
    if (!url) return { skipped: server.info.bridgeError };
    // A few streams first, so lazily built code and pools are not counted as per-stream memory.
    await load.request("openStreams", { spec: { url, count: 20 } });
    await load.request("awaitStreams");
    const base = await server.request("gc");
    const opened = await load.request("openStreams", { spec: { url, count: settings.heldStreams } });
    const open = await server.request("gc");
    const ended = await load.request("awaitStreams");
    await new Promise((r) => setTimeout(r, 500));
    const after = await server.request("gc");
    return {
      opened: opened.open,
      completed: ended.ok,
      failed: ended.failed,
      rssGrowth: open.rss - base.rss,
      heapGrowth: open.heapUsed - base.heapUsed,
      rssAfter: after.rss - base.rss,
      heapAfter: after.heapUsed - base.heapUsed,
    };
  } finally {
    await server.stop();
  }
}

/** Each server's memory growth with the streams open and after they ended. */
export async function streamsPart(ctx) {
  const delay = String(ctx.settings.streamDelayMs);
  return {
    parley: await heldStreams(ctx, "Parley bridge", "servers/parley.mjs", { PARLEY_ECHO_DELAY_MS: delay }),
    anchor: await heldStreams(ctx, "anchor", "servers/anchor.mjs", { ANCHOR_REPLY: "stream", ANCHOR_DELAY_MS: delay }),
    // The floor: what a Node server that holds the same streams and nothing else grows by.
    bare: await heldStreams(ctx, "bare node:http", "servers/bare.mjs", { BENCH_BARE_DELAY_MS: delay }),
  };
}
