import { describe, expect, it } from "vitest";
import { StoreError, type ThreadKey } from "../src/index.js";
import { bytes, manualClock, openStore, text } from "./helpers.js";

const key: ThreadKey = { tenant: "acme", contextId: "ctx-1" };
const msg = (id: string, payload: Uint8Array = text(id)) => ({ messageId: id, provenance: "user" as const, payload });

describe("append and reads", () => {
  it("returns payload bytes exactly, including empty and binary payloads", async () => {
    const { store } = await openStore();
    const payloads = [new Uint8Array(0), bytes(0, 255, 0, 10, 13), new Uint8Array(70_000).map((_, i) => i % 251)];
    for (const [i, payload] of payloads.entries()) await store.append(key, msg(`m${i}`, payload));
    const stored = await store.tail(key, 3);
    expect(stored.map((m) => m.payload)).toEqual(payloads);
    for (const m of stored) expect(Object.getPrototypeOf(m.payload)).toBe(Uint8Array.prototype);
  });

  it("treats a true retry as a duplicate and writes nothing", async () => {
    const clock = manualClock();
    const { store } = await openStore({ now: clock.now });
    const original = await store.append(key, msg("m1", bytes(1, 2, 3)));
    clock.advance(100);
    const retry = await store.append(key, { messageId: "m1", provenance: "agent", payload: bytes(1, 2, 3) });
    expect(retry).toEqual({ duplicate: true, message: original.message });
    const meta = await store.getThread(key);
    expect(meta?.messageCount).toBe(1);
    expect(meta?.updatedAt).toBe(original.message.createdAt);
  });

  it("stores the same messageId with different bytes as a new message, and recognises retries of each", async () => {
    const { store } = await openStore();
    const a = await store.append(key, msg("m1", bytes(1)));
    const b = await store.append(key, msg("m1", bytes(2)));
    expect(b.duplicate).toBe(false);
    expect(b.message.sequence).toBe(2);
    expect((await store.append(key, msg("m1", bytes(1)))).message).toEqual(a.message);
    expect((await store.append(key, msg("m1", bytes(2)))).message).toEqual(b.message);
    expect((await store.getThread(key))?.messageCount).toBe(2);
  });

  it("does not treat the same messageId and bytes in another thread as a retry", async () => {
    const { store } = await openStore();
    await store.append(key, msg("m1"));
    const other = await store.append({ tenant: "acme", contextId: "ctx-2" }, msg("m1"));
    expect(other.duplicate).toBe(false);
  });

  it("serialises concurrent appends to one thread without gaps or repeats", async () => {
    const { store } = await openStore();
    const results = await Promise.all(Array.from({ length: 200 }, (_, i) => store.append(key, msg(`m${i}`))));
    expect(results.map((r) => r.message.sequence).sort((x, y) => x - y)).toEqual(
      Array.from({ length: 200 }, (_, i) => i + 1),
    );
    const meta = await store.getThread(key);
    expect(meta).toMatchObject({ messageCount: 200, lastSequence: 200 });
    const all = await store.readMessages(key, { order: "oldest-first", limit: 1000 });
    expect(all.messages.map((m) => m.sequence)).toEqual(Array.from({ length: 200 }, (_, i) => i + 1));
  });

  it("tails the newest messages oldest-first and handles short and unknown threads", async () => {
    const { store } = await openStore();
    for (let i = 1; i <= 30; i++) await store.append(key, msg(`m${i}`));
    expect((await store.tail(key, 3)).map((m) => m.messageId)).toEqual(["m28", "m29", "m30"]);
    expect((await store.tail(key, 100)).length).toBe(30);
    expect(await store.tail(key, 0)).toEqual([]);
    expect(await store.tail({ tenant: "acme", contextId: "nope" }, 5)).toEqual([]);
    expect(await store.getThread({ tenant: "acme", contextId: "nope" })).toBeUndefined();
  });

  it("pages backward and forward with cursors bound to the order", async () => {
    const { store } = await openStore();
    for (let i = 1; i <= 7; i++) await store.append(key, msg(`m${i}`));
    const collect = async (order: "newest-first" | "oldest-first") => {
      const seen: number[] = [];
      let cursor: string | undefined;
      do {
        const page = await store.readMessages(key, { order, limit: 3, ...(cursor ? { cursor } : {}) });
        expect(page.messages.length).toBeLessThanOrEqual(3);
        seen.push(...page.messages.map((m) => m.sequence));
        cursor = page.nextCursor;
      } while (cursor);
      return seen;
    };
    expect(await collect("newest-first")).toEqual([7, 6, 5, 4, 3, 2, 1]);
    expect(await collect("oldest-first")).toEqual([1, 2, 3, 4, 5, 6, 7]);

    const back = await store.readMessages(key, { order: "newest-first", limit: 2 });
    expect(back.nextCursor).toBeDefined();
    await expect(
      store.readMessages(key, { order: "oldest-first", limit: 2, cursor: back.nextCursor! }),
    ).rejects.toMatchObject({ code: "INVALID_CURSOR" });
    await expect(
      store.readMessages(
        { tenant: "acme", contextId: "other" },
        { order: "newest-first", limit: 2, cursor: back.nextCursor! },
      ),
    ).rejects.toMatchObject({ code: "INVALID_CURSOR" });
    for (const garbage of [
      "",
      "!!!",
      "AAAA",
      Buffer.from("hello world").toString("base64url"),
      `${back.nextCursor}x`,
    ]) {
      await expect(
        store.readMessages(key, { order: "newest-first", limit: 2, cursor: garbage }),
      ).rejects.toBeInstanceOf(StoreError);
      await expect(store.readMessages(key, { order: "newest-first", limit: 2, cursor: garbage })).rejects.toMatchObject(
        {
          code: "INVALID_CURSOR",
        },
      );
    }
  });

  it("lists a tenant's threads most recently updated first, paged, and only that tenant's", async () => {
    const clock = manualClock();
    const { store } = await openStore({ now: clock.now });
    for (let i = 0; i < 5; i++) {
      clock.advance(10);
      await store.append({ tenant: "acme", contextId: `c${i}` }, msg("x"));
    }
    await store.append({ tenant: "other", contextId: "c0" }, msg("x"));
    clock.advance(10);
    await store.append({ tenant: "acme", contextId: "c1" }, msg("y"));

    const first = await store.listThreads("acme", { limit: 2 });
    expect(first.threads.map((t) => t.contextId)).toEqual(["c1", "c4"]);
    const second = await store.listThreads("acme", { limit: 2, cursor: first.nextCursor! });
    expect(second.threads.map((t) => t.contextId)).toEqual(["c3", "c2"]);
    const third = await store.listThreads("acme", { limit: 2, cursor: second.nextCursor! });
    expect(third.threads.map((t) => t.contextId)).toEqual(["c0"]);
    expect(third.nextCursor).toBeUndefined();
    expect((await store.listThreads("other", { limit: 10 })).threads).toHaveLength(1);
    await expect(store.listThreads("other", { limit: 2, cursor: first.nextCursor! })).rejects.toMatchObject({
      code: "INVALID_CURSOR",
    });
  });
});

describe("retention", () => {
  it("deletes a thread, its messages and index entries; a new thread under the key starts afresh", async () => {
    const { store } = await openStore();
    for (let i = 0; i < 20; i++) await store.append(key, msg(`m${i}`));
    expect(await store.deleteThread(key)).toEqual({ deleted: true, messageCount: 20, tasks: 0, conversations: 0 });
    expect(await store.deleteThread(key)).toEqual({ deleted: false, messageCount: 0, tasks: 0, conversations: 0 });
    expect(await store.getThread(key)).toBeUndefined();
    expect(await store.tail(key, 5)).toEqual([]);
    expect((await store.listThreads("acme", { limit: 10 })).threads).toEqual([]);
    const again = await store.append(key, msg("m3"));
    expect(again).toMatchObject({ duplicate: false, message: { sequence: 1 } });
    expect(await store.tail(key, 50)).toEqual([again.message]);
  });

  it("sweeps threads not updated within the window and keeps the rest", async () => {
    const clock = manualClock();
    const { store } = await openStore({ now: clock.now });
    await store.append({ tenant: "a", contextId: "old-1" }, msg("x"));
    await store.append({ tenant: "b", contextId: "old-2" }, msg("x"));
    clock.advance(1000);
    await store.append({ tenant: "a", contextId: "fresh" }, msg("x"));
    await store.append({ tenant: "a", contextId: "refreshed" }, msg("x"));
    clock.advance(100);
    expect(await store.sweepThreads(1200)).toBe(0);
    await store.append({ tenant: "a", contextId: "refreshed" }, msg("y"));
    clock.advance(1150);
    expect(await store.sweepThreads(1200)).toBe(3);
    expect((await store.listThreads("a", { limit: 10 })).threads.map((t) => t.contextId)).toEqual(["refreshed"]);
    expect(await store.listThreads("b", { limit: 10 })).toEqual({ threads: [] });
    expect(await store.tail({ tenant: "a", contextId: "fresh" }, 5)).toEqual([]);
  });

  // Appends leave the sweep index where the thread was created; sweeps move what they find too early.
  it("sweeps a thread whose entry an earlier sweep moved, and a thread re-created after a delete only once it is old", async () => {
    const clock = manualClock();
    const { store } = await openStore({ now: clock.now });
    const busy = { tenant: "a", contextId: "busy" };
    const reborn = { tenant: "a", contextId: "reborn" };
    await store.append(busy, msg("1"));
    await store.append(reborn, msg("1"));
    clock.advance(1000);
    await store.deleteThread(reborn);
    await store.append(reborn, msg("2"));
    await store.append(busy, msg("2"));
    clock.advance(500);
    // Both entries from t=0 are older than the cutoff (t=300), both threads are newer: nothing is deleted.
    expect(await store.sweepThreads(1200)).toBe(0);
    expect((await store.listThreads("a", { limit: 10 })).threads.map((t) => t.contextId).sort()).toEqual([
      "busy",
      "reborn",
    ]);
    expect(await store.tail(reborn, 5)).toHaveLength(1);
    clock.advance(1000);
    // Now both were last updated at t=1000, before the cutoff (t=1300): each is found (at its moved or new entry).
    expect(await store.sweepThreads(1200)).toBe(2);
    expect(await store.listThreads("a", { limit: 10 })).toEqual({ threads: [] });
    expect(await store.sweepThreads(0)).toBe(0);
  });
});

describe("argument checks", () => {
  it("refuses bad limits and payloads with errors that name the argument", async () => {
    const { store } = await openStore();
    await expect(store.tail(key, -1)).rejects.toThrow(/count/);
    await expect(store.readMessages(key, { order: "newest-first", limit: 0 })).rejects.toThrow(/limit/);
    await expect(
      store.append(key, { messageId: "m", provenance: "user", payload: "text" as unknown as Uint8Array }),
    ).rejects.toThrow(/payload/);
    await expect(
      store.append(key, { messageId: "m", provenance: "robot" as "user", payload: bytes() }),
    ).rejects.toThrow(/provenance/);
  });
});
