import { afterEach, describe, expect, it } from "vitest";
import { type StoreBackend, StoreError, type TaskEvent, type TaskRecord, type ThreadKey } from "../src/index.js";
import { bytes, manualClock, text } from "./helpers.js";

/** Opens a fresh, empty backend; the suite closes it after each test. */
export type BackendFactory = (options: { now?: () => number }) => Promise<StoreBackend>;

const key: ThreadKey = { tenant: "acme", contextId: "ctx-1" };
const msg = (id: string, payload: Uint8Array = text(id)) => ({ messageId: id, provenance: "user" as const, payload });
const task = (taskId: string, over: Partial<TaskRecord> = {}): TaskRecord => ({
  tenant: "acme",
  taskId,
  contextId: "ctx",
  state: 2,
  updatedAt: 1000,
  payload: text(taskId),
  ...over,
});
const event = (seq: number, final = false): TaskEvent => ({ seq, payload: text(`e${seq}`), final });

async function collect(iterable: AsyncIterable<TaskEvent>): Promise<number[]> {
  const seqs: number[] = [];
  for await (const e of iterable) seqs.push(e.seq);
  return seqs;
}

/**
 * Polls `probe` until it returns a value. Bounded (20 s) so a broken backend
 * fails instead of hanging, and generous because CI machines are shared.
 */
async function eventually<T>(probe: () => Promise<T | null | undefined>, what: string): Promise<T> {
  const deadline = Date.now() + 20_000;
  while (Date.now() < deadline) {
    const value = await probe();
    if (value !== null && value !== undefined) return value;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  throw new Error(`gave up waiting for ${what}`);
}

/** The one contract both backends must meet, run against each. */
export function storeContract(name: string, factory: BackendFactory): void {
  describe(`store contract: ${name}`, () => {
    const opened: StoreBackend[] = [];
    afterEach(async () => {
      while (opened.length > 0) await opened.pop()!.close();
    });
    const open = async (options: { now?: () => number } = {}) => {
      const backend = await factory(options);
      opened.push(backend);
      return backend;
    };

    describe("threads", () => {
      it("numbers messages from 1, keeps meta in step and tails oldest first", async () => {
        const clock = manualClock();
        const { store } = await open({ now: clock.now });
        const first = await store.append(key, { ...msg("a"), taskId: "task-1" });
        clock.advance(5);
        const second = await store.append(key, { ...msg("b"), provenance: "agent" });
        expect(first).toEqual({
          duplicate: false,
          message: {
            sequence: 1,
            messageId: "a",
            provenance: "user",
            taskId: "task-1",
            payload: text("a"),
            createdAt: clock.now() - 5,
          },
        });
        expect(second.message.sequence).toBe(2);
        expect(second.message.taskId).toBeUndefined();
        expect(await store.getThread(key)).toEqual({
          tenant: "acme",
          contextId: "ctx-1",
          createdAt: clock.now() - 5,
          updatedAt: clock.now(),
          messageCount: 2,
          lastSequence: 2,
        });
        expect(await store.tail(key, 10)).toEqual([first.message, second.message]);
        expect(await store.tail(key, 1)).toEqual([second.message]);
        expect(await store.tail({ tenant: "acme", contextId: "nope" }, 5)).toEqual([]);
      });

      it("returns payload bytes exactly as plain Uint8Arrays", async () => {
        const { store } = await open();
        const payloads = [new Uint8Array(0), bytes(0, 255, 0, 10, 13), new Uint8Array(70_000).map((_, i) => i % 251)];
        for (const [i, payload] of payloads.entries()) await store.append(key, msg(`m${i}`, payload));
        const stored = await store.tail(key, 3);
        expect(stored.map((m) => m.payload)).toEqual(payloads);
        for (const m of stored) expect(Object.getPrototypeOf(m.payload)).toBe(Uint8Array.prototype);
      });

      it("answers a true retry with the stored record and treats other bytes under the same id as new", async () => {
        const clock = manualClock();
        const { store } = await open({ now: clock.now });
        const a = await store.append(key, msg("m1", bytes(1)));
        clock.advance(100);
        expect(await store.append(key, { messageId: "m1", provenance: "agent", payload: bytes(1) })).toEqual({
          duplicate: true,
          message: a.message,
        });
        const b = await store.append(key, msg("m1", bytes(2)));
        expect(b).toMatchObject({ duplicate: false, message: { sequence: 2 } });
        expect((await store.append(key, msg("m1", bytes(2)))).message).toEqual(b.message);
        expect(await store.getThread(key)).toMatchObject({ messageCount: 2, updatedAt: b.message.createdAt });
        const elsewhere = await store.append({ tenant: "acme", contextId: "ctx-2" }, msg("m1", bytes(1)));
        expect(elsewhere.duplicate).toBe(false);
      });

      it("serialises concurrent appends without gaps, and concurrent retries store one message", async () => {
        const { store } = await open();
        const results = await Promise.all(Array.from({ length: 100 }, (_, i) => store.append(key, msg(`m${i}`))));
        expect(results.map((r) => r.message.sequence).sort((x, y) => x - y)).toEqual(
          Array.from({ length: 100 }, (_, i) => i + 1),
        );
        const retries = await Promise.all(Array.from({ length: 20 }, () => store.append(key, msg("same"))));
        expect(new Set(retries.map((r) => r.message.sequence))).toEqual(new Set([101]));
        expect(retries.filter((r) => !r.duplicate)).toHaveLength(1);
        const all = await store.readMessages(key, { order: "oldest-first", limit: 1000 });
        expect(all.messages.map((m) => m.sequence)).toEqual(Array.from({ length: 101 }, (_, i) => i + 1));
      });

      it("pages both ways with cursors bound to thread and order", async () => {
        const { store } = await open();
        for (let i = 1; i <= 7; i++) await store.append(key, msg(`m${i}`));
        const walk = async (order: "newest-first" | "oldest-first") => {
          const seen: number[] = [];
          let cursor: string | undefined;
          do {
            const page = await store.readMessages(key, { order, limit: 3, ...(cursor ? { cursor } : {}) });
            seen.push(...page.messages.map((m) => m.sequence));
            cursor = page.nextCursor;
          } while (cursor);
          return seen;
        };
        expect(await walk("newest-first")).toEqual([7, 6, 5, 4, 3, 2, 1]);
        expect(await walk("oldest-first")).toEqual([1, 2, 3, 4, 5, 6, 7]);
        const back = await store.readMessages(key, { order: "newest-first", limit: 2 });
        for (const [k, order, cursor] of [
          [key, "oldest-first", back.nextCursor!],
          [{ tenant: "acme", contextId: "other" }, "newest-first", back.nextCursor!],
          [key, "newest-first", "!!!"],
          [key, "newest-first", `${back.nextCursor}x`],
          [key, "newest-first", Buffer.from("hello world").toString("base64url")],
        ] as const) {
          const failure = await store.readMessages(k, { order, limit: 2, cursor }).catch((e: unknown) => e);
          expect(failure).toBeInstanceOf(StoreError);
          expect(failure).toMatchObject({ code: "INVALID_CURSOR" });
        }
      });

      it("lists a tenant's threads newest first, paged, and keeps look-alike ids apart", async () => {
        const clock = manualClock();
        const { store } = await open({ now: clock.now });
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
        expect(third).toEqual({ threads: [expect.objectContaining({ contextId: "c0" })] });
        await expect(store.listThreads("other", { limit: 2, cursor: first.nextCursor! })).rejects.toMatchObject({
          code: "INVALID_CURSOR",
        });

        const lookAlikes: ThreadKey[] = [
          { tenant: "t/a", contextId: "b" },
          { tenant: "t", contextId: "/ab" },
          { tenant: "t", contextId: "a\u0000b" },
          { tenant: "t", contextId: "caf\u00e9" },
          { tenant: "t", contextId: "cafe\u0301" },
        ];
        for (const k of lookAlikes) await store.append(k, msg("m", text(JSON.stringify(k))));
        for (const k of lookAlikes) {
          const [only] = await store.tail(k, 5);
          expect(only?.payload).toEqual(text(JSON.stringify(k)));
          expect(await store.getThread(k)).toMatchObject({ tenant: k.tenant, contextId: k.contextId, messageCount: 1 });
        }
      });

      it("deletes a thread so a new one under the key starts afresh, and sweeps stale threads", async () => {
        const clock = manualClock();
        const { store } = await open({ now: clock.now });
        for (let i = 0; i < 5; i++) await store.append(key, msg(`m${i}`));
        expect(await store.deleteThread(key)).toEqual({ deleted: true, messageCount: 5 });
        expect(await store.deleteThread(key)).toEqual({ deleted: false, messageCount: 0 });
        expect(await store.tail(key, 5)).toEqual([]);
        expect((await store.append(key, msg("m3"))).message.sequence).toBe(1);

        await store.append({ tenant: "a", contextId: "old" }, msg("x"));
        clock.advance(1000);
        await store.append({ tenant: "a", contextId: "fresh" }, msg("x"));
        clock.advance(100);
        expect(await store.sweepThreads(1200)).toBe(0);
        clock.advance(150);
        expect(await store.sweepThreads(1200)).toBe(2);
        expect((await store.listThreads("a", { limit: 10 })).threads.map((t) => t.contextId)).toEqual(["fresh"]);
      });

      it("refuses bad arguments with errors that name them", async () => {
        const { store } = await open();
        await expect(store.tail(key, -1)).rejects.toThrow(/count/);
        await expect(store.readMessages(key, { order: "newest-first", limit: 0 })).rejects.toThrow(/limit/);
        await expect(store.append(key, { ...msg("m"), payload: "x" as unknown as Uint8Array })).rejects.toThrow(
          /payload/,
        );
        await expect(store.append({ tenant: "", contextId: "c" }, msg("m"))).rejects.toMatchObject({
          code: "INVALID_ID",
        });
      });
    });

    describe("tasks and push configs", () => {
      it("lists tasks newest first with filters, paging, a total and taskId tie-breaks", async () => {
        const { store } = await open();
        for (let i = 0; i < 10; i++) {
          await store.putTask(
            task(`t${i}`, { updatedAt: 1000 + i * 10, state: i % 2 === 0 ? 2 : 3, contextId: i < 6 ? "ctx" : "ctx-2" }),
          );
        }
        for (const id of ["tie-b", "tie-a"]) await store.putTask(task(id, { updatedAt: 500 }));
        await store.putTask(task("foreign", { tenant: "other", updatedAt: 5000 }));
        const ids = async (query: Parameters<typeof store.listTasks>[1]) => {
          const out: string[] = [];
          let cursor: string | undefined;
          let total = 0;
          do {
            const page = await store.listTasks("acme", { ...query, ...(cursor ? { cursor } : {}) });
            out.push(...page.tasks.map((t) => t.taskId));
            total = page.totalSize;
            cursor = page.nextCursor;
          } while (cursor);
          expect(out).toHaveLength(total);
          return out;
        };
        expect(await ids({ limit: 3 })).toEqual([
          ...["t9", "t8", "t7", "t6", "t5", "t4", "t3", "t2", "t1", "t0"],
          ...["tie-a", "tie-b"],
        ]);
        expect(await ids({ limit: 2, state: 2 })).toEqual(["t8", "t6", "t4", "t2", "t0", "tie-a", "tie-b"]);
        expect(await ids({ limit: 2, contextId: "ctx-2" })).toEqual(["t9", "t8", "t7", "t6"]);
        expect(await ids({ limit: 4, updatedAfter: 1045, state: 3, contextId: "ctx" })).toEqual(["t5"]);
        const first = await store.listTasks("acme", { limit: 2, state: 2 });
        await expect(store.listTasks("acme", { limit: 2, state: 3, cursor: first.nextCursor! })).rejects.toMatchObject({
          code: "INVALID_CURSOR",
        });
      });

      it("moves indexes on update, tracks unfinished tasks, and upserts with an append but not on a retry", async () => {
        const { store } = await open();
        await store.putTask(task("t1", { payload: bytes(0, 1, 255) }));
        expect(await store.getTask("acme", "t1")).toEqual(task("t1", { payload: bytes(0, 1, 255) }));
        expect(await store.getTask("other", "t1")).toBeUndefined();
        await store.putTask(task("t1", { state: 3, updatedAt: 2000, contextId: "ctx-b" }));
        expect((await store.listTasks("acme", { limit: 10, contextId: "ctx" })).totalSize).toBe(0);
        expect((await store.listTasks("acme", { limit: 10, contextId: "ctx-b" })).totalSize).toBe(1);
        await store.putTask(task("w", { state: 6, tenant: "other" }));
        expect((await store.listUnfinishedTasks()).map((t) => `${t.tenant}/${t.taskId}`)).toEqual(["other/w"]);

        const k = { tenant: "acme", contextId: "ctx" };
        const input = { messageId: "m1", provenance: "user" as const, taskId: "t2", payload: text("hi") };
        await store.append(k, input, task("t2", { state: 1 }));
        expect((await store.append(k, input, task("t2", { state: 2 }))).duplicate).toBe(true);
        expect((await store.getTask("acme", "t2"))?.state).toBe(1);
        await expect(store.append(k, { ...input, messageId: "m2" }, task("t2", { contextId: "x" }))).rejects.toThrow(
          /contextId/,
        );
        await store.deleteThread(k);
        expect((await store.getTask("acme", "t2"))?.taskId).toBe("t2");
      });

      it("puts, gets, pages and deletes push configs", async () => {
        const { store } = await open();
        const cfg = (configId: string, taskId = "t1") => ({
          tenant: "acme",
          taskId,
          configId,
          payload: text(configId),
        });
        for (let i = 0; i < 5; i++) await store.putPushConfig(cfg(`c${i}`));
        await store.putPushConfig(cfg("c0", "t2"));
        await store.putPushConfig({ ...cfg("c1"), payload: bytes(9) });
        expect(await store.getPushConfig("acme", "t1", "c1")).toEqual({ ...cfg("c1"), payload: bytes(9) });
        const seen: string[] = [];
        let cursor: string | undefined;
        do {
          const page = await store.listPushConfigs("acme", "t1", { limit: 2, ...(cursor ? { cursor } : {}) });
          expect(page.configs.length).toBeLessThanOrEqual(2);
          seen.push(...page.configs.map((c) => c.configId));
          cursor = page.nextCursor;
        } while (cursor);
        expect(seen.sort()).toEqual(["c0", "c1", "c2", "c3", "c4"]);
        expect(await store.deletePushConfig("acme", "t1", "c1")).toBe(true);
        expect(await store.deletePushConfig("acme", "t1", "c1")).toBe(false);
        expect((await store.listPushConfigs("acme", "t2", { limit: 10 })).configs.map((c) => c.configId)).toEqual([
          "c0",
        ]);
      });
    });

    describe("context leases", () => {
      it("grants exactly one of many concurrent acquires, at once, and frees the context on release", async () => {
        const { leases } = await open();
        const grants = await Promise.all(Array.from({ length: 50 }, (_, i) => leases.tryAcquire(key, `t${i}`, 30_000)));
        const winners = grants.filter((g) => g !== null);
        expect(winners).toHaveLength(1);
        const winner = winners[0]!;
        expect(winner.token).toBe(1);
        expect(await leases.holder(key)).toEqual({ taskId: winner.taskId, token: 1 });
        expect(await leases.tryAcquire(key, "late", 30_000)).toBeNull();
        expect(await leases.tryAcquire({ tenant: "acme", contextId: "ctx-2" }, "other", 30_000)).not.toBeNull();
        expect(await leases.renew(winner, 30_000)).toEqual({ held: true, cancelRequested: false });
        expect(await leases.release(winner)).toBe(true);
        expect(await leases.release(winner)).toBe(false);
        expect(await leases.holder(key)).toBeUndefined();
        const next = await leases.tryAcquire(key, "next", 30_000);
        expect(next).toEqual({ key, taskId: "next", token: 2 });
        expect(await leases.renew(winner, 30_000)).toEqual({ held: false, cancelRequested: false });
      });

      it("lets an expired lease be taken over with a higher token, and fences the stale holder's writes", async () => {
        const { store, leases, events } = await open();
        // Long enough for the stale holder's first write to land on a loaded machine, short enough to wait out.
        const stale = (await leases.tryAcquire(key, "t-old", 1_000))!;
        await events.append("acme", "t-old", [event(1)], stale);
        const expired = await eventually(async () => (await leases.expired(10))[0], "the lease to expire");
        expect(expired).toEqual({ key, taskId: "t-old", token: 1 });
        const sweeper = (await leases.takeOver(expired, 30_000))!;
        expect(sweeper.token).toBe(2);
        expect(await leases.takeOver(expired, 30_000)).toBeNull();
        expect(await leases.renew(stale, 30_000)).toMatchObject({ held: false });

        const fenced = { code: "FENCED" };
        await expect(store.append(key, msg("late"), undefined, { fence: stale })).rejects.toMatchObject(fenced);
        await expect(
          store.putTask(task("t-old", { contextId: key.contextId }), { fence: stale }),
        ).rejects.toMatchObject(fenced);
        await expect(events.append("acme", "t-old", [event(2)], stale)).rejects.toMatchObject(fenced);
        expect(await store.getThread(key)).toBeUndefined();

        await store.putTask(task("t-old", { contextId: key.contextId, state: 4 }), { fence: sweeper });
        await events.append("acme", "t-old", [event(2, true)], sweeper);
        await store.append(key, msg("ok"), undefined, { fence: sweeper });
        expect(await leases.release(sweeper)).toBe(true);
        expect(await leases.expired(10)).toEqual([]);
        expect((await events.read("acme", "t-old", 0, 10)).map((e) => [e.seq, e.final])).toEqual([
          [1, false],
          [2, true],
        ]);
      });

      it("reports the orphan of an expired lease that a new acquire replaced", async () => {
        const { leases } = await open();
        await leases.tryAcquire(key, "t-lost", 20);
        const grant = await eventually(() => leases.tryAcquire(key, "t-new", 30_000), "the lease to expire");
        expect(grant).toEqual({ key, taskId: "t-new", token: 2, orphan: { taskId: "t-lost", token: 1 } });
      });

      it("records a cancel for the live task, tells the handlers and reports it on renewal", async () => {
        const { leases } = await open();
        const heard: string[] = [];
        leases.onCancel((k, taskId) => heard.push(`${k.contextId}/${taskId}`));
        const fence = (await leases.tryAcquire(key, "t1", 30_000))!;
        expect(await leases.requestCancel(key, "someone-else")).toBe(false);
        expect(await leases.requestCancel(key, "t1")).toBe(true);
        expect(await leases.renew(fence, 30_000)).toEqual({ held: true, cancelRequested: true });
        await eventually(async () => (heard.length > 0 ? heard : null), "the cancel notification");
        expect(heard).toEqual(["ctx-1/t1"]);
      });
    });

    describe("task event logs", () => {
      it("replays from any point, then follows live events until the final one", async () => {
        const { leases, events } = await open();
        const fence = (await leases.tryAcquire(key, "t1", 30_000))!;
        await events.append("acme", "t1", [event(1), event(2)], fence);
        const signal = new AbortController().signal;
        const fromStart = collect(events.subscribe("acme", "t1", 0, signal));
        const resumed = collect(events.subscribe("acme", "t1", 1, signal));
        const otherTenant = events.read("other", "t1", 0, 10);
        await events.append("acme", "t1", [event(3)], fence);
        await events.append("acme", "t1", [event(4), event(5, true)], fence);
        expect(await fromStart).toEqual([1, 2, 3, 4, 5]);
        expect(await resumed).toEqual([2, 3, 4, 5]);
        expect(await otherTenant).toEqual([]);
        expect(await events.lastSeq("acme", "t1")).toBe(5);
        expect(await events.read("acme", "t1", 3, 10)).toEqual([event(4), event(5, true)]);
        expect(await collect(events.subscribe("acme", "t1", 5, AbortSignal.timeout(50)))).toEqual([]);
      });

      it("refuses a batch that does not continue the log", async () => {
        const { leases, events } = await open();
        const fence = (await leases.tryAcquire(key, "t1", 30_000))!;
        await events.append("acme", "t1", [event(1)], fence);
        await expect(events.append("acme", "t1", [event(1)], fence)).rejects.toMatchObject({ code: "CORRUPT" });
        await expect(events.append("acme", "t1", [event(3)], fence)).rejects.toMatchObject({ code: "CORRUPT" });
        await expect(events.append("acme", "t1", [event(2), event(4)], fence)).rejects.toThrow(/consecutive/);
        expect(await events.lastSeq("acme", "t1")).toBe(1);
      });

      it("ends a subscription when its signal aborts", async () => {
        const { events } = await open();
        const controller = new AbortController();
        const pending = collect(events.subscribe("acme", "nothing-yet", 0, controller.signal));
        controller.abort();
        expect(await pending).toEqual([]);
      });
    });
  });
}
