import { join } from "node:path";
import { Level } from "level";
import { afterEach, describe, expect, it } from "vitest";
import { encodeUtf8 } from "../src/core/bytes.js";
import { createBatchWriter } from "../src/level/level-batch-writer.js";
import { createLevelHealth } from "../src/level/level-health.js";
import type { BatchOp, Db } from "../src/level/level-keys.js";
import { tempDir } from "./helpers.js";

// The group commit under every LevelDB write: callers that arrive while a batch is being written share the
// next one, and each caller's ops land whole or not at all.

const bytes = (text: string) => encodeUtf8(text);
const put = (k: string, v: string): BatchOp => ({ type: "put", key: bytes(k), value: bytes(v) });
const del = (k: string): BatchOp => ({ type: "del", key: bytes(k) });

let db: Db | undefined;
afterEach(async () => {
  await db?.close();
  db = undefined;
});

async function openDb(): Promise<Db> {
  db = new Level<Uint8Array, Uint8Array>(join(await tempDir(), "db"), { keyEncoding: "view", valueEncoding: "view" });
  await db.open();
  return db;
}

const read = async (d: Db, k: string) => {
  const value = await d.get(bytes(k));
  return value === undefined ? undefined : Buffer.from(value).toString();
};

describe("LevelDB group commit (createBatchWriter)", () => {
  it("merges the writes that arrive during a batch into the next one, puts and deletes alike", async () => {
    const d = await openDb();
    const write = createBatchWriter(d, false, createLevelHealth());
    await write([put("gone", "x")]);
    // The first starts a batch at once; the next three wait for it and go together.
    await Promise.all([
      write([put("a", "1")]),
      write([put("b", "2")]),
      write([del("gone"), put("c", "3")]),
      write([put("a", "4")]),
    ]);
    expect(write.stats()).toEqual({ writes: 5, batches: 3, syncedBatches: 0 });
    expect(write.commits).toBe(3);
    expect(await read(d, "a")).toBe("4");
    expect(await read(d, "b")).toBe("2");
    expect(await read(d, "c")).toBe("3");
    expect(await read(d, "gone")).toBeUndefined();
  });

  it("counts synced batches when it writes with sync", async () => {
    const d = await openDb();
    const write = createBatchWriter(d, true, createLevelHealth());
    await Promise.all([write([put("a", "1")]), write([put("b", "2")])]);
    expect(write.stats()).toEqual({ writes: 2, batches: 2, syncedBatches: 2 });
    expect(await read(d, "b")).toBe("2");
  });

  it("fails every caller of a group with an invalid op, writes none of that group, and goes on", async () => {
    const d = await openDb();
    const write = createBatchWriter(d, false, createLevelHealth());
    const first = write([put("first", "1")]);
    const bad: BatchOp = { type: "put", key: bytes("bad"), value: undefined as unknown as Uint8Array };
    const grouped = [write([put("before", "2")]), write([bad]), write([put("after", "3")])];
    await first;
    const outcomes = await Promise.allSettled(grouped);
    expect(outcomes.map((o) => o.status)).toEqual(["rejected", "rejected", "rejected"]);
    expect((outcomes[1] as PromiseRejectedResult).reason).toMatchObject({ code: "LEVEL_INVALID_VALUE" });
    expect(await read(d, "before")).toBeUndefined();
    expect(await read(d, "after")).toBeUndefined();
    await write([put("later", "4")]);
    expect(await read(d, "first")).toBe("1");
    expect(await read(d, "later")).toBe("4");
    expect(write.stats()).toEqual({ writes: 5, batches: 2, syncedBatches: 0 });
  });
});
