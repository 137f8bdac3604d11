// The event log writer on a real LevelDB event log, with leases from a real lease keeper and real timers: a run's
// events gather into fewer appends than events, in seq order; the run's last event is written at once; the final
// write carries what gathered; a hidden run is logged only once shown; a lost lease writes nothing more.
import { TaskState } from "@parley/proto";
import type { TaskEvent, TaskEventLog } from "@parley/store/backends";
import pino from "pino";
import { afterEach, describe, expect, it } from "vitest";
import type { TaskRun } from "../src/engine/task-run.js";
import {
  createEventLogWriter,
  type EventLogWriter,
  type EventLogWriterOptions,
} from "../src/replicas/event-log-writer.js";
import { createLeaseKeeper, type HeldLease } from "../src/replicas/lease-keeper.js";
import {
  loggedText,
  openLevel,
  runOf,
  sleep,
  statusOf,
  taskRecordOf,
  tenant,
  until,
} from "./fixtures/replica-parts.js";

describe("the event log writer", () => {
  const cleanup: (() => Promise<void> | void)[] = [];
  afterEach(async () => {
    for (const c of cleanup.splice(0).reverse()) await c();
  });

  /** A writer on a fresh LevelDB backend; `appends` has the seqs of each append it made, in order. */
  async function setUp(options: Partial<EventLogWriterOptions> = {}) {
    const level = await openLevel();
    cleanup.push(() => level.dispose());
    const appends: number[][] = [];
    const counted: TaskEventLog = {
      ...level.events,
      append: (tenantId, taskId, batch, fence, appendOptions) => {
        appends.push(batch.map((e) => e.seq));
        return level.events.append(tenantId, taskId, batch, fence, appendOptions);
      },
    };
    const writer: EventLogWriter = createEventLogWriter({ events: counted, ...options });
    const keeper = createLeaseKeeper({
      leases: level.leases,
      logger: pino({ level: "silent" }),
      leaseTtlMs: 5_000,
      onLost: (run) => writer.drop(run),
    });
    cleanup.push(() => {
      writer.close();
      keeper.close();
    });
    /** A run of a new task holding its context's lease, logged after `seqBase` events of earlier runs. */
    const start = async (taskId: string, seqBase = 0, visible = true): Promise<HeldLease> => {
      const run = runOf(`ctx-${taskId}`, taskId);
      run.visible = visible;
      const { fence } = await keeper.take(run);
      const lease = keeper.hold(run, fence);
      writer.open(lease, seqBase);
      return lease;
    };
    /** Publishes as the engine does: the run keeps the event, the writer is told. */
    const publish = (run: TaskRun, state: TaskState, text: string) => {
      const event = statusOf(run, state, text);
      run.publish(event);
      writer.enqueue(run, event);
      return event;
    };
    const logged = async (run: TaskRun): Promise<TaskEvent[]> => level.events.read(tenant, run.taskId, 0, 1_000);
    return { level, writer, appends, start, publish, logged };
  }

  it("gathers a streaming run's events into fewer appends, every event once and in seq order", async () => {
    const { writer, appends, start, publish, logged } = await setUp({ eventBatchMs: 10 });
    const { run } = await start("task-a");
    // Bursts of chunks, as an agent streams them, with pauses longer than the batch window between them.
    const bursts = 5;
    const perBurst = 6;
    for (let b = 0; b < bursts; b++) {
      for (let i = 0; i < perBurst; i++) publish(run, TaskState.WORKING, `chunk ${b * perBurst + i}`);
      await sleep(40);
    }
    publish(run, TaskState.COMPLETED, "done");
    await writer.drain(run);
    const chunks = bursts * perBurst;
    const events = await logged(run);
    expect(events.map((e) => e.seq)).toEqual(Array.from({ length: chunks + 1 }, (_, i) => i + 1));
    expect(events.map((e) => loggedText(run, e.payload))).toEqual([
      ...Array.from({ length: chunks }, (_, i) => `chunk ${i}`),
      "done",
    ]);
    expect(events.filter((e) => e.final).map((e) => e.seq)).toEqual([chunks + 1]);
    // A burst is one append, not one per event; several appends, each after the one before.
    expect(appends.length).toBeGreaterThan(1);
    expect(appends.length).toBeLessThanOrEqual(bursts + 1);
    expect(appends.flat()).toEqual(events.map((e) => e.seq));
  });

  it("holds events back for the batch window but writes the run's last event at once, with them", async () => {
    const { writer, appends, start, publish, logged } = await setUp({ eventBatchMs: 10_000 });
    const { run } = await start("task-a");
    publish(run, TaskState.WORKING, "one");
    publish(run, TaskState.WORKING, "two");
    await sleep(100);
    expect(await logged(run)).toEqual([]);
    const asked = Date.now();
    publish(run, TaskState.COMPLETED, "done");
    await until(async () => (await logged(run)).length === 3, 1_000);
    expect(Date.now() - asked).toBeLessThan(1_000);
    expect(appends).toEqual([[1, 2, 3]]);
    await writer.drain(run);
  });

  it("numbers a later run's events after its task's earlier runs", async () => {
    const { level, writer, start, publish, logged } = await setUp({ eventBatchMs: 5 });
    const first = await start("task-a");
    publish(first.run, TaskState.INPUT_REQUIRED, "which one?");
    await writer.drain(first.run);
    writer.forget(first.run);
    await level.leases.release(first.fence);
    const second = await start("task-a", await level.events.lastSeq(tenant, "task-a"));
    expect(writer.streamStart(second.run)).toBe(1);
    publish(second.run, TaskState.COMPLETED, "this one");
    await writer.drain(second.run);
    expect((await logged(second.run)).map((e) => [e.seq, loggedText(second.run, e.payload)])).toEqual([
      [1, "which one?"],
      [2, "this one"],
    ]);
  });

  it("puts what gathered and the final event into the run's final write, and appends nothing itself", async () => {
    const { level, writer, appends, start, publish, logged } = await setUp({ eventBatchMs: 10_000 });
    const lease = await start("task-a");
    const { run } = lease;
    publish(run, TaskState.WORKING, "one");
    publish(run, TaskState.WORKING, "two");
    let landed = 0;
    let carried: readonly TaskEvent[] | undefined;
    const last = statusOf(run, TaskState.COMPLETED, "done");
    await writer.finalWrite(
      lease,
      last,
      (options) => {
        carried = options.events;
        return level.store.putTask(taskRecordOf(run.contextId, run.taskId, TaskState.COMPLETED), options);
      },
      async () => {
        landed++;
      },
    );
    expect(carried?.map((e) => [e.seq, e.final])).toEqual([
      [1, false],
      [2, false],
      [3, true],
    ]);
    expect(landed).toBe(1);
    // The engine publishes the final event next: it is not logged again.
    run.publish(last);
    writer.enqueue(run, last);
    await writer.drain(run);
    expect((await logged(run)).map((e) => loggedText(run, e.payload))).toEqual(["one", "two", "done"]);
    expect(appends).toEqual([]);
  });

  it("logs nothing of a hidden run on a store one process owns until it is shown, then the run from its start", async () => {
    const { writer, start, publish, logged } = await setUp({ eventBatchMs: 5, ownsStore: true });
    const { run } = await start("task-a", 0, false);
    publish(run, TaskState.WORKING, "one");
    publish(run, TaskState.WORKING, "two");
    await sleep(50);
    expect(await logged(run)).toEqual([]);
    run.visible = true;
    writer.shown(run);
    publish(run, TaskState.COMPLETED, "done");
    await writer.drain(run);
    expect((await logged(run)).map((e) => loggedText(run, e.payload))).toEqual(["one", "two", "done"]);
  });

  it("drops what gathered and writes nothing more once the run's lease is lost", async () => {
    const { writer, appends, start, publish, logged } = await setUp({ eventBatchMs: 10_000 });
    const lease = await start("task-a");
    const { run } = lease;
    publish(run, TaskState.WORKING, "one");
    lease.lose(new Error("another replica took the context"));
    publish(run, TaskState.COMPLETED, "done");
    await writer.drain(run);
    expect(await logged(run)).toEqual([]);
    expect(appends).toEqual([]);
    expect(run.aborted).toBe(true);
  });
});
