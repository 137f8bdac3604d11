// The "flat" scaling part of bench/run.mjs: CPU per fresh-context send on an empty store and on one that holds
// settings.flatThreads stored threads.
import { performance } from "node:perf_hooks";

/** Waits until the server process uses under 5% of a core over one second; how long that took (ms). */
async function settle(server, maxMs) {
  const started = performance.now();
  let before = await server.request("cpu");
  while (performance.now() - started < maxMs) {
    await new Promise((r) => setTimeout(r, 1_000));
    const now = await server.request("cpu");
    const usedMs = (now.usage.user + now.usage.system - before.usage.user - before.usage.system) / 1000;
    if (usedMs < 50) break;
    before = now;
  }
  return performance.now() - started;
}

/** Per-send figures of blocks taken together. */
function perSend(...blocks) {
  const requests = blocks.reduce((n, b) => n + b.requests, 0);
  const cpuMs = blocks.reduce((n, b) => n + b.cpuMs, 0);
  const mainMs = blocks.reduce((n, b) => n + b.mainMs, 0);
  return {
    requests,
    rps: requests / blocks.reduce((n, b) => n + b.seconds, 0),
    cpuMsPerRequest: cpuMs / requests,
    mainMsPerRequest: mainMs / requests,
    othersMsPerRequest: (cpuMs - mainMs) / requests,
  };
}

/** The empty and the full store's figures, each side's first block apart. */
export async function flatPart({ settings, startServer, measure, elapsed }) {
  const { flatThreads, flatBlock } = settings;
  process.stderr.write(`  flat cost: empty vs ${flatThreads} stored threads ... [${elapsed()}]\n`);
  // The echo agent's default task reply (8 chunks, 12 events logged per send): the heavier turn, kept as the
  // row was first measured, since this row compares Parley with itself. Two servers, one per side, whose
  // measured blocks alternate: a shared VM's speed drifts over minutes, and blocks run one side after the
  // other charged that drift to the store (the same build gave 1.27-1.29x in full runs and 1.01-1.08x alone).
  const start = () => startServer("servers/parley.mjs", { env: { PARLEY_ECHO_REPLY: "task" } });
  const emptyServer = await start();
  const fullServer = await start().catch(async (error) => {
    await emptyServer.stop();
    throw error;
  });
  const block = async (server, id) => {
    const spec = { protocol: "jsonrpc", op: "send", contexts: "fresh", url: server.info.jsonRpcUrl };
    // A short warm-up block first (JIT, pools; after the fill, the first compactions), not counted.
    await measure(server, { id, spec, overrides: { warmupMs: 0, durationMs: 60_000, maxRequests: flatBlock / 4 } });
    const r = await measure(server, {
      id,
      spec,
      overrides: { warmupMs: 0, durationMs: 120_000, maxRequests: flatBlock },
    });
    return {
      requests: r.requests,
      cpuMs: r.cpuMsPerRequest * r.requests,
      mainMs: r.mainMsPerRequest * r.requests,
      seconds: r.elapsedMs / 1000,
    };
  };
  try {
    const fill = await fullServer.request("fillThreads", { count: flatThreads, concurrency: 64 });
    // The fill wrote the whole store in one go; LevelDB compacts it in its own threads for a while after,
    // and that CPU would be charged to the sends measured next. A store that grew over time has no such
    // backlog, so the sends wait until the server is idle (under 5% of a core over a second, at most 5 min).
    const settleMs = await settle(fullServer, 300_000);
    // Each side's first block is reported apart and not compared: the empty store's also pays for V8 compiling
    // the send path, and the full store's for the seek compactions the fill left (LevelDB merges a table down
    // once enough reads missed in it; every fresh context's meta read is such a miss, and while level 0 holds
    // no table, as after a fill until the write buffer first fills, the misses are charged to the deeper
    // levels' tables). Then two blocks each, alternating.
    const emptyFirst = await block(emptyServer, "flat-empty");
    const fullFirst = await block(fullServer, "flat-full");
    const empty = [];
    const full = [];
    for (let round = 2; round <= 3; round++) {
      empty.push(await block(emptyServer, `flat-empty-${round}`));
      full.push(await block(fullServer, `flat-full-${round}`));
    }
    return {
      threads: flatThreads,
      fillMs: fill.ms,
      storeBytes: fill.storeBytes,
      settleMs,
      emptyFirst: perSend(emptyFirst),
      empty: perSend(...empty),
      fullFirst: perSend(fullFirst),
      full: perSend(...full),
    };
  } finally {
    await Promise.all([emptyServer.stop(), fullServer.stop()]);
  }
}
