// The LevelDB store's own checks: the checksum envelope on every value, the background check after opening, and
// the commit count compared with the last clean close.
import { existsSync } from "node:fs";
import { join } from "node:path";
import { ClassicLevel } from "classic-level";
import { describe, expect, it } from "vitest";
import { createLevelThreadStore } from "../src/backends.js";
import { u64 } from "../src/core/bytes.js";
import { StoreError } from "../src/index.js";
import { COMMIT_KEY, T_MESSAGE } from "../src/level/level-keys.js";
import { DAMAGE_FILE } from "../src/level/level-open-check.js";
import { SEAL_TAG, sealValue, unsealValue } from "../src/level/level-seal.js";
import { tempDir, text, unsealStore } from "./helpers.js";

const key = { tenant: "t", contextId: "c" };

async function rawDb(dir: string) {
  const db = new ClassicLevel<Uint8Array, Uint8Array>(dir, { keyEncoding: "view", valueEncoding: "view" });
  await db.open();
  return db;
}

describe("the value envelope", () => {
  it("seals a record with its CRC-32 and returns it unchanged, refusing a changed byte", () => {
    const record = new TextEncoder().encode("hello, world");
    const sealed = sealValue(record);
    expect(sealed[0]).toBe(SEAL_TAG);
    expect(unsealValue(sealed, { strict: true })).toEqual(record);
    const changed = sealed.slice();
    changed[9]! ^= 1;
    expect(() => unsealValue(changed, { strict: true })).toThrow(/failed its checksum/);
    expect(sealValue(new Uint8Array(0))).toEqual(new Uint8Array(0));
  });

  it("reads a value from before the envelope as it is, unless the store says every value is sealed", () => {
    const legacy = Uint8Array.of(1, 2, 3);
    expect(unsealValue(legacy, { strict: false })).toBe(legacy);
    expect(() => unsealValue(legacy, { strict: true })).toThrow(
      expect.objectContaining({ code: "CORRUPT", message: expect.stringContaining("no checksum envelope") }),
    );
  });
});

describe("damage found in a LevelDB store", () => {
  it("a changed byte in a stored message: the read fails CORRUPT, the check names the thread, the next open refuses", async () => {
    const dir = await tempDir();
    let store = await createLevelThreadStore({ path: dir });
    await store.append(key, { messageId: "a", provenance: "user", payload: text("first message") });
    await store.append(key, { messageId: "b", provenance: "agent", payload: text("second message") });
    await store.close();

    const db = await rawDb(dir);
    const [[k, v]] = await db.iterator({ gte: T_MESSAGE, limit: 1 }).all();
    const changed = Uint8Array.from(v);
    changed[changed.length - 3]! ^= 0x20;
    await db.put(k, changed);
    await db.close();

    store = await createLevelThreadStore({ path: dir });
    const found = await store.checked();
    expect(found.join("\n")).toContain('thread "c" of tenant "t": 1 of its 2 stored messages are damaged');
    expect(store.health()).toMatchObject({ ok: false, condition: "damaged" });
    const read = await store.tail(key, 10).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(read).toBeInstanceOf(StoreError);
    expect((read as StoreError).code).toBe("CORRUPT");
    expect((read as StoreError).message).toContain("failed its checksum");
    await expect(store.append(key, { messageId: "c", provenance: "user", payload: text("x") })).rejects.toThrow(
      expect.objectContaining({ code: "UNAVAILABLE" }),
    );
    await store.close();
    expect(existsSync(join(dir, DAMAGE_FILE))).toBe(true);
    await expect(createLevelThreadStore({ path: dir })).rejects.toThrow(/was found damaged: .*failed its checksum/);
  });

  it("batches missing since the last clean close: the open refuses, naming how many", async () => {
    const dir = await tempDir();
    const store = await createLevelThreadStore({ path: dir });
    for (let i = 0; i < 5; i++) {
      await store.append(key, { messageId: `m${i}`, provenance: "user", payload: text(`turn ${i}`) });
    }
    await store.close();
    // What a log cut after the close leaves: the store's count (the marker and 5 appends: 6) is behind.
    const db = await rawDb(dir);
    await db.put(COMMIT_KEY, sealValue(u64(2)));
    await db.close();
    await expect(createLevelThreadStore({ path: dir })).rejects.toThrow(
      /4 of the 6 write batches the store held at its last clean close are missing/,
    );
  });

  it("a store from before the envelope opens and reads as before, and its new values are sealed", async () => {
    const dir = await tempDir();
    let store = await createLevelThreadStore({ path: dir });
    await store.append(key, { messageId: "a", provenance: "user", payload: text("old") });
    await store.close();
    await unsealStore(dir);
    store = await createLevelThreadStore({ path: dir });
    expect(await store.checked()).toEqual([]);
    await store.append(key, { messageId: "b", provenance: "user", payload: text("new") });
    expect((await store.tail(key, 10)).map((m) => new TextDecoder().decode(m.payload))).toEqual(["old", "new"]);
    expect(store.health()).toEqual({ ok: true });
    await store.close();
    const db = await rawDb(dir);
    const values = (await db.iterator({ gte: T_MESSAGE, limit: 2 }).all()).map(([, v]) => v[0]);
    await db.close();
    expect(values).toEqual([1, SEAL_TAG]);
  });
});
