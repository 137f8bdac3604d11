import { readdir } from "node:fs/promises";
import { describe, expect, it } from "vitest";
import { createLevelThreadStore } from "../src/backends.js";
import { DEFAULT_WRITE_BUFFER_BYTES, MAX_WRITE_BUFFER_BYTES, MIN_WRITE_BUFFER_BYTES } from "../src/index.js";
import { tempDir, text } from "./helpers.js";

const key = { tenant: "t", contextId: "c" };
/** About 6 MiB of messages: more than LevelDB's own 4 MiB default holds, far less than ours. */
const inputs = Array.from({ length: 6_000 }, (_, i) => ({
  messageId: `m${i}`,
  provenance: "user" as const,
  payload: text(`${i} ${"x".repeat(1_000)}`),
}));

/** The table files LevelDB has written: each full write buffer becomes one. */
async function tableFiles(dir: string): Promise<number> {
  return (await readdir(dir)).filter((name) => name.endsWith(".ldb")).length;
}

/** Writes `inputs`, closes (LevelDB waits for its background flushes), counts the tables, reopens and reads back. */
async function writeAndReopen(dir: string, writeBufferBytes?: number) {
  const options = { path: dir, ...(writeBufferBytes === undefined ? {} : { writeBufferBytes }) };
  const store = await createLevelThreadStore(options);
  for (let i = 0; i < inputs.length; i += 500) await store.importMessages(key, inputs.slice(i, i + 500));
  await store.close();
  const tables = await tableFiles(dir);
  const reopened = await createLevelThreadStore(options);
  try {
    const meta = await reopened.getThread(key);
    const tail = await reopened.tail(key, 1);
    return { tables, messageCount: meta?.messageCount, lastId: tail.at(-1)?.messageId };
  } finally {
    await reopened.close();
  }
}

describe("LevelDB write buffer", () => {
  it("keeps 6 MiB of writes in memory by default, where 1 MiB and LevelDB's own 4 MiB write tables, and loses nothing in any", async () => {
    expect(DEFAULT_WRITE_BUFFER_BYTES).toBe(32 * 1024 * 1024);
    const small = await writeAndReopen(await tempDir(), MIN_WRITE_BUFFER_BYTES);
    const levelDbDefault = await writeAndReopen(await tempDir(), 4 * 1024 * 1024);
    const byDefault = await writeAndReopen(await tempDir());
    expect(small.tables).toBeGreaterThan(0);
    expect(levelDbDefault.tables).toBeGreaterThan(0);
    expect(byDefault.tables).toBe(0);
    for (const outcome of [small, levelDbDefault, byDefault]) {
      expect(outcome.messageCount).toBe(inputs.length);
      expect(outcome.lastId).toBe(`m${inputs.length - 1}`);
    }
  });

  it("refuses a size out of range or not whole, naming the option, before it claims the directory", async () => {
    const dir = await tempDir();
    for (const writeBufferBytes of [
      0,
      MIN_WRITE_BUFFER_BYTES - 1,
      MAX_WRITE_BUFFER_BYTES + 1,
      MIN_WRITE_BUFFER_BYTES + 0.5,
    ]) {
      await expect(createLevelThreadStore({ path: dir, writeBufferBytes })).rejects.toThrow(
        new RegExp(`writeBufferBytes must be a whole number of bytes from .*, got ${writeBufferBytes}`),
      );
    }
    // Nothing was claimed: the directory opens.
    const store = await createLevelThreadStore({ path: dir, writeBufferBytes: MIN_WRITE_BUFFER_BYTES });
    await store.close();
  });
});
