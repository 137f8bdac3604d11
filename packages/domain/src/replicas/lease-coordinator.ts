import { fromBinary } from "@bufbuild/protobuf";
import { type StreamResponse, type Task, TaskSchema } from "@parley/proto";
import type { ContextLeases, FencedThreadStore, TaskEventLog, WriteOptions } from "@parley/store/backends";
import type { Logger } from "pino";
import type { ReplicaCoordinator } from "../engine/replica-coordinator.js";
import { isCutOffByLostRun } from "../engine/task-model.js";
import type { TaskRun } from "../engine/task-run.js";
import { createEventLogWriter, type EventLogWriter } from "./event-log-writer.js";
import { createLeaseKeeper, type HeldLease, type LeaseKeeper, lostLease } from "./lease-keeper.js";
import { createReplicaSweeper, type ReplicaSweeper } from "./replica-sweeper.js";
import { endsRun } from "./run-ends.js";
import { createTaskEndings, type TaskEndings } from "./task-endings.js";

export { endsRun, leavesWaiting } from "./run-ends.js";

export interface LeaseCoordinatorOptions {
  readonly store: FencedThreadStore;
  readonly leases: ContextLeases;
  readonly events: TaskEventLog;
  readonly logger: Logger;
  /** Lease lifetime; renewed every third of it while the task runs. */
  readonly leaseTtlMs: number;
  /** How often this replica looks for expired leases to take over. */
  readonly sweepIntervalMs: number;
  /** How long the event log of a finished task stays resumable. */
  readonly eventRetentionMs: number;
  /**
   * How long a run waits out a database outage (its event writes and lease renewals are retried, and its
   * lease is renewed after the outage if no other replica took it); a longer outage fails it. Default 60 s.
   */
  readonly outageToleranceMs?: number;
  /**
   * How long a run's events gather before one write to the log (its last event goes at once, with what
   * gathered): an agent streaming n chunks over t ms costs about t / eventBatchMs writes, not n.
   */
  readonly eventBatchMs?: number;
  /** Called for each expired lease this replica took over (the lease takeovers metric). */
  readonly onTakeover?: () => void;
  /** Called at every sweeper tick, beside the lease sweep: the retention pass starts from here when it is due. */
  readonly onSweep?: () => void;
  /**
   * True on a LevelDB backend: one process owns the store (its leases are in-process), so tasks
   * left unfinished at start were cut off by its own last stop.
   */
  readonly ownsUnfinishedTasks?: boolean;
}

/**
 * The replica coordinator of replicas that share one store: the context lease of every run (lease-keeper.ts),
 * the run's events copied into the shared log in order and in batches (event-log-writer.ts), remote cancels,
 * the sweeper that ends the tasks of replicas that died (replica-sweeper.ts), and those ends (task-endings.ts).
 */
export class LeaseCoordinator implements ReplicaCoordinator {
  readonly ownsUnfinishedTasks: boolean;
  readonly onPublish = (run: TaskRun, event: StreamResponse): void => this.writer.enqueue(run, event);
  private readonly keeper: LeaseKeeper;
  private readonly writer: EventLogWriter;
  private readonly endings: TaskEndings;
  private readonly sweeper: ReplicaSweeper;
  /** Ending the task of a lost replica whose lease a run's inbound append took over; awaited before it is freed. */
  private readonly ending = new Map<TaskRun, Promise<void>>();
  private closed = false;

  constructor(private readonly options: LeaseCoordinatorOptions) {
    this.ownsUnfinishedTasks = options.ownsUnfinishedTasks === true;
    const { store, leases, events, logger, leaseTtlMs } = options;
    const tolerance = options.outageToleranceMs !== undefined ? { outageToleranceMs: options.outageToleranceMs } : {};
    this.endings = createTaskEndings({ store, leases, events, logger, leaseTtlMs });
    this.writer = createEventLogWriter({
      events,
      ownsStore: this.ownsUnfinishedTasks,
      ...tolerance,
      ...(options.eventBatchMs !== undefined ? { eventBatchMs: options.eventBatchMs } : {}),
    });
    this.keeper = createLeaseKeeper({
      leases,
      logger,
      leaseTtlMs,
      ...tolerance,
      onLost: (run) => this.writer.drop(run),
      onOutage: () => this.sweeper.sawOutage(),
      onGranted: (lease, grant) => {
        this.writer.open(lease, 0);
        const orphan = grant.orphan;
        // The task of a replica that died holding this context is ended under the new token, beside this run
        // (it has its own record and log); the lease is freed only after that is done.
        if (orphan && orphan.taskId !== lease.run.taskId) {
          const ending = this.endings.endLost(lease.fence.key, orphan.taskId, lease.fence).catch((error: unknown) => {
            logger.warn({ taskId: orphan.taskId, err: error }, "could not end the task of a lost replica");
          });
          this.ending.set(lease.run, ending);
        }
      },
    });
    this.sweeper = createReplicaSweeper({
      leases,
      events,
      logger,
      leaseTtlMs,
      sweepIntervalMs: options.sweepIntervalMs,
      eventRetentionMs: options.eventRetentionMs,
      holdsLive: (key, token) => this.keeper.holdsLive(key, token),
      endLost: (key, taskId, fence) => this.endings.endLost(key, taskId, fence),
      release: (fence) => this.keeper.release(fence),
      ...(options.onTakeover ? { onTakeover: options.onTakeover } : {}),
      ...(options.onSweep ? { onSweep: options.onSweep } : {}),
    });
  }

  /**
   * Takes the context's lease for a new run, or throws CONTEXT_BUSY at once.
   * A lease that expired without being released belonged to a replica that
   * died: its task is ended (FAILED) under the new token before this run starts.
   */
  async acquire(run: TaskRun, continued: boolean): Promise<void> {
    // A new task's first write is its inbound message: where the store can, that append takes the lease in the
    // same statement (see writeOptions), and CONTEXT_BUSY comes from it, with nothing written.
    if (!continued && this.options.store.acquiresInAppend) {
      this.keeper.pend(run);
      return;
    }
    const { fence, grant } = await this.keeper.take(run);
    try {
      if (grant.orphan && grant.orphan.taskId !== run.taskId) {
        await this.endings.endLost(fence.key, grant.orphan.taskId, fence);
      }
      const earlierRuns = continued || grant.orphan?.taskId === run.taskId;
      const seqBase = earlierRuns ? await this.options.events.lastSeq(run.tenant, run.taskId) : 0;
      // A new task's id is fresh: its log is empty, and its first append need not read the log to check that.
      if (!earlierRuns) this.options.events.startsEmpty(run.tenant, run.taskId);
      this.writer.open(this.keeper.hold(run, fence), seqBase);
    } catch (error) {
      await this.keeper.release(fence);
      throw error;
    }
  }

  writeOptions(run: TaskRun): WriteOptions | undefined {
    return this.keeper.writeOptions(run);
  }

  async finalWrite<T>(
    run: TaskRun,
    last: StreamResponse,
    write: (options: WriteOptions | undefined) => Promise<T>,
  ): Promise<T> {
    const lease = this.keeper.get(run);
    // A run that lost its lease writes nothing more, though a renewal in flight may have kept the lease live: its
    // outcome would land and its final event would not. Whoever takes the lease over ends the task (see abandon).
    if (lease?.lost) throw lostLease(run);
    if (!lease || !this.options.store.writesEvents || !endsRun(last)) return write(this.writeOptions(run));
    return this.writer.finalWrite(lease, last, write, () => this.releaseWithFinal(lease));
  }

  /**
   * The run's last event is durable with its outcome: the lease is freed in the same tick as the write's end, so
   * nobody who read the final task finds the context still leased. A lost replica's task being ended under this
   * lease keeps it until finish.
   */
  private async releaseWithFinal(lease: HeldLease): Promise<void> {
    if (this.ending.has(lease.run)) return;
    lease.markReleased();
    lease.stopRenewing();
    await this.keeper.release(lease.fence);
  }

  streamStart(run: TaskRun): number {
    return this.writer.streamStart(run);
  }

  shown(run: TaskRun): void {
    this.writer.shown(run);
  }

  mayRetryEnd(run: TaskRun, error: unknown, attempt: number, failingMs: number): boolean {
    return this.keeper.mayRetryEnd(run, error, attempt, failingMs);
  }

  /**
   * Gives up recording the end of a run whose final write could not land. Its lease is never freed (a freed
   * lease would leave the task unfinished for good): once it expires, the sweep of any replica, this one's
   * too, takes it over and ends the task FAILED with a final event. Resolves with the task once its stored
   * state no longer waits for that (polled every sweep interval), or undefined once `stop()` says so.
   */
  async abandon(run: TaskRun, why: unknown, stop: () => boolean): Promise<Task | undefined> {
    this.keeper.get(run)?.abandon();
    this.options.logger.error(
      { taskId: run.taskId, contextId: run.contextId, err: why },
      "could not record the end of a task; its lease is left to expire, and the replica that takes it over ends the task FAILED",
    );
    for (;;) {
      if (stop() || this.closed) return undefined;
      try {
        const record = await this.options.store.getTask(run.tenant, run.taskId);
        if (!record) return undefined;
        if (!isCutOffByLostRun(record.state)) return fromBinary(TaskSchema, record.payload);
      } catch (error) {
        this.options.logger.debug({ taskId: run.taskId, err: error }, "could not read an abandoned task; retrying");
      }
      await new Promise((resolve) => setTimeout(resolve, this.options.sweepIntervalMs));
    }
  }

  /** Waits for the run's events to be durable, then frees the context. Runs before the run is marked ended. */
  async finish(run: TaskRun): Promise<void> {
    const lease = this.keeper.get(run);
    if (!lease) {
      this.keeper.forget(run);
      return;
    }
    lease.stopRenewing();
    // Events still gathering are written now: a run ends only once its log is durable.
    await this.writer.drain(run);
    await this.ending.get(run);
    this.forget(run);
    if (!lease.lost && !lease.released) await this.keeper.release(lease.fence);
  }

  /** Frees the lease of a run that never started (its send failed or was a retry). */
  async release(run: TaskRun): Promise<void> {
    const lease = this.keeper.get(run);
    const ending = this.ending.get(run);
    this.forget(run);
    if (!lease) return;
    await ending;
    await this.keeper.release(lease.fence);
  }

  private forget(run: TaskRun): void {
    this.keeper.forget(run);
    this.writer.forget(run);
    this.ending.delete(run);
  }

  /**
   * Cancels a task running on another replica: the request is recorded on
   * the lease row and announced on the control channel; the answer is the
   * task once its run has ended. False when no replica runs the task.
   */
  async cancelRemote(tenant: string, task: Task): Promise<Task | undefined> {
    const key = { tenant, contextId: task.contextId };
    const after = await this.options.events.lastSeq(tenant, task.id);
    if (!(await this.options.leases.requestCancel(key, task.id))) return undefined;
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), this.options.leaseTtlMs * 2);
    try {
      for await (const event of this.options.events.subscribe(tenant, task.id, after, controller.signal)) {
        if (event.final) break;
      }
    } finally {
      clearTimeout(timer);
    }
    const record = await this.options.store.getTask(tenant, task.id);
    return record ? fromBinary(TaskSchema, record.payload) : undefined;
  }

  failInterrupted(tenant: string, contextId: string, taskId: string, why: string): Promise<void> {
    return this.endings.failInterrupted(tenant, contextId, taskId, why);
  }

  endWaiting(tenant: string, task: Task): Promise<void> {
    return this.endings.endWaiting(tenant, task);
  }

  /** One sweep pass now (the sweeper's timer runs them every sweepIntervalMs); how many tasks it ended. */
  sweep(): Promise<number> {
    return this.sweeper.sweep();
  }

  async close(): Promise<void> {
    this.closed = true;
    this.sweeper.close();
    this.keeper.close();
    this.writer.close();
  }
}
