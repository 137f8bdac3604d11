import { describe, expect, it } from "vitest";
import type { ThreadKey } from "../src/index.js";
import { RecentTails } from "../src/level/recent-tails.js";
import { openStore, text } from "./helpers.js";

const stored = (sequence: number, size = 10) => ({
  sequence,
  messageId: `m${sequence}`,
  provenance: "user" as const,
  payload: new Uint8Array(size),
  createdAt: 0,
});

describe("RecentTails", () => {
  it("serves a tail only while it ends at the thread's last sequence", () => {
    const tails = new RecentTails(8, 1_000);
    tails.put("t", [stored(1), stored(2), stored(3)]);
    expect(tails.get("t", 3, 2)?.map((m) => m.sequence)).toEqual([2, 3]);
    // Someone else appended: the tail is stale, dropped, and misses from then on.
    expect(tails.get("t", 4, 2)).toBeUndefined();
    expect(tails.get("t", 3, 2)).toBeUndefined();
  });

  it("answers a longer request only when it holds the whole thread", () => {
    const tails = new RecentTails(8, 1_000);
    tails.put("whole", [stored(1), stored(2)]);
    expect(tails.get("whole", 2, 20)?.length).toBe(2);
    tails.put("part", [stored(5), stored(6)]);
    expect(tails.get("part", 6, 3)).toBeUndefined();
  });

  it("extends a tail on append only after the sequence it ends at, and keeps the newest per thread", () => {
    const tails = new RecentTails(3, 1_000);
    tails.put("t", [stored(1), stored(2), stored(3)]);
    tails.appended("t", 3, stored(4));
    expect(tails.get("t", 4, 10)).toBeUndefined(); // holds 2..4, not the whole thread
    expect(tails.get("t", 4, 3)?.map((m) => m.sequence)).toEqual([2, 3, 4]);
    tails.appended("t", 9, stored(10));
    expect(tails.get("t", 10, 1)).toBeUndefined();
  });

  it("stays within its byte budget, evicting the least recently used threads", () => {
    const tails = new RecentTails(8, 100);
    tails.put("a", [stored(1, 40)]);
    tails.put("b", [stored(1, 40)]);
    expect(tails.get("a", 1, 1)).toBeDefined();
    tails.put("c", [stored(1, 40)]);
    expect(tails.get("b", 1, 1)).toBeUndefined();
    expect(tails.get("a", 1, 1)).toBeDefined();
    // Two generations of half the budget each: a tail of more than half of it is not kept.
    tails.put("big", [stored(1, 51)]);
    expect(tails.get("big", 1, 1)).toBeUndefined();
    expect(tails.get("a", 1, 1)).toBeDefined();
  });
});

describe("the LevelDB store's cached tails", () => {
  const key: ThreadKey = { tenant: "acme", contextId: "tail-ctx" };
  const append = (store: Awaited<ReturnType<typeof openStore>>["store"], id: string) =>
    store.append(key, { messageId: id, provenance: "user", payload: text(id) });
  const ids = async (store: Awaited<ReturnType<typeof openStore>>["store"], count: number) =>
    (await store.tail(key, count)).map((m) => m.messageId);

  it("match the database across appends, a delete, an import and a reopen", async () => {
    const { store, dir } = await openStore();
    for (const id of ["a", "b", "c"]) await append(store, id);
    expect(await ids(store, 2)).toEqual(["b", "c"]);
    await append(store, "d");
    expect(await ids(store, 3)).toEqual(["b", "c", "d"]);
    expect(await ids(store, 100)).toEqual(["a", "b", "c", "d"]);

    // A deleted thread's history never comes back, even when the thread is recreated to the same length.
    await store.deleteThread(key);
    expect(await ids(store, 10)).toEqual([]);
    for (const id of ["w", "x", "y", "z"]) await append(store, id);
    expect(await ids(store, 10)).toEqual(["w", "x", "y", "z"]);

    await store.importMessages(key, [{ messageId: "i1", provenance: "agent", payload: text("i1") }]);
    expect(await ids(store, 2)).toEqual(["z", "i1"]);

    await store.close();
    const reopened = await openStore({ path: dir });
    expect(await ids(reopened.store, 2)).toEqual(["z", "i1"]);
  });
});
