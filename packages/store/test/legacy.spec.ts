import { Level } from "level";
import { describe, expect, it } from "vitest";
import { createLevelThreadStore } from "../src/backends.js";
import { threadDigest } from "../src/index.js";
import { manualClock, tempDir, text, unsealStore } from "./helpers.js";

const enc = (s: string) => new TextEncoder().encode(s);
const cat = (...parts: Uint8Array[]) => Buffer.concat(parts);

describe("legacy and foreign keys", () => {
  it("never loads or lists keys outside the v1 namespace or v1 records without a valid meta", async () => {
    const dir = await tempDir();
    const tenant = "t";
    const planted = { tenant, contextId: "tenant/a" };
    const orphan = { tenant, contextId: "orphan" };
    const digest = threadDigest(planted.tenant, planted.contextId);
    const orphanDigest = Buffer.from(threadDigest(orphan.tenant, orphan.contextId), "hex");

    const raw = new Level<Uint8Array, Uint8Array>(dir, { keyEncoding: "view", valueEncoding: "view" });
    await raw.open();
    const legacyLine = enc(JSON.stringify({ ts: 1, role: "user", text: "leak", task_id: "" }));
    await raw.batch([
      // Hermes-style sanitised names ("tenant/a" -> "tenanta").
      { type: "put", key: enc("tenanta"), value: legacyLine },
      { type: "put", key: enc("tenanta.jsonl"), value: legacyLine },
      // The right digest, under other version prefixes and none.
      { type: "put", key: enc(digest), value: legacyLine },
      { type: "put", key: enc(`parley:v0:t:${digest}`), value: legacyLine },
      { type: "put", key: cat(enc("parley:v2:t:"), Buffer.from(digest, "hex")), value: legacyLine },
      { type: "put", key: cat(enc("parley:v2:m:"), Buffer.from(digest, "hex"), Buffer.alloc(8, 0)), value: legacyLine },
      // v1 messages and a v1 listing entry for a thread that has no meta.
      ...[1, 2, 3].map((seq) => {
        const k = Buffer.alloc(8);
        k.writeBigUInt64BE(BigInt(seq));
        return { type: "put" as const, key: cat(enc("parley:v1:m:"), orphanDigest, k), value: legacyLine };
      }),
      {
        type: "put",
        key: cat(enc("parley:v1:l:"), Buffer.alloc(32, 7), Buffer.alloc(8, 0), orphanDigest),
        value: new Uint8Array(0),
      },
    ]);
    await raw.close();

    const store = await createLevelThreadStore({ path: dir });
    try {
      for (const key of [planted, orphan, { tenant, contextId: "tenanta" }]) {
        expect(await store.getThread(key)).toBeUndefined();
        expect(await store.tail(key, 10)).toEqual([]);
        expect(await store.readMessages(key, { order: "oldest-first", limit: 10 })).toEqual({ messages: [] });
      }
      expect(await store.listThreads(tenant, { limit: 100 })).toEqual({ threads: [] });

      // A real thread under the planted key starts at sequence 1 and sees none of the legacy data.
      const appended = await store.append(planted, { messageId: "m", provenance: "user", payload: text("mine") });
      expect(appended.message.sequence).toBe(1);
      expect(await store.tail(planted, 10)).toEqual([appended.message]);
      expect((await store.listThreads(tenant, { limit: 100 })).threads.map((t) => t.contextId)).toEqual(["tenant/a"]);
      // The orphan's v1 messages stay invisible even after its thread comes into existence.
      const first = await store.append(orphan, { messageId: "m", provenance: "user", payload: text("fresh") });
      expect(await store.tail(orphan, 10)).toEqual([first.message]);
    } finally {
      await store.close();
    }
  });

  it("reads, lists, appends to and deletes a thread whose meta record is version 1 (its listing entry at updatedAt)", async () => {
    const dir = await tempDir();
    const clock = manualClock();
    const key = { tenant: "t", contextId: "old" };
    const th = Buffer.from(threadDigest(key.tenant, key.contextId), "hex");
    const metaKey = cat(enc("parley:v1:t:"), th);
    const listingKeys = async (db: Level<Uint8Array, Uint8Array>) =>
      (await db.keys({ gte: enc("parley:v1:l:"), lt: enc("parley:v1:l;") }).all()).length;
    {
      const store = await createLevelThreadStore({ path: dir, now: clock.now });
      await store.append(key, { messageId: "a", provenance: "user", payload: text("a") });
      await store.close();
    }
    // What an older build wrote: version 1, no listedAt between lastSequence and the ids, no checksum envelope.
    await unsealStore(dir);
    const raw = new Level<Uint8Array, Uint8Array>(dir, { keyEncoding: "view", valueEncoding: "view" });
    await raw.open();
    const v2 = (await raw.get(metaKey))!;
    expect(v2[0]).toBe(2);
    await raw.put(metaKey, cat(Uint8Array.of(1), v2.subarray(1, 33), v2.subarray(41)));
    await raw.close();

    let store = await createLevelThreadStore({ path: dir, now: clock.now });
    const meta = { ...key, createdAt: clock.now(), updatedAt: clock.now(), messageCount: 1, lastSequence: 1 };
    expect(await store.getThread(key)).toEqual(meta);
    expect(await store.listThreads("t", { limit: 10 })).toEqual({ threads: [meta] });
    clock.advance(5);
    await store.append(key, { messageId: "b", provenance: "agent", payload: text("b") });
    clock.advance(1000);
    await store.append({ tenant: "t", contextId: "new" }, { messageId: "c", provenance: "user", payload: text("c") });
    await store.append(key, { messageId: "d", provenance: "user", payload: text("d") });
    const listed = await store.listThreads("t", { limit: 10 });
    expect(listed.threads.map((t) => [t.contextId, t.messageCount])).toEqual([
      ["old", 3],
      ["new", 1],
    ]);
    expect(await store.deleteThread(key)).toEqual({ deleted: true, messageCount: 3, tasks: 0, conversations: 0 });
    await store.close();
    const after = new Level<Uint8Array, Uint8Array>(dir, { keyEncoding: "view", valueEncoding: "view" });
    await after.open();
    // Only the other thread's entry is left: each move and the delete found the entry where the meta said it was.
    expect(await listingKeys(after)).toBe(1);
    await after.close();
    store = await createLevelThreadStore({ path: dir, now: clock.now });
    expect((await store.listThreads("t", { limit: 10 })).threads.map((t) => t.contextId)).toEqual(["new"]);
    await store.close();
  });
});
