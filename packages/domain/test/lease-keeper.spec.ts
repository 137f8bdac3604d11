// The lease keeper on real LevelDB leases and real timers: two keepers on one lease table are two replicas. A held
// lease is renewed before it expires and stays out of a second replica's reach; a lease another replica took over
// is lost and its run stopped; failing renewals are waited out for the outage tolerance, and no longer.
import { StoreError } from "@parley/store";
import type { ContextLeases } from "@parley/store/backends";
import pino from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { RunStop, type TaskRun } from "../src/engine/task-run.js";
import { createLeaseKeeper, type LeaseKeeper, type LeaseKeeperOptions } from "../src/replicas/lease-keeper.js";
import { openLevel, runOf, sleep, tenant, until } from "./fixtures/replica-parts.js";

const logger = pino({ level: "silent" });
/** Long enough that a busy machine's stalls do not lapse a renewed lease, short enough to see several renewals. */
const ttl = 1_000;

describe("the lease keeper", () => {
  const cleanup: (() => Promise<void> | void)[] = [];
  afterEach(async () => {
    for (const c of cleanup.splice(0).reverse()) await c();
  });

  async function backend() {
    const level = await openLevel();
    cleanup.push(() => level.dispose());
    return level;
  }

  function keeperOn(leases: ContextLeases, options: Partial<LeaseKeeperOptions> = {}): LeaseKeeper {
    const keeper = createLeaseKeeper({ leases, logger, leaseTtlMs: ttl, ...options });
    cleanup.push(() => keeper.close());
    return keeper;
  }

  async function held(keeper: LeaseKeeper, run: TaskRun) {
    const { fence } = await keeper.take(run);
    return keeper.hold(run, fence);
  }

  it("renews a held lease before it expires, so a second replica cannot take it", async () => {
    const { leases } = await backend();
    const [a, b] = [keeperOn(leases), keeperOn(leases)];
    const lease = await held(a, runOf("ctx", "task-a"));
    // Two lifetimes: without renewals the lease would have expired long ago.
    await sleep(2 * ttl);
    expect(lease.lost).toBe(false);
    expect(await leases.expired(10)).toEqual([]);
    await expect(b.take(runOf("ctx", "task-b"))).rejects.toMatchObject({ message: expect.stringContaining("task-a") });
    // Freed, the context is anyone's, with no orphan left behind.
    a.forget(lease.run);
    await a.release(lease.fence);
    const { grant } = await b.take(runOf("ctx", "task-b"));
    expect(grant.orphan).toBeUndefined();
  });

  it("stops renewing a run it forgets: its lease expires and another replica takes the context over", async () => {
    const { leases } = await backend();
    const [a, b] = [keeperOn(leases), keeperOn(leases)];
    const lease = await held(a, runOf("ctx", "task-a"));
    a.forget(lease.run);
    await sleep(ttl + 100);
    const { grant } = await b.take(runOf("ctx", "task-b"));
    expect(grant.orphan?.taskId).toBe("task-a");
  });

  it("loses a lease another replica took over and stops its run", async () => {
    const { leases } = await backend();
    const lostRuns: TaskRun[] = [];
    const keeper = keeperOn(leases, { onLost: (run) => lostRuns.push(run) });
    const lease = await held(keeper, runOf("ctx", "task-a"));
    // The replica stalls: its lease expires and another replica's sweep takes it over.
    lease.stopRenewing();
    await sleep(ttl + 100);
    const [expired] = await leases.expired(10);
    expect(await leases.takeOver(expired!, 1_000)).toBeTruthy();
    expect(await lease.renew()).toBe(false);
    expect(lease.lost).toBe(true);
    expect(lostRuns).toEqual([lease.run]);
    expect(lease.run.aborted).toBe(true);
    expect(String(lease.run.abortReason)).toContain("lost the context lease");
    expect(keeper.holdsLive(lease.fence.key, lease.fence.token)).toBe(false);
  });

  it("waits out failing renewals for the outage tolerance and keeps the lease when the database returns", async () => {
    const { leases } = await backend();
    const down: Down = { now: false };
    let outages = 0;
    const keeper = keeperOn(flaky(leases, down), { outageToleranceMs: 1_000, onOutage: () => outages++ });
    const lease = await held(keeper, runOf("ctx", "task-a"));
    down.now = true;
    await until(() => outages >= 2);
    down.now = false;
    // Renewed again, not lost, though the lease lapsed while nobody could renew it.
    await until(async () => (await leases.holder(lease.fence.key))?.taskId === "task-a");
    await sleep(200);
    expect(lease.lost).toBe(false);
    expect(lease.run.aborted).toBe(false);
  });

  it("gives a run up once renewals fail for longer than the outage tolerance", async () => {
    const { leases } = await backend();
    const down: Down = { now: true };
    const keeper = keeperOn(flaky(leases, down), { outageToleranceMs: 200 });
    const lease = await held(keeper, runOf("ctx", "task-a"));
    await until(() => lease.lost, 3 * ttl);
    // Retried through the tolerance after the first failure, not given up at it.
    expect(Date.now() - down.firstFailure!).toBeGreaterThanOrEqual(200);
    expect(down.failures).toBeGreaterThan(1);
    expect(String(lease.run.abortReason)).toContain("lost the context lease");
  });

  it("cancels a held run when a cancel is requested for its task", async () => {
    const { leases } = await backend();
    const keeper = keeperOn(leases);
    const lease = await held(keeper, runOf("ctx", "task-a"));
    expect(await leases.requestCancel({ tenant, contextId: "ctx" }, "task-a")).toBe(true);
    expect(lease.run.abortReason).toBeInstanceOf(RunStop);
    expect((lease.run.abortReason as RunStop).kind).toBe("cancel");
  });

  it("holds a pending run once its inbound append's grant arrives, and fences its writes from then on", async () => {
    const { leases } = await backend();
    const granted: string[] = [];
    const keeper = keeperOn(leases, { onGranted: (lease) => granted.push(lease.run.taskId) });
    const run = runOf("ctx", "task-a");
    keeper.pend(run);
    const request = keeper.writeOptions(run)?.acquire;
    expect(request?.taskId).toBe("task-a");
    // What the store's append does with the request: take the lease, then tell the grant.
    const grant = await leases.tryAcquire({ tenant, contextId: "ctx" }, "task-a", request!.ttlMs);
    request!.granted(grant!);
    expect(granted).toEqual(["task-a"]);
    expect(keeper.writeOptions(run)).toEqual({
      fence: { key: { tenant, contextId: "ctx" }, taskId: "task-a", token: grant!.token },
    });
    expect(keeper.holdsLive({ tenant, contextId: "ctx" }, grant!.token)).toBe(true);
  });

  it("lets a failed final write be retried only while the lease may be live and the database is away", async () => {
    const { leases } = await backend();
    const keeper = keeperOn(leases, { outageToleranceMs: 1_000 });
    const lease = await held(keeper, runOf("ctx", "task-a"));
    expect(keeper.mayRetryEnd(lease.run, new Error("connection refused"), 9, 500)).toBe(true);
    expect(keeper.mayRetryEnd(lease.run, new Error("connection refused"), 9, 1_000)).toBe(false);
    expect(keeper.mayRetryEnd(lease.run, new StoreError("FENCED", "stale"), 1, 0)).toBe(false);
    lease.lose(new Error("gone"));
    expect(keeper.mayRetryEnd(lease.run, new Error("connection refused"), 1, 0)).toBe(false);
  });
});

interface Down {
  now: boolean;
  failures?: number;
  firstFailure?: number;
}

/** The real leases, with renewals failing as a database that is away fails them while `down.now`. */
function flaky(leases: ContextLeases, down: Down): ContextLeases {
  return {
    ...leases,
    renew: (fence, ttlMs) => {
      if (!down.now) return leases.renew(fence, ttlMs);
      down.failures = (down.failures ?? 0) + 1;
      down.firstFailure ??= Date.now();
      return Promise.reject(new Error("connection refused"));
    },
  };
}
