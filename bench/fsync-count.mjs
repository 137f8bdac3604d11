#!/usr/bin/env node
// npm run bench:fsync [-- --sends=N]
// Counts the fsync/fdatasync system calls of a real parley-bridge (embedded server) per acknowledged SendMessage,
// with `strace -f -c`, for each durability mode at 1 and at 64 requests in flight: the synced mode's group commit
// shows as fewer fsyncs per send under concurrency. Needs strace (apt-get install strace). Counts, not timings.
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const sendsArg = process.argv.find((a) => a.startsWith("--sends="));
const SENDS = sendsArg ? Number(sendsArg.slice("--sends=".length)) : 400;
const bridgeBin = fileURLToPath(new URL("../apps/bridge/bin/parley-bridge.js", import.meta.url));

if (spawnSync("strace", ["-V"]).status !== 0) {
  process.stderr.write("bench:fsync needs strace on the PATH (apt-get install strace)\n");
  process.exit(2);
}

async function sendAll(url, count, concurrency) {
  let next = 0;
  let acked = 0;
  const one = async (i) => {
    const body = JSON.stringify({
      jsonrpc: "2.0",
      id: i,
      method: "SendMessage",
      params: {
        message: {
          messageId: `fsync-${i}`,
          contextId: `fsync-ctx-${i}`,
          role: "ROLE_USER",
          parts: [{ text: "hello" }],
        },
      },
    });
    const res = await fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json", "a2a-version": "1.0" },
      body,
      signal: AbortSignal.timeout(60_000),
    });
    const json = await res.json();
    if (!json.result) throw new Error(`send ${i} failed: ${JSON.stringify(json).slice(0, 300)}`);
    acked++;
  };
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < count) await one(next++);
    }),
  );
  return acked;
}

/** One bridge process under strace: a warm-up send, then `count` sends; the fsync calls of the whole process. */
async function run(durability, concurrency) {
  const dir = mkdtempSync(join(tmpdir(), "parley-fsync-"));
  const out = join(dir, "strace.txt");
  const child = spawn(
    "strace",
    [
      "-f",
      "-c",
      "-e",
      "trace=fsync,fdatasync",
      "-o",
      out,
      process.execPath,
      bridgeBin,
      "--port",
      "0",
      "--grpc-port",
      "0",
      "--data-dir",
      join(dir, "data"),
    ],
    {
      env: {
        PATH: process.env.PATH ?? "",
        PARLEY_DURABILITY: durability,
        PARLEY_ECHO_REPLY: "auto",
        PARLEY_RATE_LIMIT: "0",
        PARLEY_LOG_LEVEL: "warn",
        PARLEY_REQUEST_LOG: "off",
      },
      stdio: ["ignore", "pipe", "inherit"],
    },
  );
  const url = await new Promise((resolve, reject) => {
    let stdout = "";
    child.stdout.setEncoding("utf8").on("data", (chunk) => {
      stdout += chunk;
      const match = /JSON-RPC\s+(http:\/\/\S+)/.exec(stdout);
      if (match) resolve(match[1]);
    });
    child.once("exit", (code) => reject(new Error(`parley-bridge exited (${code}) before listening`)));
  });
  process.stderr.write(`    listening on ${url}\n`);
  const acked = await sendAll(url, count(concurrency), concurrency);
  process.stderr.write(`    ${acked} acknowledged\n`);
  const exited = new Promise((resolve) => child.once("exit", resolve));
  // SIGTERM to the traced bridge itself (strace's child): it drains and exits, then strace writes its summary.
  const bridgePid = Number(
    spawnSync("pgrep", ["-P", String(child.pid)], { encoding: "utf8" })
      .stdout.trim()
      .split("\n")[0],
  );
  process.kill(bridgePid, "SIGTERM");
  await exited;
  const summary = readFileSync(out, "utf8");
  rmSync(dir, { recursive: true, force: true });
  const calls = (name) =>
    Number(
      new RegExp(`^\\s*[\\d.]+\\s+[\\d.]+\\s+\\d+\\s+(\\d+)\\s+(?:\\d+\\s+)?${name}$`, "m").exec(summary)?.[1] ?? 0,
    );
  return { durability, concurrency, acked, fsyncs: calls("fsync") + calls("fdatasync") };
}
const count = () => SENDS;

const rows = [];
for (const [durability, concurrency] of [
  ["process-crash", 64],
  ["synced", 1],
  ["synced", 64],
]) {
  process.stderr.write(`  ${durability}, ${concurrency} in flight ...\n`);
  rows.push(await run(durability, concurrency));
}
process.stdout.write(
  `fsync + fdatasync calls of the whole parley-bridge process (strace -f -c), ${SENDS} acknowledged sends each, fresh contexts:\n`,
);
process.stdout.write(
  "| durability | in flight | sends acknowledged | fsync calls | per send |\n|---|---|---|---|---|\n",
);
for (const r of rows) {
  process.stdout.write(
    `| ${r.durability} | ${r.concurrency} | ${r.acked} | ${r.fsyncs} | ${(r.fsyncs / r.acked).toFixed(2)} |\n`,
  );
}
process.stdout.write(
  "The process-crash row's calls are LevelDB's own (manifest and table files at open, compaction), not per send.\n",
);
