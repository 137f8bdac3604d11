// Store benchmark: prints figures, asserts nothing. Run `npm run bench` (builds first).
// Uses a fresh LevelDB directory under the OS temp dir and removes it afterwards.
import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { createLevelThreadStore } from "../dist/backends.js";

const PAYLOAD_BYTES = 256;
// The bulk fills use small payloads: they set up thread sizes, they do not measure writes.
const FILL_PAYLOAD_BYTES = 32;
const payload = () => randomBytes(PAYLOAD_BYTES);
const fmt = (n, digits = 0) => n.toLocaleString("en-US", { maximumFractionDigits: digits });

function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

async function timeEach(runs, fn) {
  const samples = [];
  for (let i = 0; i < runs; i++) {
    const start = performance.now();
    await fn(i);
    samples.push(performance.now() - start);
  }
  return median(samples);
}

/** Runs `total` tasks with at most `width` in flight. */
async function pool(total, width, task) {
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < total) await task(next++);
    }),
  );
}

const dir = await mkdtemp(join(tmpdir(), "parley-store-bench-"));
const store = await createLevelThreadStore({ path: dir });
const started = performance.now();
try {
  console.log(`@parley/store bench (LevelDB, sync=false, ${PAYLOAD_BYTES}-byte payloads, node ${process.version})`);

  {
    const n = 2000;
    const key = { tenant: "bench", contextId: "single" };
    const start = performance.now();
    for (let i = 0; i < n; i++) await store.append(key, { messageId: `m${i}`, provenance: "user", payload: payload() });
    const secs = (performance.now() - start) / 1000;
    console.log(`append, awaited one by one:        ${fmt(n / secs)} appends/s (${n} appends)`);
  }

  {
    const n = 20_000;
    const threads = 200;
    const start = performance.now();
    await pool(n, 256, (i) =>
      store.append(
        { tenant: "bench", contextId: `concurrent-${i % threads}` },
        { messageId: `m${i}`, provenance: "user", payload: payload() },
      ),
    );
    const secs = (performance.now() - start) / 1000;
    console.log(`append, 256 in flight / ${threads} threads: ${fmt(n / secs)} appends/s (${n} appends)`);
  }

  const tails = [];
  for (const size of [10, 10_000, 1_000_000]) {
    const key = { tenant: "bench", contextId: `tail-${size}` };
    const fillStart = performance.now();
    const chunk = 10_000;
    for (let done = 0; done < size; done += chunk) {
      const count = Math.min(chunk, size - done);
      await store.importMessages(
        key,
        Array.from({ length: count }, (_, i) => ({
          messageId: `m${done + i}`,
          provenance: "agent",
          payload: randomBytes(FILL_PAYLOAD_BYTES),
        })),
      );
    }
    const fillSecs = (performance.now() - fillStart) / 1000;
    for (let i = 0; i < 50; i++) await store.tail(key, 20);
    const ms = await timeEach(2000, () => store.tail(key, 20));
    tails.push(ms);
    console.log(
      `tail(20) on ${fmt(size).padStart(9)} messages: median ${fmt(ms * 1000, 1)} µs (filled in ${fmt(fillSecs, 1)} s)`,
    );
  }
  console.log(`tail(20) ratio 1,000,000 / 10 messages: ${fmt(tails[2] / tails[0], 2)}x`);

  {
    const tenant = "many-threads";
    const n = 100_000;
    const fillStart = performance.now();
    await pool(n, 256, (i) =>
      store.append({ tenant, contextId: `thread-${i}` }, { messageId: "m", provenance: "user", payload: payload() }),
    );
    const fillSecs = (performance.now() - fillStart) / 1000;
    for (let i = 0; i < 20; i++) await store.listThreads(tenant, { limit: 20 });
    const ms = await timeEach(1000, () => store.listThreads(tenant, { limit: 20 }));
    let cursor;
    const pageMs = await timeEach(1000, async () => {
      const page = await store.listThreads(tenant, { limit: 20, ...(cursor ? { cursor } : {}) });
      cursor = page.nextCursor;
    });
    console.log(
      `listThreads(limit 20) with ${fmt(n)} threads: median ${fmt(ms * 1000, 1)} µs first page, ${fmt(pageMs * 1000, 1)} µs paging on (filled in ${fmt(fillSecs, 1)} s)`,
    );
  }
} finally {
  await store.close();
  await rm(dir, { recursive: true, force: true });
}
console.log(`total ${fmt((performance.now() - started) / 1000, 1)} s`);
