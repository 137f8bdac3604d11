import { ClassicLevel } from "classic-level";
import { describe, expect, it } from "vitest";
import type { TaskEvent } from "../src/backends.js";
import { createStore, type StoreBackend, type ThreadKey } from "../src/index.js";
import { manualClock, readsDuring, tempDir, text, unsealStore } from "./helpers.js";

// The LevelDB backend's task event log is durable: what the contract suite checks in one process must also
// hold across a reopen of the directory, and the retention sweep drops only logs that ended long enough ago.

const key: ThreadKey = { tenant: "acme", contextId: "ctx-1" };
const event = (seq: number, final = false): TaskEvent => ({ seq, payload: text(`e${seq}`), final });
const seqs = (events: readonly TaskEvent[]) => events.map((e) => [e.seq, e.final]);

async function append(backend: StoreBackend, taskId: string, events: TaskEvent[]): Promise<void> {
  const fence = (await backend.leases.tryAcquire(key, taskId, 30_000))!;
  try {
    await backend.events.append("acme", taskId, events, fence);
  } finally {
    await backend.leases.release(fence);
  }
}

describe("LevelDB task event log", () => {
  it("appends a new task's first batch without reading the log once its caller said it starts empty", async () => {
    const backend = await createStore({ url: await tempDir() });
    try {
      const fence = (await backend.leases.tryAcquire(key, "new", 30_000))!;
      backend.events.startsEmpty("acme", "new");
      expect(await readsDuring(() => backend.events.append("acme", "new", [event(1)], fence))).toBe(0);
      // Without the word, the first append reads the head to check the log is empty (a read that can only miss).
      const other = (await backend.leases.tryAcquire({ tenant: "acme", contextId: "ctx-2" }, "unsaid", 30_000))!;
      expect(await readsDuring(() => backend.events.append("acme", "unsaid", [event(1)], other))).toBe(1);
      expect(await backend.events.lastSeq("acme", "new")).toBe(1);
    } finally {
      await backend.close();
    }
  });

  it("keeps events across a reopen of the directory, with the same seqs, and continues after them", async () => {
    const dir = await tempDir();
    const first = await createStore({ url: dir });
    await append(first, "t1", [event(1), event(2), event(3)]);
    await first.close();

    const second = await createStore({ url: dir });
    try {
      expect(await second.events.lastSeq("acme", "t1")).toBe(3);
      expect(seqs(await second.events.read("acme", "t1", 1, 10))).toEqual([
        [2, false],
        [3, false],
      ]);
      expect(await second.events.read("acme", "t1", 1, 10)).toEqual([event(2), event(3)]);
      // One appended batch is one record: reads start and stop inside it.
      expect(await second.events.read("acme", "t1", 0, 2)).toEqual([event(1), event(2)]);
      const follower = (async () => {
        const got: number[] = [];
        for await (const e of second.events.subscribe("acme", "t1", 2, new AbortController().signal)) got.push(e.seq);
        return got;
      })();
      await append(second, "t1", [event(4), event(5, true)]);
      expect(await follower).toEqual([3, 4, 5]);
      await expect(append(second, "t1", [event(5)])).rejects.toMatchObject({ code: "CORRUPT" });
    } finally {
      await second.close();
    }
  });

  it("sweeps a log only once its last run ended longer ago than the retention, and keeps a continued one", async () => {
    const clock = manualClock();
    const backend = await createStore({ url: await tempDir(), now: clock.now });
    try {
      await append(backend, "done", [event(1), event(2, true)]);
      // Ended a first run (INPUT_REQUIRED, say), then continued later: the earlier end must not sweep it.
      await append(backend, "continued", [event(1, true)]);
      await append(backend, "running", [event(1)]);
      clock.advance(60_000);
      await append(backend, "continued", [event(2), event(3, true)]);
      expect(await backend.events.sweep(120_000)).toBe(0);

      clock.advance(90_000);
      // "done" ended 150 s ago, "continued" 90 s ago, "running" never ended.
      expect(await backend.events.sweep(120_000)).toBe(1);
      expect(await backend.events.read("acme", "done", 0, 10)).toEqual([]);
      expect(await backend.events.lastSeq("acme", "done")).toBe(0);
      expect(seqs(await backend.events.read("acme", "continued", 0, 10))).toEqual([
        [1, true],
        [2, false],
        [3, true],
      ]);
      expect(await backend.events.lastSeq("acme", "running")).toBe(1);

      clock.advance(60_000);
      expect(await backend.events.sweep(120_000)).toBe(1);
      expect(await backend.events.read("acme", "continued", 0, 10)).toEqual([]);
      expect(await backend.events.lastSeq("acme", "running")).toBe(1);
    } finally {
      await backend.close();
    }
  });
  it("says where the latest run starts from the log's head, also for a head written before it kept that (version 1)", async () => {
    const dir = await tempDir();
    const first = await createStore({ url: dir });
    await append(first, "open", [event(1), event(2, true)]);
    await append(first, "open", [event(3)]);
    await append(first, "ended", [event(1), event(2, true)]);
    expect(await first.events.latestRun("acme", "open")).toEqual({ start: 2, ended: false });
    expect(await first.events.latestRun("acme", "ended")).toEqual({ start: 2, ended: true });
    await first.close();

    // Rewrite both heads the way the previous version wrote them: [1, lastSeq u64, ended u64], no runStart.
    await unsealStore(dir);
    const db = new ClassicLevel<Uint8Array, Uint8Array>(dir, { keyEncoding: "view", valueEncoding: "view" });
    let rewritten = 0;
    for await (const [k, v] of db.iterator()) {
      if (v.length === 25 && v[0] === 2) {
        const old = Uint8Array.from(v.subarray(0, 17));
        old[0] = 1;
        await db.put(k, old);
        rewritten++;
      }
    }
    await db.close();
    expect(rewritten).toBe(2);

    const second = await createStore({ url: dir });
    try {
      // The open run's start is read from its events; the ended run's is its last event.
      expect(await second.events.latestRun("acme", "open")).toEqual({ start: 2, ended: false });
      expect(await second.events.latestRun("acme", "ended")).toEqual({ start: 2, ended: true });
      // The next batches write the new head: the open run keeps its start until its final event.
      await append(second, "open", [event(4)]);
      await append(second, "ended", [event(3)]);
      expect(await second.events.latestRun("acme", "open")).toEqual({ start: 2, ended: false });
      expect(await second.events.latestRun("acme", "ended")).toEqual({ start: 2, ended: false });
      await append(second, "open", [event(5, true)]);
      expect(await second.events.latestRun("acme", "open")).toEqual({ start: 5, ended: true });
    } finally {
      await second.close();
    }
  });
});
