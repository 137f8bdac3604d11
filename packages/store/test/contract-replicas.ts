import { describe, expect, it } from "vitest";
import type { TaskEvent } from "../src/backends.js";
import type { StoreBackend } from "../src/index.js";
import { event, key, msg, openedBackends, task } from "./contract-fixtures.js";

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

/**
 * The contract of context leases, fenced writes and task event logs: shared by
 * N replicas on PostgreSQL, in-process (and the log durable) on LevelDB.
 */
export function replicaContract(name: string, factory: (options: { now?: () => number }) => Promise<StoreBackend>) {
  describe(`replica contract: ${name}`, () => {
    const open = openedBackends(factory);

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

      it("renews a lease that lapsed while nobody took it over, and its fence writes again", async () => {
        const { store, leases } = await open();
        const lapsed = (await leases.tryAcquire(key, "t-outage", 20))!;
        await eventually(async () => (await leases.expired(10))[0], "the lease to expire");
        await expect(store.append(key, msg("during"), undefined, { fence: lapsed })).rejects.toMatchObject({
          code: "FENCED",
        });
        expect(await leases.renew(lapsed, 30_000)).toEqual({ held: true, cancelRequested: false });
        expect(await leases.expired(10)).toEqual([]);
        expect(await leases.holder(key)).toEqual({ taskId: "t-outage", token: 1 });
        await store.append(key, msg("after"), undefined, { fence: lapsed });
        expect(await leases.release(lapsed)).toBe(true);
        expect(await leases.renew(lapsed, 30_000)).toEqual({ held: false, cancelRequested: false });
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

      it("reads a log its caller says starts empty as empty, takes its first batch from seq 1 and refuses one that does not", async () => {
        const { leases, events } = await open();
        const fence = (await leases.tryAcquire(key, "fresh", 30_000))!;
        events.startsEmpty("acme", "fresh");
        expect(await events.lastSeq("acme", "fresh")).toBe(0);
        expect(await events.latestRun("acme", "fresh")).toEqual({ start: 0, ended: false });
        expect(await events.read("acme", "fresh", 0, 10)).toEqual([]);
        await expect(events.append("acme", "fresh", [event(2)], fence)).rejects.toMatchObject({ code: "CORRUPT" });
        await events.append("acme", "fresh", [event(1), event(2, true)], fence);
        expect(await events.read("acme", "fresh", 0, 10)).toEqual([event(1), event(2, true)]);
        expect(await events.latestRun("acme", "fresh")).toEqual({ start: 2, ended: true });
      });

      it("says where the latest run starts (its last final event) and whether it ended, across runs and batches", async () => {
        const { leases, events } = await open();
        const fence = (await leases.tryAcquire(key, "t1", 30_000))!;
        const latest = () => events.latestRun("acme", "t1");
        expect(await latest()).toEqual({ start: 0, ended: false });
        await events.append("acme", "t1", [event(1), event(2)], fence);
        expect(await latest()).toEqual({ start: 0, ended: false });
        await events.append("acme", "t1", [event(3, true)], fence);
        expect(await latest()).toEqual({ start: 3, ended: true });
        // A follow-up turn (the run ended waiting for input): while it runs, the latest run still starts after 3.
        await events.append("acme", "t1", [event(4)], fence);
        expect(await latest()).toEqual({ start: 3, ended: false });
        // A final event inside a batch (a group commit carrying the end of one run and the start of the next).
        await events.append("acme", "t1", [event(5, true), event(6), event(7)], fence);
        expect(await latest()).toEqual({ start: 5, ended: false });
        await events.append("acme", "t1", [event(8), event(9, true)], fence);
        expect(await latest()).toEqual({ start: 9, ended: true });
        expect(await events.latestRun("other", "t1")).toEqual({ start: 0, ended: false });
        expect(await events.latestRun("acme", "t2")).toEqual({ start: 0, ended: false });
      });

      it("frees the lease with a run's last batch where it can, never on a refused batch or a stale fence", async () => {
        const backend = await open();
        const { leases, events } = backend;
        const fence = (await leases.tryAcquire(key, "t1", 30_000))!;
        await events.append("acme", "t1", [event(1)], fence, { endsRun: false });
        expect((await leases.holder(key))?.token).toBe(fence.token);
        // Refused (does not continue the log): nothing written, the lease still held.
        await expect(events.append("acme", "t1", [event(3, true)], fence, { endsRun: true })).rejects.toMatchObject({
          code: "CORRUPT",
        });
        expect((await leases.holder(key))?.token).toBe(fence.token);
        const result = await events.append("acme", "t1", [event(2), event(3, true)], fence, { endsRun: true });
        // PostgreSQL keeps leases and logs in one database and frees the lease in the same commit.
        if (backend.kind === "postgres") expect(result.released).toBe(true);
        if (result.released) expect(await leases.holder(key)).toBeUndefined();
        else expect(await leases.release(fence)).toBe(true);
        expect(await events.read("acme", "t1", 0, 10)).toEqual([event(1), event(2), event(3, true)]);
        const next = (await leases.tryAcquire(key, "t2", 30_000))!;
        expect(next.token).toBeGreaterThan(fence.token);
        // The old holder's last batch is refused: the new lease stays.
        await expect(events.append("acme", "t1", [event(4, true)], fence, { endsRun: true })).rejects.toMatchObject({
          code: "FENCED",
        });
        expect((await leases.holder(key))?.taskId).toBe("t2");
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
