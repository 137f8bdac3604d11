import { describe, expect, it } from "vitest";
import type { StoreBackend, ThreadKey } from "../src/index.js";
import { openedBackends } from "./contract-fixtures.js";
import { manualClock, task, text } from "./helpers.js";

const day = 86_400_000;

export type RetentionFactory = (options: { now?: () => number }) => Promise<StoreBackend>;

/** What a backend holds, by table, for the "nothing of it remains" check; it may close the backend to read it. */
export type Leftovers = (backend: StoreBackend) => Promise<Record<string, number>>;

/** A thread with `tasks` finished turns: two messages, a task, a push config and an event log per turn. */
export async function populate(backend: StoreBackend, key: ThreadKey, tasks: number, now: () => number) {
  const { store, leases, events } = backend;
  for (let i = 1; i <= tasks; i++) {
    const taskId = `${key.contextId}-task-${i}`;
    await store.append(
      key,
      { messageId: `${taskId}-in`, provenance: "user", taskId, payload: text(`in ${i}`) },
      task(taskId, { tenant: key.tenant, contextId: key.contextId, state: 3, updatedAt: now() }),
    );
    await store.append(key, { messageId: `${taskId}-out`, provenance: "agent", taskId, payload: text(`out ${i}`) });
    await store.putPushConfig({ tenant: key.tenant, taskId, configId: "hook", payload: text("https://x") });
    const grant = await leases.tryAcquire(key, taskId, 60_000);
    if (!grant) throw new Error("the test context is busy");
    await events.append(
      key.tenant,
      taskId,
      [
        { seq: 1, payload: text("working"), final: false },
        { seq: 2, payload: text("done"), final: true },
      ],
      grant,
    );
    await leases.release(grant);
  }
}

/** Everything a thread owns is gone (or, with `kept`, all there). */
export async function expectThread(backend: StoreBackend, key: ThreadKey, tasks: number, kept: boolean) {
  const { store, events } = backend;
  const meta = await store.getThread(key);
  const page = await store.readMessages(key, { order: "oldest-first", limit: 1000 });
  const taskPage = await store.listTasks(key.tenant, { contextId: key.contextId, limit: 100 });
  const listed = (await store.listThreads(key.tenant, { limit: 1000 })).threads.some(
    (t) => t.contextId === key.contextId,
  );
  const perTask = [];
  for (let i = 1; i <= tasks; i++) {
    const taskId = `${key.contextId}-task-${i}`;
    perTask.push({
      task: (await store.getTask(key.tenant, taskId)) !== undefined,
      push: (await store.getPushConfig(key.tenant, taskId, "hook")) !== undefined,
      events: await events.lastSeq(key.tenant, taskId),
    });
  }
  if (kept) {
    expect(meta?.messageCount).toBe(2 * tasks);
    expect(page.messages).toHaveLength(2 * tasks);
    expect(taskPage.tasks).toHaveLength(tasks);
    expect(listed).toBe(true);
    expect(perTask).toEqual(Array.from({ length: tasks }, () => ({ task: true, push: true, events: 2 })));
  } else {
    expect(meta).toBeUndefined();
    expect(page.messages).toEqual([]);
    expect(taskPage.tasks).toEqual([]);
    expect(listed).toBe(false);
    expect(perTask).toEqual(Array.from({ length: tasks }, () => ({ task: false, push: false, events: 0 })));
  }
}

/** The retention contract of ThreadRetention, the same on both backends. */
export function retentionContract(name: string, factory: RetentionFactory, leftovers: Leftovers): void {
  describe(`retention: ${name}`, () => {
    const open = openedBackends(factory);

    it("deletes idle threads with their messages, tasks, push configs and event logs, and keeps active ones", async () => {
      const clock = manualClock();
      const backend = await open({ now: clock.now });
      const idle = [
        { tenant: "acme", contextId: "old-1" },
        { tenant: "acme", contextId: "old-2" },
        { tenant: "beta", contextId: "old-3" },
      ];
      for (const key of idle) await populate(backend, key, 3, clock.now);
      clock.advance(10 * day);
      const active = [
        { tenant: "acme", contextId: "new-1" },
        { tenant: "beta", contextId: "new-2" },
      ];
      for (const key of active) await populate(backend, key, 2, clock.now);

      const result = await backend.retention.purgeIdleThreads({ idleBefore: clock.now() - 5 * day, limit: 100 });
      expect(result).toEqual({ threads: 3, messages: 18, tasks: 9, skipped: 0, more: false });
      for (const key of idle) await expectThread(backend, key, 3, false);
      for (const key of active) await expectThread(backend, key, 2, true);
      // A second pass finds nothing more.
      expect(await backend.retention.purgeIdleThreads({ idleBefore: clock.now() - 5 * day, limit: 100 })).toEqual({
        threads: 0,
        messages: 0,
        tasks: 0,
        skipped: 0,
        more: false,
      });
      // Nothing of the idle threads is left anywhere: the backend holds exactly what the active threads alone write.
      const after = await leftovers(backend);
      const reference = await open({ now: clock.now });
      for (const key of active) await populate(reference, key, 2, clock.now);
      expect(after).toEqual(await leftovers(reference));
    });

    it("judges a thread appended to again within milliseconds by its latest update", async () => {
      const clock = manualClock();
      const backend = await open({ now: clock.now });
      const append = (contextId: string) =>
        backend.store.append(
          { tenant: "acme", contextId },
          { messageId: `m-${clock.now()}`, provenance: "user", payload: text("x") },
        );
      await append("a");
      clock.advance(2);
      await append("b");
      clock.advance(2);
      await append("a");
      clock.advance(2);
      const result = await backend.retention.purgeIdleThreads({ idleBefore: clock.now() - 3, limit: 10 });
      expect(result).toMatchObject({ threads: 1, messages: 1 });
      expect(await backend.store.getThread({ tenant: "acme", contextId: "b" })).toBeUndefined();
      expect(await backend.store.getThread({ tenant: "acme", contextId: "a" })).toMatchObject({ messageCount: 2 });
      expect((await backend.store.listThreads("acme", { limit: 10 })).threads.map((t) => t.contextId)).toEqual(["a"]);
      clock.advance(10);
      expect(await backend.retention.purgeIdleThreads({ idleBefore: clock.now(), limit: 10 })).toMatchObject({
        threads: 1,
        messages: 2,
      });
      expect((await backend.store.listThreads("acme", { limit: 10 })).threads).toEqual([]);
    });

    it("takes each tenant's own cutoff, and keeps every thread of a tenant whose policy is off", async () => {
      const clock = manualClock();
      const backend = await open({ now: clock.now });
      const keys = ["keeper", "short", "other"].map((tenant) => ({ tenant, contextId: "c" }));
      for (const key of keys) await populate(backend, key, 1, clock.now);
      clock.advance(3 * day);
      const tenants = new Map<string, number | undefined>([
        ["keeper", undefined],
        ["short", clock.now() - 2 * day],
      ]);
      // Default: 5 days, so "other" (3 days idle) stays; "short" (2-day policy) goes; "keeper" never goes.
      const result = await backend.retention.purgeIdleThreads({
        idleBefore: clock.now() - 5 * day,
        tenants,
        limit: 10,
      });
      expect(result.threads).toBe(1);
      await expectThread(backend, keys[1]!, 1, false);
      await expectThread(backend, keys[0]!, 1, true);
      await expectThread(backend, keys[2]!, 1, true);
      clock.advance(100 * day);
      expect(
        (await backend.retention.purgeIdleThreads({ idleBefore: clock.now() - 5 * day, tenants, limit: 10 })).threads,
      ).toBe(1);
      await expectThread(backend, keys[0]!, 1, true);
      await expectThread(backend, keys[2]!, 1, false);
      // Without a default only the named cutoffs apply.
      expect((await backend.retention.purgeIdleThreads({ limit: 10 })).threads).toBe(0);
    });

    it("never deletes a thread whose lease is held, lost and not ended, or that the caller says is busy", async () => {
      const clock = manualClock();
      const backend = await open({ now: clock.now });
      const held = { tenant: "acme", contextId: "held" };
      const lost = { tenant: "acme", contextId: "lost" };
      const guarded = { tenant: "acme", contextId: "guarded" };
      for (const key of [held, lost, guarded]) await populate(backend, key, 1, clock.now);
      clock.advance(10 * day);
      const running = await backend.leases.tryAcquire(held, "running", 60_000);
      // A lease that expires without a release: its task was cut off and the lease sweeper has not ended it yet.
      const cutOff = await backend.leases.tryAcquire(lost, "cut-off", 300);
      expect(running && cutOff).toBeTruthy();
      await new Promise((resolve) => setTimeout(resolve, 400));
      const query = {
        idleBefore: clock.now() - day,
        limit: 10,
        busy: (key: ThreadKey) => key.contextId === guarded.contextId,
      };
      expect(await backend.retention.purgeIdleThreads(query)).toMatchObject({ threads: 0, skipped: 3 });
      for (const key of [held, lost, guarded]) await expectThread(backend, key, 1, true);

      await backend.leases.release(running!);
      const takenOver = await backend.leases.takeOver({ key: lost, taskId: "cut-off", token: cutOff!.token }, 60_000);
      await backend.leases.release(takenOver!);
      expect(await backend.retention.purgeIdleThreads(query)).toMatchObject({ threads: 2, skipped: 1 });
      await expectThread(backend, held, 1, false);
      await expectThread(backend, lost, 1, false);
      await expectThread(backend, guarded, 1, true);
    });

    it("stops at the limit and says there is more; the next pass goes on from the oldest", async () => {
      const clock = manualClock();
      const backend = await open({ now: clock.now });
      for (let i = 1; i <= 5; i++) {
        await populate(backend, { tenant: "acme", contextId: `t${i}` }, 1, clock.now);
        clock.advance(1000);
      }
      clock.advance(10 * day);
      const query = { idleBefore: clock.now() - day, limit: 2 };
      expect(await backend.retention.purgeIdleThreads(query)).toMatchObject({ threads: 2, more: true });
      // The oldest went first.
      await expectThread(backend, { tenant: "acme", contextId: "t1" }, 1, false);
      await expectThread(backend, { tenant: "acme", contextId: "t3" }, 1, true);
      expect(await backend.retention.purgeIdleThreads(query)).toMatchObject({ threads: 2, more: true });
      expect(await backend.retention.purgeIdleThreads(query)).toMatchObject({ threads: 1, more: false });
      expect((await backend.store.listThreads("acme", { limit: 10 })).threads).toEqual([]);
    });

    it("starts a fresh thread when a contextId is used again after its thread was deleted", async () => {
      const clock = manualClock();
      const backend = await open({ now: clock.now });
      const key = { tenant: "acme", contextId: "again" };
      await populate(backend, key, 2, clock.now);
      clock.advance(10 * day);
      expect((await backend.retention.purgeIdleThreads({ idleBefore: clock.now() - day, limit: 10 })).threads).toBe(1);
      const appended = await backend.store.append(key, { messageId: "fresh", provenance: "user", payload: text("hi") });
      expect(appended.message.sequence).toBe(1);
      expect((await backend.store.readMessages(key, { order: "oldest-first", limit: 10 })).messages).toHaveLength(1);
      expect((await backend.store.listTasks("acme", { contextId: "again", limit: 10 })).tasks).toEqual([]);
    });

    it("refuses a malformed query", async () => {
      const backend = await open();
      await expect(backend.retention.purgeIdleThreads({ limit: 0 })).rejects.toThrow(/limit/);
      await expect(backend.retention.purgeIdleThreads({ idleBefore: -5, limit: 1 })).rejects.toThrow(/idleBefore/);
    });
  });
}
