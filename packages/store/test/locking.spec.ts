import { symlink } from "node:fs/promises";
import { basename, join } from "node:path";
import { describe, expect, it } from "vitest";
import { createLevelThreadStore } from "../src/backends.js";
import { StoreError } from "../src/index.js";
import { spawnFixture } from "./child.js";
import { openStore, tempDir, text } from "./helpers.js";

const key = { tenant: "t", contextId: "c" };

describe("one owner per database", () => {
  it("refuses a database held by another process with LOCKED naming the path", async () => {
    const dir = await tempDir();
    const holder = spawnFixture("hold-db.mjs", [dir]);
    try {
      await holder.waitFor((lines) => lines.includes("ready"));
      const err = await createLevelThreadStore({ path: dir }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(StoreError);
      expect((err as StoreError).code).toBe("LOCKED");
      expect((err as StoreError).message).toContain(basename(dir));
      // The refused attempt released its claim: once the holder is gone, this process can open it.
      holder.child.stdin!.end();
      expect((await holder.exited).code).toBe(0);
      const store = await createLevelThreadStore({ path: dir });
      await store.close();
    } finally {
      holder.child.kill("SIGKILL");
    }
  });

  it("refuses a second open of the same directory in-process, under any spelling, and keeps the first lock", async () => {
    const { store, dir } = await openStore();
    const parent = await tempDir();
    const link = join(parent, "link");
    await symlink(dir, link);
    for (const spelling of [dir, `${dir}/`, join(dir, "..", basename(dir)), link]) {
      await expect(createLevelThreadStore({ path: spelling })).rejects.toMatchObject({
        code: "LOCKED",
        message: expect.stringContaining("already open in this process"),
      });
    }
    // Had any of those attempts reached LevelDB, the first instance's OS lock would be gone and a child could open it.
    const probe = spawnFixture("try-open.mjs", [dir]);
    await probe.exited;
    expect(probe.lines[0]).toMatch(/^LOCKED .*locked by another process/);
    await store.append(key, { messageId: "m", provenance: "user", payload: text("still mine") });
    expect((await store.tail(key, 1))[0]?.payload).toEqual(text("still mine"));
  });

  it("releases the directory on close, and rejects later calls with CLOSED", async () => {
    const dir = await tempDir();
    const store = await createLevelThreadStore({ path: dir });
    const pending = store.append(key, { messageId: "m", provenance: "user", payload: text("flushed") });
    await store.close();
    // Operations accepted before close() complete before the database is released.
    expect((await pending).duplicate).toBe(false);
    await store.close();
    for (const call of [
      () => store.append(key, { messageId: "n", provenance: "user", payload: text("x") }),
      () => store.tail(key, 1),
      () => store.getThread(key),
      () => store.listThreads("t", { limit: 1 }),
      () => store.listUnfinishedTasks(),
      () => store.getPushConfig("t", "task", "cfg"),
    ]) {
      await expect(call()).rejects.toMatchObject({ name: "StoreError", code: "CLOSED" });
    }
    const reopened = await createLevelThreadStore({ path: dir });
    try {
      expect((await reopened.tail(key, 5)).map((m) => m.payload)).toEqual([text("flushed")]);
    } finally {
      await reopened.close();
    }
    const probe = spawnFixture("try-open.mjs", [dir]);
    await probe.exited;
    expect(probe.lines[0]).toBe("OPENED");
  });
});
