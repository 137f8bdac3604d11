// The "history" scaling part of bench/run.mjs, on one server: reading a thread's history at 10 and 100 000
// messages, sends on either thread, the memory of 10 000 idle conversations, and the store's appends per second.

/** The history, idle and appends figures of the part. */
export async function historyPart({ startServer, load, elapsed }) {
  const scaling = {};
  const parley = await startServer("servers/parley.mjs", { execArgv: ["--expose-gc"] });
  try {
    const url = parley.info.grpcUrl;
    process.stderr.write(`  history build (10 vs 100 000 messages) ... [${elapsed()}]\n`);
    // The small thread's whole is what both threads read for the same work (historyRead's sameCount).
    const small = 10;
    const reps = 5_000;
    await parley.request("fill", { contextId: "thread-10", count: small });
    const fill = await parley.request("fill", { contextId: "thread-100k", count: 100_000 });
    const read10 = await parley.request("historyRead", { contextId: "thread-10", reps, sameCount: small });
    const read100k = await parley.request("historyRead", { contextId: "thread-100k", reps, sameCount: small });
    // Alternating the two keeps drift (GC, compaction) from landing on one side only.
    const sendTimes = { small: [], big: [] };
    const sendCpu = { small: 0, big: 0 };
    const SEQUENTIAL_REPS = 40;
    // Sequential sends on one context; the server's CPU for them, per send (load's 10 warm-up sends included).
    const sequential = async (contextId, side) => {
      const before = await parley.request("cpu");
      const r = await load.request("sequentialSends", { spec: { url, contextId, reps: SEQUENTIAL_REPS } });
      const after = await parley.request("cpu");
      sendCpu[side] += (after.usage.user + after.usage.system - before.usage.user - before.usage.system) / 1000;
      sendTimes[side].push(r.medianMs);
    };
    for (let i = 0; i < 3; i++) {
      await sequential("thread-10", "small");
      await sequential("thread-100k", "big");
    }
    const med = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
    scaling.history = {
      fill100kMs: fill.ms,
      read10Ms: read10.storedMs,
      read100kMs: read100k.storedMs,
      cached10Ms: read10.cachedMs,
      cached100kMs: read100k.cachedMs,
      same10Ms: read10.sameMs,
      same100kMs: read100k.sameMs,
      sameMessages: small,
      reads: reps,
      readMessages10: read10.messages,
      readMessages100k: read100k.messages,
      send10Ms: med(sendTimes.small),
      send100kMs: med(sendTimes.big),
      // 3 rounds of SEQUENTIAL_REPS measured sends plus the load generator's 10 warm-up sends each.
      sendCpu10Ms: sendCpu.small / (3 * (SEQUENTIAL_REPS + 10)),
      sendCpu100kMs: sendCpu.big / (3 * (SEQUENTIAL_REPS + 10)),
    };
    process.stderr.write(`  10 000 idle conversations ... [${elapsed()}]\n`);
    const base = await parley.request("gc");
    const made = await parley.request("conversations", { count: 10_000, concurrency: 64 });
    const idle = await parley.request("gc");
    scaling.idle = {
      created: made.created,
      rssGrowth: idle.rss - base.rss,
      heapGrowth: idle.heapUsed - base.heapUsed,
    };
    process.stderr.write(`  store appends ... [${elapsed()}]\n`);
    scaling.appends = {
      concurrent: (await parley.request("storeAppends", { count: 4_000, concurrency: 64 })).perSecond,
      sequential: (await parley.request("storeAppends", { count: 1_000, concurrency: 1 })).perSecond,
    };
  } finally {
    await parley.stop();
  }
  return scaling;
}
