import { describe, expect, it } from "vitest";
import type { TaskEvent } from "../src/backends.js";
import { createStore, type ThreadKey } from "../src/index.js";
import { task, tempDir, text } from "./helpers.js";

// A run's last events ride in its final store write (WriteOptions.events) on LevelDB: one batch lands the
// reply, the task and the events, or nothing; the log then reads, follows and continues as after an append.

const key: ThreadKey = { tenant: "acme", contextId: "ctx" };
const event = (seq: number, final = false): TaskEvent => ({ seq, payload: text(`e${seq}`), final });
const reply = (messageId: string) => ({ messageId, provenance: "agent" as const, taskId: "t1", payload: text("hi") });

describe("LevelDB fenced writes that carry task events", () => {
  it("writes the events with the append in one batch, wakes followers, and survives a reopen", async () => {
    const dir = await tempDir();
    const backend = await createStore({ url: dir });
    expect(backend.store.writesEvents).toBe(true);
    const fence = (await backend.leases.tryAcquire(key, "t1", 30_000))!;
    await backend.events.append("acme", "t1", [event(1)], fence);
    const follower = (async () => {
      const got: number[] = [];
      for await (const e of backend.events.subscribe("acme", "t1", 0, new AbortController().signal)) got.push(e.seq);
      return got;
    })();
    const before = backend.kind === "level" ? backend.commitStats().batches : 0;
    await backend.store.append(key, reply("r1"), task("t1", { state: 3 }), {
      fence,
      events: [event(2), event(3, true)],
    });
    if (backend.kind === "level") expect(backend.commitStats().batches - before).toBe(1);
    expect(await follower).toEqual([1, 2, 3]);
    expect(await backend.events.latestRun("acme", "t1")).toEqual({ start: 3, ended: true });
    await backend.leases.release(fence);
    await backend.close();

    const second = await createStore({ url: dir });
    try {
      expect(await second.events.read("acme", "t1", 0, 10)).toEqual([event(1), event(2), event(3, true)]);
      expect((await second.store.getTask("acme", "t1"))?.state).toBe(3);
      expect((await second.store.tail(key, 1))[0]?.messageId).toBe("r1");
    } finally {
      await second.close();
    }
  });

  it("refuses events that do not follow the log, or a stale fence, and then writes nothing", async () => {
    const backend = await createStore({ url: await tempDir() });
    try {
      const fence = (await backend.leases.tryAcquire(key, "t1", 30_000))!;
      await backend.events.append("acme", "t1", [event(1)], fence);
      await expect(
        backend.store.putTask(task("t1", { state: 3 }), { fence, events: [event(3, true)] }),
      ).rejects.toMatchObject({ code: "CORRUPT" });
      expect(await backend.store.getTask("acme", "t1")).toBeUndefined();
      await expect(backend.store.putTask(task("t1"), { events: [event(2)] })).rejects.toThrow(/needs a fence/);
      await backend.leases.release(fence);
      await expect(
        backend.store.append(key, reply("r1"), task("t1", { state: 3 }), { fence, events: [event(2, true)] }),
      ).rejects.toMatchObject({ code: "FENCED" });
      expect(await backend.store.getThread(key)).toBeUndefined();
      expect(await backend.events.lastSeq("acme", "t1")).toBe(1);
      // The log goes on from where it was.
      const next = (await backend.leases.tryAcquire(key, "t1", 30_000))!;
      await backend.store.putTask(task("t1", { state: 3 }), { fence: next, events: [event(2, true)] });
      expect(await backend.events.read("acme", "t1", 0, 10)).toEqual([event(1), event(2, true)]);
      await backend.leases.release(next);
    } finally {
      await backend.close();
    }
  });
});
