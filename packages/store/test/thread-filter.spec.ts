// The LevelDB store's thread filter: a new conversation's append reads nothing once the stored threads are known,
// and no stored thread is ever missed (a retry is still a retry), before, during or after the scan at open.
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createLevelThreadStore } from "../src/backends.js";
import type { LevelThreadStore } from "../src/index.js";
import { readsDuring, tempDir, text } from "./helpers.js";

const input = (messageId: string) => ({
  messageId,
  provenance: "user" as const,
  payload: text(`body of ${messageId}`),
});

describe("the LevelDB store's thread filter", () => {
  let dir: string;
  let store: LevelThreadStore | undefined;
  beforeEach(async () => {
    dir = await tempDir();
  });
  afterEach(async () => {
    await store?.close();
    store = undefined;
  });

  it("lets a new conversation's first append skip the meta read once the stored threads are scanned", async () => {
    store = await createLevelThreadStore({ path: dir });
    expect(await store.threadsScanned()).toBe(true);
    const reads = await readsDuring(() => store!.append({ tenant: "t", contextId: "new" }, input("m1")));
    expect(reads).toBe(0);
    // An existing thread is still read (its meta is not cached after a reopen).
    await store.close();
    store = await createLevelThreadStore({ path: dir });
    await store.threadsScanned();
    const again = await readsDuring(() => store!.append({ tenant: "t", contextId: "new" }, input("m2")));
    expect(again).toBeGreaterThan(0);
  });

  it("finds every stored thread after a reopen: a retry of any of their messages is a duplicate", async () => {
    store = await createLevelThreadStore({ path: dir });
    for (let i = 0; i < 3_000; i++) await store.append({ tenant: "t", contextId: `c${i}` }, input(`m${i}`));
    await store.close();
    store = await createLevelThreadStore({ path: dir });
    // Right after the open, while the scan may still run, and after it.
    const early = await store.append({ tenant: "t", contextId: "c2999" }, input("m2999"));
    expect(early.duplicate).toBe(true);
    expect(await store.threadsScanned()).toBe(true);
    for (const i of [0, 1, 1_500, 2_998]) {
      const retry = await store.append({ tenant: "t", contextId: `c${i}` }, input(`m${i}`));
      expect(retry.duplicate, `c${i}`).toBe(true);
      expect(retry.message.sequence).toBe(1);
    }
  });

  it("finds a thread created while the scan runs", async () => {
    store = await createLevelThreadStore({ path: dir });
    await store.importMessages({ tenant: "t", contextId: "old" }, [input("o1")]);
    for (let i = 0; i < 2_000; i++) await store.importMessages({ tenant: "t", contextId: `f${i}` }, [input(`f${i}`)]);
    await store.close();
    store = await createLevelThreadStore({ path: dir });
    const created = await store.append({ tenant: "t", contextId: "during" }, input("d1"));
    expect(created.duplicate).toBe(false);
    expect(await store.threadsScanned()).toBe(true);
    // An import drops the thread's cached meta, so the appends below ask the filter, not the cache.
    await store.importMessages({ tenant: "t", contextId: "during" }, [input("d2")]);
    expect((await store.append({ tenant: "t", contextId: "during" }, input("d1"))).duplicate).toBe(true);
    expect((await store.append({ tenant: "t", contextId: "during" }, input("d3"))).message.sequence).toBe(3);
    expect((await store.append({ tenant: "t", contextId: "old" }, input("o1"))).duplicate).toBe(true);
  });

  it("knows a thread an append created after the scan, once its cached meta is gone", async () => {
    store = await createLevelThreadStore({ path: dir });
    expect(await store.threadsScanned()).toBe(true);
    const key = { tenant: "t", contextId: "late" };
    await store.append(key, input("l1"));
    // An import drops the thread's cached meta, so the next append asks the filter.
    await store.importMessages(key, [input("l2")]);
    const third = await store.append(key, input("l3"));
    expect(third.message.sequence).toBe(3);
    expect((await store.getThread(key))?.messageCount).toBe(3);
  });

  it("starts a deleted thread afresh", async () => {
    store = await createLevelThreadStore({ path: dir });
    await store.append({ tenant: "t", contextId: "gone" }, input("g1"));
    await store.deleteThread({ tenant: "t", contextId: "gone" });
    const fresh = await store.append({ tenant: "t", contextId: "gone" }, input("g1"));
    expect(fresh.duplicate).toBe(false);
    expect(fresh.message.sequence).toBe(1);
  });

  it("reports an incomplete scan when the store closes first", async () => {
    store = await createLevelThreadStore({ path: dir });
    for (let i = 0; i < 5_000; i++) await store.importMessages({ tenant: "t", contextId: `x${i}` }, [input(`x${i}`)]);
    await store.close();
    const reopened = await createLevelThreadStore({ path: dir });
    const scanned = reopened.threadsScanned();
    await reopened.close();
    // Either it finished before the close was asked for, or it stopped: it never hangs the close.
    expect(typeof (await scanned)).toBe("boolean");
    store = undefined;
  });
});
