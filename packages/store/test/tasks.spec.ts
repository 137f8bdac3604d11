import { describe, expect, it } from "vitest";
import { bytes, openStore, task, text } from "./helpers.js";

describe("tasks", () => {
  it("upserts, reads back byte-exact and moves index entries on update", async () => {
    const { store } = await openStore();
    await store.putTask(task("t1", { payload: bytes(0, 1, 2, 255) }));
    expect(await store.getTask("acme", "t1")).toEqual(task("t1", { payload: bytes(0, 1, 2, 255) }));
    expect(await store.getTask("other", "t1")).toBeUndefined();

    await store.putTask(task("t1", { state: 3, updatedAt: 2000, contextId: "ctx-b" }));
    const all = await store.listTasks("acme", { limit: 10 });
    expect(all.totalSize).toBe(1);
    expect(all.tasks.map((t) => [t.taskId, t.state, t.contextId])).toEqual([["t1", 3, "ctx-b"]]);
    expect((await store.listTasks("acme", { limit: 10, contextId: "ctx" })).totalSize).toBe(0);
    expect((await store.listTasks("acme", { limit: 10, contextId: "ctx-b" })).totalSize).toBe(1);
    expect((await store.listTasks("acme", { limit: 10, state: 2 })).totalSize).toBe(0);
    expect(await store.listUnfinishedTasks()).toEqual([]);
  });

  it("lists newest first with filters, paging and a total", async () => {
    const { store } = await openStore();
    for (let i = 0; i < 10; i++) {
      await store.putTask(
        task(`t${i}`, { updatedAt: 1000 + i * 10, state: i % 2 === 0 ? 2 : 3, contextId: i < 6 ? "ctx" : "ctx-2" }),
      );
    }
    await store.putTask(task("foreign", { tenant: "other", updatedAt: 5000 }));

    const ids = async (query: Parameters<typeof store.listTasks>[1]) => {
      const out: string[] = [];
      let total = -1;
      let cursor: string | undefined;
      do {
        const page = await store.listTasks("acme", { ...query, ...(cursor ? { cursor } : {}) });
        expect(page.tasks.length).toBeLessThanOrEqual(query.limit);
        if (total >= 0) expect(page.totalSize).toBe(total);
        total = page.totalSize;
        out.push(...page.tasks.map((t) => t.taskId));
        cursor = page.nextCursor;
      } while (cursor);
      expect(out.length).toBe(total);
      return out;
    };
    expect(await ids({ limit: 3 })).toEqual(["t9", "t8", "t7", "t6", "t5", "t4", "t3", "t2", "t1", "t0"]);
    expect(await ids({ limit: 2, state: 2 })).toEqual(["t8", "t6", "t4", "t2", "t0"]);
    expect(await ids({ limit: 2, contextId: "ctx-2" })).toEqual(["t9", "t8", "t7", "t6"]);
    expect(await ids({ limit: 2, updatedAfter: 1050 })).toEqual(["t9", "t8", "t7", "t6", "t5"]);
    expect(await ids({ limit: 4, updatedAfter: 1045, state: 3, contextId: "ctx" })).toEqual(["t5"]);

    const first = await store.listTasks("acme", { limit: 2, state: 2 });
    await expect(store.listTasks("acme", { limit: 2, state: 3, cursor: first.nextCursor! })).rejects.toMatchObject({
      code: "INVALID_CURSOR",
    });
    await expect(store.listTasks("acme", { limit: 2, cursor: "bm9wZQ" })).rejects.toMatchObject({
      code: "INVALID_CURSOR",
    });
  });

  it("orders tasks with equal updatedAt by taskId", async () => {
    const { store } = await openStore();
    for (const id of ["b", "a", "c"]) await store.putTask(task(id));
    expect((await store.listTasks("acme", { limit: 10 })).tasks.map((t) => t.taskId)).toEqual(["a", "b", "c"]);
  });

  it("tracks unfinished tasks across tenants", async () => {
    const { store } = await openStore();
    await store.putTask(task("w", { state: 2 }));
    await store.putTask(task("i", { state: 6, tenant: "other" }));
    await store.putTask(task("done", { state: 3 }));
    await store.putTask(task("rejected", { state: 7 }));
    const unfinished = async () => (await store.listUnfinishedTasks()).map((t) => `${t.tenant}/${t.taskId}`).sort();
    expect(await unfinished()).toEqual(["acme/w", "other/i"]);
    await store.putTask(task("w", { state: 4, updatedAt: 2000 }));
    await store.putTask(task("done", { state: 1, updatedAt: 2000 }));
    expect(await unfinished()).toEqual(["acme/done", "other/i"]);
  });

  it("upserts a task in the same batch as an append, and not on a retry", async () => {
    const { store } = await openStore();
    const key = { tenant: "acme", contextId: "ctx" };
    const input = { messageId: "m1", provenance: "user" as const, taskId: "t1", payload: text("hi") };
    await store.append(key, input, task("t1", { state: 1 }));
    expect((await store.getTask("acme", "t1"))?.state).toBe(1);
    const retry = await store.append(key, input, task("t1", { state: 2, updatedAt: 3000 }));
    expect(retry.duplicate).toBe(true);
    expect((await store.getTask("acme", "t1"))?.state).toBe(1);
    await expect(
      store.append(key, { ...input, messageId: "m2" }, task("t1", { contextId: "elsewhere" })),
    ).rejects.toThrow(/contextId/);
    expect((await store.getThread(key))?.messageCount).toBe(1);
  });

  it("keeps a hidden task as one turn-in-flight record: unlisted, recovered, removed or revealed by its end", async () => {
    const { store, dir } = await openStore();
    const key = { tenant: "acme", contextId: "ctx" };
    const listed = async () => (await store.listTasks("acme", { limit: 10 })).tasks.map((t) => t.taskId);
    const unfinished = async () => (await store.listUnfinishedTasks()).map((t) => [t.taskId, t.state, t.hidden]);
    const input = (messageId: string, taskId: string) => ({
      messageId,
      provenance: "user" as const,
      taskId,
      payload: text(messageId),
    });
    // A turn that ends with a Message: hidden at the start, gone at its end.
    await store.append(key, input("m1", "t1"), task("t1", { state: 1, created: true, hidden: true }));
    expect(await store.getTask("acme", "t1")).toBeUndefined();
    expect(await listed()).toEqual([]);
    expect(await unfinished()).toEqual([["t1", 1, true]]);
    await store.append(key, { ...input("r1", "t1"), provenance: "agent" }, task("t1", { state: 3, hidden: true }));
    expect(await store.getTask("acme", "t1")).toBeUndefined();
    expect(await unfinished()).toEqual([]);
    // A turn that ends as a task: hidden at the start, a listed task from its end on.
    await store.append(key, input("m2", "t2"), task("t2", { state: 1, created: true, hidden: true }));
    await store.putTask(task("t2", { state: 6, updatedAt: 2000 }));
    expect((await store.getTask("acme", "t2"))?.state).toBe(6);
    expect(await listed()).toEqual(["t2"]);
    expect(await unfinished()).toEqual([["t2", 6, undefined]]);
    await store.putTask(task("t2", { state: 3, updatedAt: 3000, hidden: true }));
    expect((await store.getTask("acme", "t2"))?.state).toBe(3);
    expect(await unfinished()).toEqual([]);
    // A turn cut off while hidden is found after a restart, with its record, and nowhere else.
    await store.append(key, input("m3", "t3"), task("t3", { state: 2, created: true, hidden: true }));
    await store.close();
    const { store: reopened } = await openStore({ path: dir });
    const [cut] = await reopened.listUnfinishedTasks();
    // Its ids, state and time; the task itself (payload) is rebuilt by the engine from the thread.
    expect(cut).toEqual({ ...task("t3", { state: 2 }), payload: new Uint8Array(0), hidden: true });
    expect((await reopened.listTasks("acme", { limit: 10 })).tasks.map((t) => t.taskId)).toEqual(["t2"]);
    const { hidden: _, ...visible } = cut!;
    await reopened.putTask(visible);
    expect((await reopened.listUnfinishedTasks()).map((t) => [t.taskId, t.hidden])).toEqual([["t3", undefined]]);
    expect((await reopened.getTask("acme", "t3"))?.state).toBe(2);
  });

  it("never reads the payload of a hidden task, and reads it when a hidden write is stored whole", async () => {
    const { store } = await openStore();
    const key = { tenant: "acme", contextId: "ctx" };
    let reads = 0;
    const lazy = (record: ReturnType<typeof task>) =>
      Object.defineProperty({ ...record }, "payload", {
        enumerable: true,
        get: () => {
          reads++;
          return record.payload;
        },
      }) as typeof record;
    const user = { messageId: "m1", provenance: "user" as const, taskId: "t1", payload: text("m1") };
    // The turn's start keeps only the task's ids, state and time; its end (a Message) removes even that.
    await store.append(key, user, lazy(task("t1", { state: 1, created: true, hidden: true })));
    expect(reads).toBe(0);
    const reply = { ...user, messageId: "r1", provenance: "agent" as const, payload: text("r1") };
    await store.append(key, reply, lazy(task("t1", { state: 3, hidden: true })));
    expect(reads).toBe(0);
    expect(await store.listUnfinishedTasks()).toEqual([]);
    // A task made visible meanwhile stays visible: the hidden end is stored like any other write, payload and all.
    await store.putTask(task("t2", { state: 2, payload: bytes(1) }));
    await store.putTask(lazy(task("t2", { state: 3, hidden: true, payload: bytes(2) })));
    expect(reads).toBeGreaterThan(0);
    expect((await store.getTask("acme", "t2"))?.payload).toEqual(bytes(2));
    // Any other record is checked at once: a payload that is not bytes is refused before anything is written.
    await expect(store.putTask({ ...task("t3"), payload: "x" as unknown as Uint8Array })).rejects.toThrow(
      /task.payload must be a Uint8Array/,
    );
  });

  it("deletes task records with their thread", async () => {
    const { store } = await openStore();
    const key = { tenant: "acme", contextId: "ctx" };
    await store.append(key, { messageId: "m1", provenance: "user", payload: text("x") }, task("t1"));
    expect(await store.deleteThread(key)).toEqual({ deleted: true, messageCount: 1, tasks: 1, conversations: 0 });
    expect(await store.getTask("acme", "t1")).toBeUndefined();
    expect((await store.listTasks("acme", { limit: 5, contextId: "ctx" })).totalSize).toBe(0);
    expect((await store.listTasks("acme", { limit: 5 })).totalSize).toBe(0);
  });
});

describe("push configs", () => {
  it("puts, gets, lists in pages and deletes", async () => {
    const { store } = await openStore();
    const cfg = (configId: string, taskId = "t1") => ({ tenant: "acme", taskId, configId, payload: text(configId) });
    for (let i = 0; i < 5; i++) await store.putPushConfig(cfg(`c${i}`));
    await store.putPushConfig(cfg("c0", "t2"));
    await store.putPushConfig({ ...cfg("c1"), payload: bytes(9) });
    expect(await store.getPushConfig("acme", "t1", "c1")).toEqual({ ...cfg("c1"), payload: bytes(9) });
    expect(await store.getPushConfig("acme", "t3", "c1")).toBeUndefined();

    const seen: string[] = [];
    let cursor: string | undefined;
    do {
      const page = await store.listPushConfigs("acme", "t1", { limit: 2, ...(cursor ? { cursor } : {}) });
      expect(page.configs.length).toBeLessThanOrEqual(2);
      seen.push(...page.configs.map((c) => c.configId));
      cursor = page.nextCursor;
    } while (cursor);
    expect(seen.sort()).toEqual(["c0", "c1", "c2", "c3", "c4"]);
    const page = await store.listPushConfigs("acme", "t1", { limit: 2 });
    await expect(store.listPushConfigs("acme", "t2", { limit: 2, cursor: page.nextCursor! })).rejects.toMatchObject({
      code: "INVALID_CURSOR",
    });

    expect(await store.deletePushConfig("acme", "t1", "c1")).toBe(true);
    expect(await store.deletePushConfig("acme", "t1", "c1")).toBe(false);
    expect(await store.getPushConfig("acme", "t1", "c1")).toBeUndefined();
    expect((await store.listPushConfigs("acme", "t1", { limit: 10 })).configs).toHaveLength(4);
    expect((await store.listPushConfigs("acme", "t2", { limit: 10 })).configs.map((c) => c.configId)).toEqual(["c0"]);
  });
});
