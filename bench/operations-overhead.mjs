// What metrics, request logs and the observing interceptor cost per request, measured in one
// process: the same sends through the in-process transport (no network, so the difference is as
// large a share as it can be) with the operations defaults on, and with metrics and request logs
// off. `--base DIR` adds the build of another checkout (for example main's) as the anchor.
//   node bench/operations-overhead.mjs [--base /path/to/checkout] [--requests 2000] [--rounds 5]
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { parseArgs } from "node:util";

const { values } = parseArgs({
  options: { base: { type: "string" }, requests: { type: "string" }, rounds: { type: "string" } },
});
const requests = Number(values.requests ?? 2000);
const rounds = Number(values.rounds ?? 5);
const here = resolve(new URL("..", import.meta.url).pathname);

async function load(root) {
  const url = (p) => pathToFileURL(join(root, p)).href;
  const server = await import(url("packages/server/dist/index.js"));
  const proto = await import(url("proto/dist/index.js"));
  const connect = await import(url("node_modules/@connectrpc/connect/dist/esm/index.js"));
  const { pino } = await import(url("node_modules/pino/pino.js"));
  return { server, proto, connect, pino };
}

async function variant(name, root, operations) {
  const m = await load(root);
  const dataDir = mkdtempSync(join(tmpdir(), "parley-ops-bench-"));
  const config = m.server.loadConfig({
    argv: ["--port", "0", "--data-dir", dataDir],
    env: { PARLEY_RATE_LIMIT: "0", PARLEY_ECHO_REPLY: "auto", PARLEY_ECHO_INPUT: "text" },
  });
  // Request lines are really written (at info), to /dev/null, as a server logging to a pipe would.
  const logger = m.pino({ level: "info" }, m.pino.destination({ dest: "/dev/null", sync: false }));
  const parley = await m.server.createParley(config, { logger, ...(operations ? { operations } : {}) });
  const client = m.connect.createClient(m.proto.A2AService, parley.inProcessTransport());
  const send = (i) =>
    client.sendMessage(
      {
        message: {
          messageId: `m-${i}-${Math.random()}`,
          contextId: `c-${i}-${Math.random()}`,
          role: 1,
          parts: [{ content: { case: "text", value: "x".repeat(100) } }],
        },
      },
      { headers: { "a2a-version": "1.0" } },
    );
  return {
    name,
    async run(count) {
      let next = 0;
      const worker = async () => {
        while (next < count) await send(next++);
      };
      const cpu = process.cpuUsage();
      await Promise.all(Array.from({ length: 16 }, worker));
      const used = process.cpuUsage(cpu);
      return (used.user + used.system) / 1000 / count;
    },
    async close() {
      await parley.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

const variants = [
  ...(values.base ? [await variant(`base build (${values.base})`, resolve(values.base), undefined)] : []),
  await variant("operations off (metrics, request log)", here, { metrics: false, requestLog: false }),
  await variant("operations on (defaults)", here, {}),
];
for (const v of variants) await v.run(Math.min(500, requests));
const samples = new Map(variants.map((v) => [v.name, []]));
// Alternating the variants spreads drift (GC, LevelDB compaction, other load) over all of them.
for (let r = 0; r < rounds; r++) for (const v of variants) samples.get(v.name).push(await v.run(requests));
for (const v of variants) await v.close();
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const anchor = median(samples.get(variants[0].name));
console.log(`| variant | CPU ms/req (median of ${rounds} x ${requests}) | vs ${variants[0].name} |`);
console.log("|---|---|---|");
for (const v of variants) {
  const m = median(samples.get(v.name));
  console.log(`| ${v.name} | ${m.toFixed(3)} | ${(m / anchor).toFixed(2)}x |`);
}
