const num = (x, digits = 0) => (Number.isFinite(x) ? x.toFixed(digits) : "-");
const ms = (x) => (Number.isFinite(x) ? (x < 10 ? x.toFixed(2) : x.toFixed(1)) : "-");
const mb = (bytes) => `${(bytes / 1024 / 1024).toFixed(1)} MB`;
const ratio = (x) => (Number.isFinite(x) ? `${x.toFixed(2)}x` : "-");

function table(header, lines) {
  const widths = header.map((h, i) => Math.max(h.length, ...lines.map((l) => String(l[i]).length)));
  const fmt = (cells) => `| ${cells.map((c, i) => String(c).padEnd(widths[i])).join(" | ")} |`;
  return [fmt(header), `|${widths.map((w) => "-".repeat(w + 2)).join("|")}|`, ...lines.map(fmt)].join("\n");
}

function verdict(ok) {
  return ok === undefined ? "n/a" : ok ? "met" : "NOT met";
}

export function printReport({ machine, settings, rows, scaling, elapsedS }) {
  const byId = new Map(rows.map((r) => [r.id, r]));
  const out = [];
  out.push(
    `Machine: ${machine.nproc} cores (nproc), ${machine.cpuModel}, Node ${machine.node}. ` +
      `${settings.concurrency} requests in flight, ${settings.warmupMs / 1000} s warm-up + ${settings.measureMs / 1000} s measured per row, ` +
      `best of ${settings.rounds} round${settings.rounds === 1 ? "" : "s"} (each on a fresh server process); ` +
      `Parley with durable history (LevelDB in a temp dir).`,
  );
  out.push("");
  const lines = rows.map((r) => {
    const op = `${r.spec.op === "send" ? "SendMessage" : "SendStreamingMessage"}${r.spec.contexts === "reused" ? " (reused ctx)" : ""}`;
    if (r.skipped) return [r.target, op, "skipped", "", "", "", "", "", "", "", "", "", r.skipped.slice(0, 60)];
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
      a ? ratio(r.rps / a.rps) : "",
      a ? ratio(r.p99 / a.p99) : "",
      a && stream ? ratio(r.firstP99 / a.firstP99) : "",
      a ? ratio(r.cpuMsPerRequest / a.cpuMsPerRequest) : "",
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
    "Ratios compare each Parley row with the anchor row of the same protocol and operation in this run (Connect rows with the anchor's gRPC).",
  );

  const targets = [];
  const pr = (id, anchorId) => [byId.get(id), byId.get(anchorId)];
  const [bs, as] = pr("bridge-send", "anchor-jsonrpc-send");
  if (bs?.rps && as?.rps)
    targets.push([
      "Bridge SendMessage: >= 2x anchor req/s, p99 <= anchor",
      `${ratio(bs.rps / as.rps)} req/s, p99 ${ratio(bs.p99 / as.p99)}`,
      verdict(bs.rps / as.rps >= 2 && bs.p99 <= as.p99),
    ]);
  const [gs, ags] = pr("grpc-send", "anchor-grpc-send");
  if (gs?.rps && ags?.rps)
    targets.push([
      "gRPC SendMessage: <= 1/3 anchor CPU/request",
      ratio(gs.cpuMsPerRequest / ags.cpuMsPerRequest),
      verdict(gs.cpuMsPerRequest / ags.cpuMsPerRequest <= 1 / 3),
    ]);
  for (const [id, anchorId, label] of [
    ["bridge-stream", "anchor-jsonrpc-stream", "JSON-RPC"],
    ["grpc-stream", "anchor-grpc-stream", "gRPC"],
  ]) {
    const [p, a] = pr(id, anchorId);
    if (p?.rps && a?.rps)
      targets.push([
        `Streams (${label}): >= 2x anchor streams/s, first-event p99 <= anchor`,
        `${ratio(p.rps / a.rps)} streams/s, first p99 ${ratio(p.firstP99 / a.firstP99)}`,
        verdict(p.rps / a.rps >= 2 && p.firstP99 <= a.firstP99),
      ]);
  }

  if (scaling.history) {
    const h = scaling.history;
    out.push("");
    out.push("Scaling:");
    out.push(
      `- History build, thread of 100 000 vs 10 messages: store read of the turn's history ${ms(h.read100kMs)} vs ${ms(h.read10Ms)} ms ` +
        `(ratio ${ratio(h.read100kMs / h.read10Ms)}); whole gRPC SendMessage on that context ${ms(h.send100kMs)} vs ${ms(h.send10Ms)} ms ` +
        `(ratio ${ratio(h.send100kMs / h.send10Ms)}); filling 100 000 messages through @parley/store took ${num(h.fill100kMs)} ms.`,
    );
    targets.push([
      "History build time 100 000 vs 10 messages: <= 1.5",
      `read ${ratio(h.read100kMs / h.read10Ms)}, send ${ratio(h.send100kMs / h.send10Ms)}`,
      verdict(h.read100kMs / h.read10Ms <= 1.5 && h.send100kMs / h.send10Ms <= 1.5),
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
    const { parley: p, anchor: a } = scaling.streams;
    const line = (name, s) =>
      s.skipped
        ? `- ${name}: skipped (${s.skipped})`
        : `- ${name}: ${s.opened} streams open: RSS +${mb(s.rssGrowth)} (heap +${mb(s.heapGrowth)}); after they ended (${s.completed} completed, ${s.failed} failed) and GC: RSS ${s.rssAfter >= 0 ? "+" : ""}${mb(s.rssAfter)}, heap ${s.heapAfter >= 0 ? "+" : ""}${mb(s.heapAfter)} vs before.`;
    out.push(line("Parley bridge, 1 000 concurrent SSE streams", p));
    out.push(line("anchor JSON-RPC, 1 000 concurrent SSE streams", a));
    if (!p.skipped && !a.skipped) {
      const returned = p.heapAfter < Math.max(p.heapGrowth * 0.25, 4 * 1024 * 1024);
      targets.push([
        "1 000 open streams: <= 1/2 anchor RSS growth, memory returned",
        `${ratio(p.rssGrowth / a.rssGrowth)} of anchor RSS growth; heap after end ${mb(p.heapAfter)}`,
        verdict(p.rssGrowth / a.rssGrowth <= 0.5 && returned),
      ]);
    }
  }
  if (targets.length) {
    out.push("");
    out.push(table(["target", "measured", "verdict"], targets));
  }
  out.push("");
  out.push(`Whole run: ${num(elapsedS)} s.`);
  process.stdout.write(`${out.join("\n")}\n`);
}
