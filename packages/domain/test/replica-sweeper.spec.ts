// The replica sweeper on a real LevelDB backend, real task endings, a real lease keeper and real timers: an expired
// lease of a dead replica is taken over, its task ended FAILED with a final event and its context freed; a live
// lease, or this replica's own run, is left alone; after an outage takeovers wait one lease lifetime.
import { fromBinary } from "@bufbuild/protobuf";
import { TaskSchema, TaskState } from "@parley/proto";
import pino from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { createLeaseKeeper, type LeaseKeeper } from "../src/replicas/lease-keeper.js";
import {
  createReplicaSweeper,
  type ReplicaSweeper,
  type ReplicaSweeperOptions,
} from "../src/replicas/replica-sweeper.js";
import { createTaskEndings } from "../src/replicas/task-endings.js";
import { openLevel, runOf, sleep, taskRecordOf, tenant, until } from "./fixtures/replica-parts.js";

const logger = pino({ level: "silent" });
const ttl = 300;

describe("the replica sweeper", () => {
  const cleanup: (() => Promise<void> | void)[] = [];
  afterEach(async () => {
    for (const c of cleanup.splice(0).reverse()) await c();
  });

  async function setUp(options: Partial<ReplicaSweeperOptions> = {}) {
    const level = await openLevel();
    cleanup.push(() => level.dispose());
    const keeper: LeaseKeeper = createLeaseKeeper({ leases: level.leases, logger, leaseTtlMs: ttl });
    const endings = createTaskEndings({ ...level, logger, leaseTtlMs: ttl });
    const takeovers: string[] = [];
    const sweeper: ReplicaSweeper = createReplicaSweeper({
      leases: level.leases,
      events: level.events,
      logger,
      leaseTtlMs: ttl,
      sweepIntervalMs: 20,
      eventRetentionMs: 600_000,
      holdsLive: (key, token) => keeper.holdsLive(key, token),
      endLost: (key, taskId, fence) => endings.endLost(key, taskId, fence),
      release: (fence) => keeper.release(fence),
      onTakeover: () => takeovers.push("taken"),
      ...options,
    });
    cleanup.push(() => {
      sweeper.close();
      keeper.close();
    });
    /** A task in `state` whose replica took its context's lease for `leaseMs`, then died. */
    const deadReplicaTask = async (contextId: string, state: TaskState, leaseMs = 10) => {
      const record = taskRecordOf(contextId, `task-${contextId}`, state);
      await level.store.putTask(record);
      expect(await level.leases.tryAcquire({ tenant, contextId }, record.taskId, leaseMs)).toBeTruthy();
      return record;
    };
    const stateOf = async (taskId: string) => {
      const record = await level.store.getTask(tenant, taskId);
      return fromBinary(TaskSchema, record!.payload).status?.state;
    };
    return { level, keeper, sweeper, takeovers, deadReplicaTask, stateOf };
  }

  it("takes over a dead replica's expired lease on its own timer: ends the task FAILED and frees the context", async () => {
    const { level, takeovers, deadReplicaTask, stateOf } = await setUp();
    const record = await deadReplicaTask("ctx", TaskState.WORKING);
    await until(() => takeovers.length === 1);
    await until(async () => (await stateOf(record.taskId)) === TaskState.FAILED);
    const [final] = await level.events.read(tenant, record.taskId, 0, 10);
    expect(final?.final).toBe(true);
    await until(async () => (await level.leases.tryAcquire({ tenant, contextId: "ctx" }, "next", 1_000)) !== null);
  });

  it("leaves a live lease and this replica's own running task alone, and a waiting task as it is", async () => {
    const { level, keeper, sweeper, takeovers, deadReplicaTask, stateOf } = await setUp();
    // Another replica's lease, live for far longer than this test.
    const live = await deadReplicaTask("live", TaskState.WORKING, 60_000);
    // This replica's own run whose lease lapsed (its renewer stalled): its renewer, not the sweep, decides.
    const run = runOf("own", "task-own");
    await level.store.putTask(taskRecordOf("own", "task-own", TaskState.WORKING));
    const { fence } = await keeper.take(run);
    keeper.hold(run, fence).stopRenewing();
    // A dead replica's task that waits for input keeps waiting; the context is freed.
    const waiting = await deadReplicaTask("waiting", TaskState.INPUT_REQUIRED);
    await until(() => takeovers.length === 1);
    await sleep(ttl + 100);
    expect(await sweeper.sweep()).toBe(0);
    expect(takeovers).toHaveLength(1);
    expect(await stateOf(live.taskId)).toBe(TaskState.WORKING);
    expect(await stateOf("task-own")).toBe(TaskState.WORKING);
    expect(await stateOf(waiting.taskId)).toBe(TaskState.INPUT_REQUIRED);
    // Once the run is gone from this replica, its expired lease is a dead replica's like any other.
    keeper.forget(run);
    await until(() => takeovers.length === 2);
    await until(async () => (await stateOf("task-own")) === TaskState.FAILED);
  });

  it("calls onSweep at every tick, beside the lease sweep", async () => {
    let ticks = 0;
    await setUp({ onSweep: () => ticks++ });
    await until(() => ticks >= 3);
  });

  it("after an outage, leaves expired leases to their holders for one lease lifetime", async () => {
    const { sweeper, deadReplicaTask, stateOf } = await setUp({ sweepIntervalMs: 60_000 });
    const record = await deadReplicaTask("ctx", TaskState.WORKING);
    sweeper.sawOutage();
    await sleep(20);
    const heldOffAt = Date.now();
    expect(await sweeper.sweep()).toBe(0);
    expect(await stateOf(record.taskId)).toBe(TaskState.WORKING);
    await until(async () => (await sweeper.sweep()) === 1, ttl * 3);
    expect(Date.now() - heldOffAt).toBeGreaterThanOrEqual(ttl - 20);
    expect(await stateOf(record.taskId)).toBe(TaskState.FAILED);
  });

  it("prunes the event logs of tasks that ended longer ago than the retention", async () => {
    const { level, sweeper } = await setUp({ sweepIntervalMs: 60_000, eventRetentionMs: 50 });
    const key = { tenant, contextId: "ctx" };
    const grant = await level.leases.tryAcquire(key, "task-old", 1_000);
    const fence = { key, taskId: "task-old", token: grant!.token };
    await level.events.append(tenant, "task-old", [{ seq: 1, payload: new Uint8Array([1]), final: true }], fence);
    expect(await level.events.lastSeq(tenant, "task-old")).toBe(1);
    await sleep(100);
    await sweeper.sweep();
    expect(await level.events.lastSeq(tenant, "task-old")).toBe(0);
  });
});
