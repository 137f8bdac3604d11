const num = (x, digits = 0) => (Number.isFinite(x) ? x.toFixed(digits) : "-");
const ms = (x) => (Number.isFinite(x) ? (x < 10 ? x.toFixed(2) : x.toFixed(1)) : "-");
const mb = (bytes) => `${(bytes / 1024 / 1024).toFixed(1)} MB`;
const kib = (bytes) => `${(bytes / 1024).toFixed(1)} KB`;
const totalCpu = (r) => r.cpuMsPerRequest + (r.dbCpuMsPerRequest ?? 0);
const us = (msValue) =>
  Number.isFinite(msValue) ? `${(msValue * 1000).toFixed(Math.abs(msValue) < 0.01 ? 1 : 0)} us` : "-";
const ratio = (x) => (Number.isFinite(x) ? `${x.toFixed(2)}x` : "-");
/** A row's operation as the tables name it: the RPC, and whether its sends reuse one context. */
const operationOf = (r) =>
  `${r.spec.op === "send" ? "SendMessage" : "SendStreamingMessage"}${r.spec.contexts === "reused" ? " (reused ctx)" : ""}`;

function table(header, lines) {
  const widths = header.map((h, i) => Math.max(h.length, ...lines.map((l) => String(l[i]).length)));
  const fmt = (cells) => `| ${cells.map((c, i) => String(c).padEnd(widths[i])).join(" | ")} |`;
  return [fmt(header), `|${widths.map((w) => "-".repeat(w + 2)).join("|")}|`, ...lines.map(fmt)].join("\n");
}

function verdict(ok) {
  return ok === undefined ? "n/a" : ok ? "met" : "NOT met";
}

/**
 * Prints the whole report and returns its summary for docs/benchmarks.md: the machine line, the main table with the
 * note on its ratios, and the targets' verdicts.
 */
export function printReport({ machine, settings, rows, scaling, elapsedS }) {
  const byId = new Map(rows.map((r) => [r.id, r]));
  const out = [];
  out.push(
    `Machine: ${machine.nproc} cores (nproc), ${machine.cpuModel}, Node ${machine.node}. ` +
      `${settings.concurrency} requests in flight, ${settings.warmupMs / 1000} s warm-up + ${settings.measureMs / 1000} s measured per row, ` +
      `best of ${settings.rounds} round${settings.rounds === 1 ? "" : "s"} (each on a fresh server process, the servers in reverse order in even rounds); ` +
      (settings.pinned ? "every server pinned to CPU 0, the load generator to CPU 1; " : "") +
      `Parley with durable history (LevelDB in a temp dir).`,
  );
  out.push("");
  const summaryStart = out.length - 2;
  const lines = rows.map((r) => {
    const op = operationOf(r);
    if (r.skipped) return [r.target, op, "skipped", "", "", "", "", "", "", "", "", "", "", "", r.skipped.slice(0, 60)];
    const a = r.anchor ? byId.get(r.anchor) : undefined;
    const stream = r.spec.op === "stream";
    return [
      r.target,
      op,
      num(r.rps),
      ms(r.p50),
      ms(r.p99),
      stream ? ms(r.firstP50) : "",
      stream ? ms(r.firstP99) : "",
      ms(r.cpuMsPerRequest),
      ms(r.mainMsPerRequest),
      r.dbCpuMsPerRequest === undefined ? "" : ms(r.dbCpuMsPerRequest),
      a ? ratio(r.rps / a.rps) : "",
      a ? ratio(r.p99 / a.p99) : "",
      a && stream ? ratio(r.firstP99 / a.firstP99) : "",
      a ? ratio(totalCpu(r) / totalCpu(a)) : "",
      r.errors ? `${r.errors} errors: ${String(r.sampleError).slice(0, 60)}` : "",
    ];
  });
  out.push(
    table(
      [
        "target",
        "operation",
        "req/s",
        "p50 ms",
        "p99 ms",
        "1st p50",
        "1st p99",
        "CPU ms/req",
        "JS thread ms/req",
        "DB CPU ms/req",
        "req/s vs anchor",
        "p99 vs anchor",
        "1st p99 vs anchor",
        "CPU vs anchor",
        "notes",
      ],
      lines,
    ),
  );
  out.push("");
  out.push(
    "Ratios compare each Parley row with its anchor row in this run: the same protocol and operation (Connect rows with the anchor's gRPC; task-reply rows with the SDK's DatabaseTaskStore on SQLite, PostgreSQL rows with it on PostgreSQL; connect-node rows with the same row on Parley's own routes). CPU is the server process's, all its threads; JS thread is the part its JavaScript (main) thread ran, the rest being its other threads (the libuv pool, V8's GC and compiler workers, LevelDB's compaction thread); DB CPU is its PostgreSQL processes' (backends, WAL writer, checkpointer, background writer), and the CPU ratio compares the sums.",
  );

  const summary = out.slice(summaryStart);
  const committed = rows.filter((r) => !r.skipped && r.commits?.writes !== undefined);
  if (committed.length) {
    out.push("");
    out.push(
      "LevelDB group commit per request (parley_store_writes_total and parley_store_commits_total on the server's /metrics, measured part only):",
    );
    out.push(
      table(
        ["target", "operation", "in flight", "writes/req", "batches/req", "fsyncs/req", "writes per batch"],
        committed.map((r) => [
          r.target,
          operationOf(r),
          r.concurrency,
          num(r.commits.writes, 2),
          num(r.commits.batches, 2),
          num(r.commits.fsyncs, 2),
          num(r.commits.writes / r.commits.batches, 1),
        ]),
      ),
    );
    out.push(
      "The synced rows' req/s and CPU ratios are against the default (process-crash) row of the same operation.",
    );
  }

  const collected = rows.filter((r) => !r.skipped && r.gc && r.requests);
  if (collected.length) {
    const kb = (bytes, r) => num(bytes / r.requests / 1024, 1);
    const perRequestUs = (microseconds, r) => num(microseconds / r.requests, 1);
    const perThousand = (n, r) => num((1000 * n) / r.requests, 2);
    out.push("");
    out.push(
      "V8's garbage collector per request (v8.GCProfiler in each server, measured part only; pauses on the JavaScript thread, the work of V8's helper threads alongside is in the CPU outside it):",
    );
    out.push(
      table(
        [
          "target",
          "operation",
          "allocated KB/req",
          "copied by scavenges KB/req",
          "promoted KB/req",
          "scavenges per 1k req",
          "scavenge pause us/req",
          "mark-compacts per 1k req",
          "mark-compact pause us/req",
        ],
        collected.map((r) => [
          r.target,
          operationOf(r),
          kb(r.gc.allocatedBytes, r),
          kb(r.gc.copiedBytes, r),
          kb(r.gc.promotedBytes, r),
          perThousand(r.gc.scavenges, r),
          perRequestUs(r.gc.scavengeUs, r),
          perThousand(r.gc.markCompacts, r),
          perRequestUs(r.gc.markCompactUs, r),
        ]),
      ),
    );
    out.push(
      "Copied is what the scavenges found alive in the young generation (mostly the requests in flight); promoted is what they moved to the old generation, which mark-compacts then trace; mark-compact pauses include the incremental marking steps on the JavaScript thread.",
    );
  }

  const machineRows = rows.filter((r) => !r.skipped && r.requests && r.loadCpuMsPerRequest !== undefined);
  if (machineRows.length) {
    out.push("");
    out.push(
      `Where each request's CPU went on this ${machine.nproc}-core machine: the server's JavaScript thread, its other threads, the load generator (one process for every row), and the requests/s each bound allows: the JavaScript thread runs on one core at most, and the machine has ${machine.nproc}:`,
    );
    out.push(
      table(
        [
          "target",
          "operation",
          "req/s",
          "server JS ms/req",
          "server other ms/req",
          "load ms/req",
          "machine ms/req",
          "JS-thread bound req/s",
          "machine bound req/s",
        ],
        machineRows.map((r) => {
          const other = r.cpuMsPerRequest - r.mainMsPerRequest;
          const machineMs = r.cpuMsPerRequest + (r.dbCpuMsPerRequest ?? 0) + r.loadCpuMsPerRequest;
          return [
            r.target,
            operationOf(r),
            num(r.rps),
            ms(r.mainMsPerRequest),
            ms(other),
            ms(r.loadCpuMsPerRequest),
            ms(machineMs),
            num(1000 / r.mainMsPerRequest),
            num((machine.nproc * 1000) / machineMs),
          ];
        }),
      ),
    );
  }

  const twins = rows.filter((r) => r.baseOf && !r.skipped && byId.get(r.baseOf)?.rps);
  if (twins.length) {
    out.push("");
    out.push("This checkout against the base checkout (--base), same rounds:");
    out.push(
      table(
        ["row", "req/s", "req/s base", "req/s ratio", "CPU ms/req", "CPU base", "CPU ratio", "JS thread ratio"],
        twins.map((b) => {
          const r = byId.get(b.baseOf);
          return [
            r.id,
            num(r.rps),
            num(b.rps),
            ratio(r.rps / b.rps),
            ms(totalCpu(r)),
            ms(totalCpu(b)),
            ratio(totalCpu(r) / totalCpu(b)),
            ratio(r.mainMsPerRequest / b.mainMsPerRequest),
          ];
        }),
      ),
    );
  }

  const targets = [];
  const pr = (id, anchorId) => [byId.get(id), byId.get(anchorId)];
  const [bt, sq] = pr("bridge-send-task", "anchor-sqlite-send");
  if (bt?.rps && sq?.rps)
    targets.push([
      "Bridge SendMessage, durable history, task replies: >= 3x the SDK's DatabaseTaskStore on SQLite (req/s)",
      `${ratio(bt.rps / sq.rps)} req/s`,
      verdict(bt.rps / sq.rps >= 3),
    ]);
  const [bs, as] = pr("bridge-send", "anchor-jsonrpc-send");
  if (bs?.rps && as?.rps)
    targets.push([
      "Bridge SendMessage, Message replies: >= 1x the in-memory SDK (req/s), CPU/request <= its",
      `${ratio(bs.rps / as.rps)} req/s, CPU ${ratio(bs.cpuMsPerRequest / as.cpuMsPerRequest)} (JS thread ${ratio(bs.mainMsPerRequest / as.mainMsPerRequest)})`,
      verdict(bs.rps / as.rps >= 1 && bs.cpuMsPerRequest <= as.cpuMsPerRequest),
    ]);
  const [bp, ap] = pr("bridge-send-pg", "anchor-pg-send");
  if (bp?.rps && ap?.rps)
    targets.push([
      "PostgreSQL: replica + database CPU per send <= the SDK's PostgreSQL store's",
      `${ms(totalCpu(bp))} vs ${ms(totalCpu(ap))} ms (${ratio(totalCpu(bp) / totalCpu(ap))})`,
      verdict(totalCpu(bp) <= totalCpu(ap)),
    ]);
  const [gs, cf] = pr("grpc-send", "connect-floor-grpc-send");
  if (gs?.rps && cf?.rps)
    targets.push([
      "gRPC SendMessage: server CPU <= 1.3x the connect-node floor row",
      `${ratio(gs.cpuMsPerRequest / cf.cpuMsPerRequest)} (JS thread ${ratio(gs.mainMsPerRequest / cf.mainMsPerRequest)})`,
      verdict(gs.cpuMsPerRequest / cf.cpuMsPerRequest <= 1.3),
    ]);
  const [ps, pa] = pr("bridge-stream", "anchor-jsonrpc-stream");
  if (ps?.rps && pa?.rps)
    targets.push([
      "Streams (JSON-RPC): >= 2x the in-memory SDK's streams/s",
      `${ratio(ps.rps / pa.rps)} streams/s`,
      verdict(ps.rps / pa.rps >= 2),
    ]);

  if (scaling.history) {
    const h = scaling.history;
    out.push("");
    out.push("Scaling:");
    out.push(
      `- History build, thread of 100 000 vs 10 messages: the turn's history (the last ${h.readMessages100k} vs all ${h.readMessages10} messages) read from LevelDB ${us(h.read100kMs)} vs ${us(h.read10Ms)} ` +
        `(ratio ${ratio(h.read100kMs / h.read10Ms)}), from the tail cache ${us(h.cached100kMs)} vs ${us(h.cached10Ms)} ` +
        `(ratio ${ratio(h.cached100kMs / h.cached10Ms)}), the last ${h.sameMessages} messages of each from LevelDB ${us(h.same100kMs)} vs ${us(h.same10Ms)} ` +
        `(ratio ${ratio(h.same100kMs / h.same10Ms)}), each the mean of ${num(h.reads)} reads; whole gRPC SendMessage on that context ${ms(h.send100kMs)} vs ${ms(h.send10Ms)} ms ` +
        `(ratio ${ratio(h.send100kMs / h.send10Ms)}); server CPU per sequential send ${us(h.sendCpu100kMs)} vs ${us(h.sendCpu10Ms)} ` +
        `(ratio ${ratio(h.sendCpu100kMs / h.sendCpu10Ms)}); filling 100 000 messages through @parley/store took ${num(h.fill100kMs)} ms.`,
    );
    if (Number.isFinite(h.sendCpu100kMs))
      targets.push([
        "Flat cost: CPU per send on a 100 000-message thread within 1.2x of a 10-message one",
        `${us(h.sendCpu100kMs)} vs ${us(h.sendCpu10Ms)} (${ratio(h.sendCpu100kMs / h.sendCpu10Ms)})`,
        verdict(h.sendCpu100kMs / h.sendCpu10Ms <= 1.2),
      ]);
    targets.push([
      "History build time 100 000 vs 10 messages: <= 1.5",
      `read ${ratio(h.cached100kMs / h.cached10Ms)} cached, ${ratio(h.same100kMs / h.same10Ms)} from LevelDB (the same ${h.sameMessages} messages; ` +
        `the turn's ${h.readMessages100k} vs ${h.readMessages10}: ${ratio(h.read100kMs / h.read10Ms)}), send ${ratio(h.send100kMs / h.send10Ms)}`,
      verdict(
        h.cached100kMs / h.cached10Ms <= 1.5 && h.same100kMs / h.same10Ms <= 1.5 && h.send100kMs / h.send10Ms <= 1.5,
      ),
    ]);
  }
  if (scaling.growth) {
    for (const [name, blocks] of Object.entries(scaling.growth)) {
      if (!blocks.length) continue;
      out.push(
        `- CPU per send while the store fills, ${name}, blocks of ${blocks[0].requests} fresh-context sends after ${settings.growthWarmup} unmeasured: ` +
          `${blocks.map((b) => `${(b.cpuMsPerRequest * 1000).toFixed(0)} us`).join(", ")} ` +
          `(last/first ${ratio(blocks.at(-1).cpuMsPerRequest / blocks[0].cpuMsPerRequest)}).`,
      );
    }
    const parleyBlocks = scaling.growth["Parley bridge, task replies"];
    if (parleyBlocks?.length > 1)
      targets.push([
        "Flat cost: CPU per send of the last fill block within 1.2x of the first",
        ratio(parleyBlocks.at(-1).cpuMsPerRequest / parleyBlocks[0].cpuMsPerRequest),
        verdict(parleyBlocks.at(-1).cpuMsPerRequest / parleyBlocks[0].cpuMsPerRequest <= 1.2),
      ]);
  }
  if (scaling.flat) {
    const f = scaling.flat;
    out.push(
      `- Flat cost, Parley bridge with task replies, ${f.full.requests} fresh-context sends on an empty store vs after ` +
        `${num(f.threads)} stored threads (filled through @parley/store in ${num(f.fillMs / 1000)} s, ${mb(f.storeBytes)} on disk; ` +
        `the server idle again ${num((f.settleMs ?? 0) / 1000)} s after the fill, while LevelDB compacted it): ` +
        `in each side's second and third blocks (two servers, their blocks alternating) ${us(f.empty.cpuMsPerRequest)} vs ${us(f.full.cpuMsPerRequest)} of server CPU per send ` +
        `(ratio ${ratio(f.full.cpuMsPerRequest / f.empty.cpuMsPerRequest)}; the JavaScript thread ${us(f.empty.mainMsPerRequest)} vs ` +
        `${us(f.full.mainMsPerRequest)}, the other threads (LevelDB compaction, libuv pool, V8 workers) ` +
        `${us(f.empty.othersMsPerRequest)} vs ${us(f.full.othersMsPerRequest)}), ${num(f.empty.rps)} vs ${num(f.full.rps)} req/s; ` +
        `in the first blocks (the empty store's while V8 compiles the send path, the full store's with the seek ` +
        `compactions the fill left) ${us(f.emptyFirst.cpuMsPerRequest)} vs ${us(f.fullFirst.cpuMsPerRequest)} ` +
        `(ratio ${ratio(f.fullFirst.cpuMsPerRequest / f.emptyFirst.cpuMsPerRequest)}; the other threads ` +
        `${us(f.emptyFirst.othersMsPerRequest)} vs ${us(f.fullFirst.othersMsPerRequest)}).`,
    );
    targets.push([
      `Flat cost: CPU per send after ${num(f.threads)} stored threads within 1.2x of an empty store's` +
        (f.threads < 1_000_000 ? " (the target names 1 000 000: --flat-threads=1000000)" : ""),
      `${us(f.full.cpuMsPerRequest)} vs ${us(f.empty.cpuMsPerRequest)} (${ratio(f.full.cpuMsPerRequest / f.empty.cpuMsPerRequest)}), blocks 2-3 alternated` +
        `; first ${ratio(f.fullFirst.cpuMsPerRequest / f.emptyFirst.cpuMsPerRequest)}`,
      verdict(f.full.cpuMsPerRequest / f.empty.cpuMsPerRequest <= 1.2),
    ]);
  }
  if (scaling.idle) {
    const i = scaling.idle;
    out.push(
      `- ${i.created} idle conversations (one completed turn each): server RSS +${mb(i.rssGrowth)}, heap +${mb(i.heapGrowth)} after GC.`,
    );
  }
  if (scaling.appends) {
    out.push(
      `- Store appends (durable, LevelDB): ${num(scaling.appends.concurrent)}/s with 64 concurrent threads, ${num(scaling.appends.sequential)}/s one at a time.`,
    );
  }
  if (scaling.streams) {
    const { parley: p, anchor: a, bare: b } = scaling.streams;
    const line = (name, s) =>
      s.skipped
        ? `- ${name}: skipped (${s.skipped})`
        : `- ${name}: ${s.opened} streams open: RSS +${mb(s.rssGrowth)} (heap +${mb(s.heapGrowth)}); after they ended (${s.completed} completed, ${s.failed} failed) and GC: RSS ${s.rssAfter >= 0 ? "+" : ""}${mb(s.rssAfter)}, heap ${s.heapAfter >= 0 ? "+" : ""}${mb(s.heapAfter)} vs before.`;
    out.push(line("Parley bridge, 1 000 concurrent SSE streams", p));
    out.push(line("anchor JSON-RPC, 1 000 concurrent SSE streams", a));
    if (b) out.push(line("bare node:http, the same streams and nothing else held (the floor)", b));
    if (!p.skipped && !a.skipped) {
      const returned = p.heapAfter < Math.max(p.heapGrowth * 0.25, 4 * 1024 * 1024);
      // What the target leaves a server per stream above what Node itself holds for one (the bare server's growth).
      const floor =
        b && !b.skipped
          ? `; the floor ${ratio(b.rssGrowth / a.rssGrowth)}, so half the anchor's leaves ${kib((a.rssGrowth / 2 - b.rssGrowth) / a.opened)} of RSS per stream above it`
          : "";
      targets.push([
        "1 000 open streams: <= 1/2 the in-memory SDK's RSS growth, memory returned",
        `${ratio(p.rssGrowth / a.rssGrowth)} of anchor RSS growth; heap after end ${mb(p.heapAfter)}${floor}`,
        verdict(p.rssGrowth / a.rssGrowth <= 0.5 && returned),
      ]);
    }
  }
  if (targets.length) {
    const verdicts = table(["target", "measured", "verdict"], targets);
    out.push("", verdicts);
    summary.push("", "Targets:", "", verdicts);
  }
  out.push("");
  out.push(`Whole run: ${num(elapsedS)} s.`);
  process.stdout.write(`${out.join("\n")}\n`);
  return summary.join("\n");
}
