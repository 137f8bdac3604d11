import { describe, expect, it } from "vitest";
import { type StoreBackend, StoreError, type ThreadKey } from "../src/index.js";
import { conv, convEvent, event, key, msg, openedBackends, task } from "./contract-fixtures.js";
import { bytes, manualClock, text } from "./helpers.js";

/** Opens a fresh, empty backend; the suite closes it after each test. */
export type BackendFactory = (options: { now?: () => number }) => Promise<StoreBackend>;

/** The one contract every backend must meet, run against each (replicaContract adds what shared backends offer). */
export function storeContract(name: string, factory: BackendFactory): void {
  describe(`store contract: ${name}`, () => {
    const open = openedBackends(factory);

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

      it("lists by the latest update even when threads are appended to again within milliseconds, on every page size", async () => {
        const clock = manualClock();
        const { store } = await open({ now: clock.now });
        const updated = new Map<string, number>();
        const at = async (ms: number, contextId: string) => {
          clock.advance(ms);
          await store.append({ tenant: "acme", contextId }, msg(`m-${clock.now()}`));
          updated.set(contextId, clock.now());
        };
        // Turns overlap: a reply lands a few ms after its inbound message, other threads' messages in between.
        for (let i = 0; i < 90; i++) {
          await at(1, `c${i}`);
          if (i >= 3 && i % 3 === 0) await at(1, `c${i - 3}`);
        }
        for (let i = 89; i >= 0; i -= 7) await at(1, `c${i}`);
        await at(600, "c5");
        await at(1, "c40");
        const expected = [...updated.entries()].sort((x, y) => y[1] - x[1]).map(([contextId]) => contextId);
        for (const limit of [1, 4, 64, 100]) {
          const seen: string[] = [];
          let cursor: string | undefined;
          do {
            const page = await store.listThreads("acme", { limit, ...(cursor ? { cursor } : {}) });
            expect(page.threads.length).toBeLessThanOrEqual(limit);
            for (const thread of page.threads) {
              expect(thread).toEqual(await store.getThread({ tenant: "acme", contextId: thread.contextId }));
              seen.push(thread.contextId);
            }
            cursor = page.nextCursor;
          } while (cursor);
          expect(seen).toEqual(expected);
        }
        expect(await store.deleteThread({ tenant: "acme", contextId: "c3" })).toEqual({
          deleted: true,
          messageCount: 2,
          tasks: 0,
          conversations: 0,
        });
        const all = await store.listThreads("acme", { limit: 100 });
        expect(all.threads.map((t) => t.contextId)).toEqual(expected.filter((c) => c !== "c3"));
      });

      it("deletes a thread so a new one under the key starts afresh, and sweeps stale threads", async () => {
        const clock = manualClock();
        const { store } = await open({ now: clock.now });
        for (let i = 0; i < 5; i++) await store.append(key, msg(`m${i}`));
        expect(await store.deleteThread(key)).toEqual({ deleted: true, messageCount: 5, tasks: 0, conversations: 0 });
        expect(await store.deleteThread(key)).toEqual({ deleted: false, messageCount: 0, tasks: 0, conversations: 0 });
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

    describe("imports", () => {
      const imported = (id: string, createdAt: number, over: Record<string, unknown> = {}) => ({
        ...msg(id),
        createdAt,
        ...over,
      });
      const ctxTask = (id: string) => task(id, { contextId: key.contextId, updatedAt: 500 });

      it("writes messages with their own times in order, with the thread's tasks, and reads them back", async () => {
        const clock = manualClock();
        const { store } = await open({ now: clock.now });
        const result = await store.importThread(key, {
          messages: [
            imported("a", 10, { taskId: "t1" }),
            imported("b", 20, { provenance: "agent" }),
            imported("c", 30, { provenance: "imported" }),
            imported("d", 40, { provenance: "inter-session" }),
          ],
          tasks: [ctxTask("t1")],
          mode: "empty",
        });
        expect(result).toMatchObject({ added: 4, skipped: 0, tasksAdded: 1, tasksSkipped: 0 });
        expect(result.thread).toMatchObject({ messageCount: 4, lastSequence: 4, updatedAt: clock.now() });
        const page = await store.readMessages(key, { order: "oldest-first", limit: 10 });
        expect(page.messages).toEqual([
          { sequence: 1, messageId: "a", provenance: "user", taskId: "t1", payload: text("a"), createdAt: 10 },
          { sequence: 2, messageId: "b", provenance: "agent", payload: text("b"), createdAt: 20 },
          { sequence: 3, messageId: "c", provenance: "imported", payload: text("c"), createdAt: 30 },
          { sequence: 4, messageId: "d", provenance: "inter-session", payload: text("d"), createdAt: 40 },
        ]);
        expect(await store.getTask("acme", "t1")).toEqual(ctxTask("t1"));
        // An append after the import continues the sequence and sees imported messages as retries.
        expect((await store.append(key, msg("a"))).duplicate).toBe(true);
        expect((await store.append(key, msg("e"))).message.sequence).toBe(5);
      });

      it("is idempotent: importing the same data again adds nothing", async () => {
        const { store } = await open();
        const data = { messages: [imported("a", 1), imported("b", 2)], tasks: [ctxTask("t1")], mode: "empty" as const };
        await store.importThread(key, data);
        const again = await store.importThread(key, data);
        expect(again).toMatchObject({ added: 0, skipped: 2, tasksAdded: 0, tasksSkipped: 1 });
        expect(await store.getThread(key)).toMatchObject({ messageCount: 2, lastSequence: 2 });
        // A later export of the same thread (a superset) adds only what is new, still without --append.
        const more = await store.importThread(key, { ...data, messages: [...data.messages, imported("c", 3)] });
        expect(more).toMatchObject({ added: 1, skipped: 2 });
      });

      it("refuses to merge into a thread with other messages unless appending, and writes nothing then", async () => {
        const { store } = await open();
        await store.append(key, msg("own"));
        const data = { messages: [imported("a", 1)], tasks: [ctxTask("t1")], mode: "empty" as const };
        await expect(store.importThread(key, data)).rejects.toMatchObject({ code: "CONFLICT" });
        expect(await store.getThread(key)).toMatchObject({ messageCount: 1 });
        expect(await store.getTask("acme", "t1")).toBeUndefined();
        const appended = await store.importThread(key, { ...data, mode: "append" });
        expect(appended).toMatchObject({ added: 1, tasksAdded: 1, thread: { messageCount: 2, lastSequence: 2 } });
        const tail = await store.tail(key, 2);
        expect(tail.map((m) => [m.sequence, m.messageId, m.createdAt])).toEqual([
          [1, "own", tail[0]!.createdAt],
          [2, "a", 1],
        ]);
      });

      it("orders an import and concurrent appends to the same thread without gaps", async () => {
        const { store } = await open();
        await store.append(key, msg("first"));
        const messages = Array.from({ length: 50 }, (_, i) => imported(`i${i}`, i));
        await Promise.all([
          store.importThread(key, { messages, tasks: [], mode: "append" }),
          ...Array.from({ length: 20 }, (_, i) => store.append(key, msg(`a${i}`))),
        ]);
        const page = await store.readMessages(key, { order: "oldest-first", limit: 100 });
        expect(page.messages.map((m) => m.sequence)).toEqual(Array.from({ length: 71 }, (_, i) => i + 1));
        const importedOnes = page.messages.filter((m) => m.messageId.startsWith("i")).map((m) => m.messageId);
        expect(importedOnes).toEqual(messages.map((m) => m.messageId));
        expect(await store.getThread(key)).toMatchObject({ messageCount: 71, lastSequence: 71 });
      });

      it("refuses a task id that belongs to another thread of the tenant", async () => {
        const { store } = await open();
        await store.putTask(task("t1", { contextId: "elsewhere" }));
        await expect(
          store.importThread(key, { messages: [imported("a", 1)], tasks: [ctxTask("t1")], mode: "empty" }),
        ).rejects.toMatchObject({ code: "CONFLICT", message: /elsewhere/ });
        expect(await store.getThread(key)).toBeUndefined();
        await expect(
          store.importThread(key, { messages: [], tasks: [task("t2", { contextId: "other" })], mode: "empty" }),
        ).rejects.toThrow(/thread's tenant and contextId/);
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
        expect(await store.getTask("acme", "t2")).toBeUndefined();
      });

      it("deletes everything of a thread: messages, tasks, push configs, event logs, conversations", async () => {
        const { store, events, leases, conversations } = await open();
        const other = { tenant: "acme", contextId: "ctx-other" };
        await store.append(key, { ...msg("m1"), taskId: "t1" }, task("t1", { contextId: "ctx-1", state: 3 }));
        await store.append(key, { ...msg("m2"), taskId: "t2" }, task("t2", { contextId: "ctx-1", state: 2 }));
        await store.append(other, { ...msg("o1"), taskId: "t9" }, task("t9", { contextId: "ctx-other", state: 3 }));
        await store.putPushConfig({ tenant: "acme", taskId: "t1", configId: "hook", payload: text("hook") });
        const grant = await leases.tryAcquire(key, "t1", 60_000);
        await events.append("acme", "t1", [event(1), event(2, true)], grant!);
        await leases.release(grant!);
        await conversations.saveConversation(conv("s1", ["ctx-1", "ctx-peer"]), [convEvent(1)]);
        await conversations.saveConversation(conv("s2", ["ctx-other", "ctx-x"]), [convEvent(1)]);
        // The task of a running turn (not terminal) goes too: it holds no lease.
        await store.putTask(task("t2", { contextId: "ctx-1", state: 2 }));

        expect(await store.deleteThread(key)).toEqual({ deleted: true, messageCount: 2, tasks: 2, conversations: 1 });
        expect(await store.getThread(key)).toBeUndefined();
        expect(await store.tail(key, 10)).toEqual([]);
        expect((await store.readMessages(key, { order: "oldest-first", limit: 10 })).messages).toEqual([]);
        expect(await store.getTask("acme", "t1")).toBeUndefined();
        expect(await store.getTask("acme", "t2")).toBeUndefined();
        expect((await store.listTasks("acme", { limit: 10, contextId: "ctx-1" })).totalSize).toBe(0);
        expect((await store.listTasks("acme", { limit: 10 })).tasks.map((t) => t.taskId)).toEqual(["t9"]);
        expect((await store.listUnfinishedTasks()).map((t) => t.taskId)).toEqual([]);
        expect(await store.getPushConfig("acme", "t1", "hook")).toBeUndefined();
        expect((await store.listPushConfigs("acme", "t1", { limit: 10 })).configs).toEqual([]);
        expect(await events.read("acme", "t1", 0, 10)).toEqual([]);
        expect(await events.lastSeq("acme", "t1")).toBe(0);
        expect(await conversations.getConversation("acme", "s1")).toBeUndefined();
        expect(await conversations.readConversationEvents("acme", "s1", 0, 10)).toEqual([]);
        expect(
          (await conversations.listConversations("acme", { limit: 10 })).conversations.map((c) => c.conversationId),
        ).toEqual(["s2"]);
        expect((await store.listThreads("acme", { limit: 10 })).threads.map((t) => t.contextId)).toEqual(["ctx-other"]);
        // The same contextId starts afresh, without the old tasks in its listing; a conversation deleted while it
        // ran is not brought back by its next step.
        expect((await store.append(key, msg("m1"))).message.sequence).toBe(1);
        expect((await store.listTasks("acme", { limit: 10, contextId: "ctx-1" })).totalSize).toBe(0);
        await expect(
          conversations.saveConversation({ ...conv("s1", ["ctx-1", "ctx-peer"]), eventCount: 2 }, [convEvent(2)]),
        ).rejects.toMatchObject({ code: "CONFLICT" });
        expect(await store.deleteThread(key)).toEqual({ deleted: true, messageCount: 1, tasks: 0, conversations: 0 });
        expect(await store.deleteThread(key)).toEqual({ deleted: false, messageCount: 0, tasks: 0, conversations: 0 });
        // Deleting the other side of a conversation deletes it too.
        expect((await store.deleteThread({ tenant: "acme", contextId: "ctx-x" })).conversations).toBe(1);
        expect(await conversations.getConversation("acme", "s2")).toBeUndefined();
        expect((await store.getThread(other))?.messageCount).toBe(1);
      });

      it("refuses (BUSY) to delete a thread whose lease a task holds, and deletes nothing", async () => {
        const { store, leases } = await open();
        await store.append(key, { ...msg("m1"), taskId: "t1" }, task("t1", { contextId: "ctx-1", state: 2 }));
        const grant = await leases.tryAcquire(key, "t1", 60_000);
        await expect(store.deleteThread(key)).rejects.toMatchObject({ code: "BUSY" });
        expect((await store.getThread(key))?.messageCount).toBe(1);
        expect((await store.getTask("acme", "t1"))?.taskId).toBe("t1");
        await leases.release(grant!);
        await expect(store.deleteThread(key, { busy: (k) => k.contextId === key.contextId })).rejects.toMatchObject({
          code: "BUSY",
        });
        expect((await store.deleteThread(key)).deleted).toBe(true);
      });

      it("purges the same set in a retention pass", async () => {
        const clock = manualClock();
        const { store, conversations, retention } = await open({ now: clock.now });
        await store.append(key, { ...msg("m1"), taskId: "t1" }, task("t1", { contextId: "ctx-1", state: 3 }));
        await conversations.saveConversation(conv("s1", ["ctx-1", "ctx-peer"]), [convEvent(1)]);
        clock.advance(10_000);
        const result = await retention.purgeIdleThreads({ idleBefore: clock.now() - 1_000, limit: 10 });
        expect(result).toMatchObject({ threads: 1, messages: 1, tasks: 1 });
        expect(await store.getTask("acme", "t1")).toBeUndefined();
        expect(await conversations.getConversation("acme", "s1")).toBeUndefined();
      });
    });

    describe("conversations", () => {
      it("saves a record with its events, appends more, and reads them back", async () => {
        const { conversations } = await open();
        const first = conv("s1", ["ctx-a", "ctx-b"], { eventCount: 2 });
        await conversations.saveConversation(first, [convEvent(1), convEvent(2)]);
        expect(await conversations.getConversation("acme", "s1")).toEqual(first);
        expect(await conversations.listRunningConversations(10)).toEqual([first]);
        const done = { ...first, state: 2, updatedAt: 9_000, eventCount: 3, payload: text("done") };
        await conversations.saveConversation(done, [convEvent(3)]);
        expect(await conversations.getConversation("acme", "s1")).toEqual(done);
        expect(await conversations.listRunningConversations(10)).toEqual([]);
        expect(await conversations.readConversationEvents("acme", "s1", 0, 10)).toEqual([
          convEvent(1),
          convEvent(2),
          convEvent(3),
        ]);
        expect(await conversations.readConversationEvents("acme", "s1", 1, 1)).toEqual([convEvent(2)]);
        // Another tenant never sees it.
        expect(await conversations.getConversation("other", "s1")).toBeUndefined();
        expect((await conversations.listConversations("other", { limit: 10 })).conversations).toEqual([]);
        // Events that do not follow the stored ones write nothing.
        await expect(conversations.saveConversation({ ...done, eventCount: 5 }, [convEvent(5)])).rejects.toMatchObject({
          code: "CONFLICT",
        });
        await expect(conversations.saveConversation({ ...done, eventCount: 4 }, [convEvent(3)])).rejects.toThrow(
          /seqs must run from 4/,
        );
        expect((await conversations.getConversation("acme", "s1"))?.eventCount).toBe(3);
      });

      it("lists a tenant's conversations newest first, in pages, filtered by state and agent", async () => {
        const { conversations } = await open();
        for (let i = 0; i < 7; i++) {
          await conversations.saveConversation(
            conv(`s${i}`, [`r${i}`, `t${i}`], {
              createdAt: 1_000 + Math.floor(i / 2),
              state: i % 3 === 0 ? 2 : 1,
              agents: [i % 2 === 0 ? "alpha" : "beta", "gamma"],
              eventCount: 1,
            }),
            [convEvent(1)],
          );
        }
        await conversations.saveConversation(conv("x", ["r", "t"], { tenant: "other" }), [convEvent(1)]);
        const all = async (query: { state?: number; agent?: string }, limit: number) => {
          const ids: string[] = [];
          let cursor: string | undefined;
          do {
            const page = await conversations.listConversations("acme", {
              ...query,
              limit,
              ...(cursor ? { cursor } : {}),
            });
            expect(page.conversations.length).toBeLessThanOrEqual(limit);
            ids.push(...page.conversations.map((c) => c.conversationId));
            cursor = page.nextCursor;
          } while (cursor);
          return ids;
        };
        const newestFirst = await all({}, 100);
        expect(newestFirst.slice(0, 1)).toEqual(["s6"]);
        expect(new Set(newestFirst.slice(1, 3))).toEqual(new Set(["s4", "s5"]));
        expect(newestFirst).toHaveLength(7);
        for (const limit of [1, 2, 3]) expect(await all({}, limit)).toEqual(newestFirst);
        expect(await all({ state: 2 }, 1)).toEqual(newestFirst.filter((id) => ["s0", "s3", "s6"].includes(id)));
        expect(await all({ agent: "beta" }, 2)).toEqual(newestFirst.filter((id) => ["s1", "s3", "s5"].includes(id)));
        expect(await all({ agent: "gamma", state: 1 }, 2)).toEqual(
          newestFirst.filter((id) => ["s1", "s2", "s4", "s5"].includes(id)),
        );
        expect(await all({ agent: "nobody" }, 2)).toEqual([]);
        const page = await conversations.listConversations("acme", { state: 2, limit: 1 });
        await expect(
          conversations.listConversations("acme", { limit: 1, cursor: page.nextCursor! }),
        ).rejects.toMatchObject({ code: "INVALID_CURSOR" });
      });
    });

    describe("push configs and more", () => {
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
  });
}
