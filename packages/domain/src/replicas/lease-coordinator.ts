import { fromBinary } from "@bufbuild/protobuf";
import {
  endsTurn,
  isInterruptedState,
  isTerminalState,
  type StreamResponse,
  type Task,
  TaskSchema,
  TaskState,
} from "@parley/proto";
import {
  type ContextLeases,
  type Fence,
  type FencedThreadStore,
  type LeaseGrant,
  StoreError,
  type TaskEvent,
  type TaskEventLog,
  type ThreadKey,
  type WriteOptions,
} from "@parley/store";
import type { Logger } from "pino";
import { decodeLoggedEvent, encodeLoggedEvent } from "../engine/logged-events.js";
import type { ReplicaCoordinator } from "../engine/replica-coordinator.js";
import { interruptedStatus, isCutOffByLostRun, setStatus, statusEvent, taskRecord } from "../engine/task-model.js";
import type { TaskRun } from "../engine/task-run.js";
import { contextBusy } from "../errors.js";

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

interface RunState {
  readonly fence: Fence;
  /** The seq of the event before this run's first: earlier runs of the same task fill 1..seqBase. */
  readonly seqBase: number;
  readonly queue: TaskEvent[];
  flushing: Promise<void> | undefined;
  /** Set when the lease is gone: nothing more of this run may be written. */
  lost: boolean;
  /** Set when the lease was freed with the run's final event (a PostgreSQL log's append, or finalWrite). */
  released: boolean;
  /** The seq of the run's final event once it was logged with the run's final write (finalWrite), else 0. */
  loggedFinal: number;
  /** How many of the run's events (TaskRun.events) went to the queue or were passed over. */
  queued: number;
  /**
   * Whether someone outside the engine could know of the run's task while it ran (TaskRun.visible; see shown).
   * Where nobody else can find a hidden task (one process owns the store), the events of a run that is not
   * are not logged while it stays so.
   */
  followable: boolean;
  /** The pending start of the next flush, while events gather (eventBatchMs). */
  gathering: NodeJS.Timeout | undefined;
  /** Ending the task of a lost replica whose lease this run's append took over; awaited before the lease is freed. */
  ending: Promise<void> | undefined;
  renewer: NodeJS.Timeout | undefined;
  /** When renewals started failing (the database away), or undefined while they succeed. */
  renewFailingSince: number | undefined;
  /** A renewal in flight, so a timer tick and a fenced write's retry share it. */
  renewing: Promise<boolean> | undefined;
}

/** How often a run whose renewal failed tries again, so its lease is renewed soon after the database returns. */
const renewRetryMs = 250;
const defaultOutageToleranceMs = 60_000;

const maxFlushTries = 5;

/** What a run that lost its lease is refused with when it still tries to write. */
const lostLease = (run: TaskRun) =>
  new StoreError("FENCED", `task ${run.taskId} lost the lease of its context; it writes nothing more`);

/** A published event is the last of its run when it ends the run: a final status or a direct reply. */
export function endsRun(event: StreamResponse): boolean {
  const p = event.payload;
  if (p.case === "message") return true;
  if (p.case !== "statusUpdate") return false;
  return endsTurn(p.value.status?.state ?? TaskState.UNSPECIFIED);
}

/**
 * The replica coordinator of replicas that share one store (PostgreSQL): the context lease of every run
 * (acquired before the inbound message is stored, renewed every ttl/3,
 * released after the run's last event is durable: on PostgreSQL in the same statement as that event),
 * the run's events copied
 * into the shared log in order and in batches, remote cancels, and the
 * sweeper that ends the tasks of replicas that died.
 */
export class LeaseCoordinator implements ReplicaCoordinator {
  readonly ownsUnfinishedTasks: boolean;
  readonly onPublish = (run: TaskRun, event: StreamResponse): void => this.enqueue(run, event);
  private readonly runs = new Map<TaskRun, RunState>();
  /** New runs whose lease their inbound append will take (acquiresInAppend). */
  private readonly pending = new Set<TaskRun>();
  private readonly sweeper: NodeJS.Timeout;
  private readonly unsubscribeCancel: () => void;
  private sweeping = false;
  // Times start at -Infinity, not 0. A field that holds a small integer first and a timestamp later (beyond V8's
  // small integers) changes this object's hidden class at the first sweep (2 s into a server's life by default),
  // which throws away the optimized code of every send path that touches the coordinator (measured: send, runTurn
  // and acquire compiled twice).
  private lastEventSweep = Number.NEGATIVE_INFINITY;
  /** Set when this replica saw the database fail; the next successful sweep starts the hold-off below. */
  private sawOutage = false;
  /**
   * No expired lease is taken over before this time: after an outage every holder's lease may have lapsed
   * only because nobody could renew, so the holders get one lease lifetime to renew before they are judged lost.
   */
  private holdOffUntil = Number.NEGATIVE_INFINITY;
  private readonly outageToleranceMs: number;
  private closed = false;

  constructor(private readonly options: LeaseCoordinatorOptions) {
    this.ownsUnfinishedTasks = options.ownsUnfinishedTasks === true;
    this.outageToleranceMs = options.outageToleranceMs ?? defaultOutageToleranceMs;
    // Every run of this replica holds a lease, so a cancel announced for one of them finds it here.
    this.unsubscribeCancel = options.leases.onCancel((key, taskId) => {
      for (const run of this.runs.keys()) {
        if (run.taskId === taskId && run.tenant === key.tenant) run.cancel("canceled");
      }
    });
    this.sweeper = setInterval(() => {
      void this.sweep();
      // Not awaited by the lease sweep: a long retention pass must not delay the takeover of a dead replica's tasks.
      options.onSweep?.();
    }, options.sweepIntervalMs);
    this.sweeper.unref();
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
      this.pending.add(run);
      return;
    }
    const key: ThreadKey = { tenant: run.tenant, contextId: run.contextId };
    const grant = await this.options.leases.tryAcquire(key, run.taskId, this.options.leaseTtlMs);
    if (!grant) {
      // Only to name the running task in the error: without it the answer is still CONTEXT_BUSY.
      const holder = await this.options.leases.holder(key).catch((error: unknown) => {
        this.options.logger.debug({ err: error }, "could not read the holder of a busy context lease");
        return undefined;
      });
      throw contextBusy(run.contextId, holder?.taskId ?? "");
    }
    const fence: Fence = { key, taskId: run.taskId, token: grant.token };
    try {
      if (grant.orphan && grant.orphan.taskId !== run.taskId) await this.endLostTask(key, grant.orphan.taskId, fence);
      const earlierRuns = continued || grant.orphan?.taskId === run.taskId;
      const seqBase = earlierRuns ? await this.options.events.lastSeq(run.tenant, run.taskId) : 0;
      // A new task's id is fresh: its log is empty, and its first append need not read the log to check that.
      if (!earlierRuns) this.options.events.startsEmpty(run.tenant, run.taskId);
      this.hold(run, fence, seqBase);
    } catch (error) {
      await this.releaseLease(fence);
      throw error;
    }
  }

  /** Starts holding a granted lease for the run: its state, and renewals every third of the TTL (faster in an outage). */
  private hold(run: TaskRun, fence: Fence, seqBase: number): RunState {
    const state: RunState = {
      fence,
      seqBase,
      queue: [],
      flushing: undefined,
      lost: false,
      released: false,
      loggedFinal: 0,
      queued: 0,
      followable: run.visible || !this.ownsUnfinishedTasks,
      gathering: undefined,
      renewer: undefined,
      ending: undefined,
      renewFailingSince: undefined,
      renewing: undefined,
    };
    this.runs.set(run, state);
    this.scheduleRenewal(run, state, this.renewIntervalMs());
    return state;
  }

  /** The lease the inbound append of a new run took (acquiresInAppend). */
  private granted(run: TaskRun, grant: LeaseGrant): void {
    this.pending.delete(run);
    const key: ThreadKey = { tenant: run.tenant, contextId: run.contextId };
    const state = this.hold(run, { key, taskId: run.taskId, token: grant.token }, 0);
    const orphan = grant.orphan;
    // The task of a replica that died holding this context is ended under the new token, beside this run
    // (it has its own record and log); the lease is freed only after that is done.
    if (orphan && orphan.taskId !== run.taskId) {
      state.ending = this.endLostTask(key, orphan.taskId, state.fence).catch((error: unknown) => {
        this.options.logger.warn({ taskId: orphan.taskId, err: error }, "could not end the task of a lost replica");
      });
    }
  }

  /** Write options that fence a store write of this run (none for a run without a lease). */
  writeOptions(run: TaskRun): WriteOptions | undefined {
    if (this.pending.has(run)) {
      return {
        acquire: {
          taskId: run.taskId,
          ttlMs: this.options.leaseTtlMs,
          granted: (grant) => this.granted(run, grant),
          busy: (holderTaskId) => contextBusy(run.contextId, holderTaskId),
        },
      };
    }
    const state = this.runs.get(run);
    return state ? { fence: state.fence } : undefined;
  }

  async finalWrite<T>(
    run: TaskRun,
    last: StreamResponse,
    write: (options: WriteOptions | undefined) => Promise<T>,
  ): Promise<T> {
    const state = this.runs.get(run);
    // A run that lost its lease writes nothing more, though a renewal in flight may have kept the lease live: its
    // outcome would land and its final event would not. Whoever takes the lease over ends the task (see abandon).
    if (state?.lost) throw lostLease(run);
    if (!state || !this.options.store.writesEvents || !endsRun(last)) return write(this.writeOptions(run));
    // Earlier batches first: the log takes this run's events in seq order, each batch after the one before.
    while (state.flushing) await state.flushing;
    if (state.lost) throw lostLease(run);
    if (state.released) return write(this.writeOptions(run));
    clearTimeout(state.gathering);
    state.gathering = undefined;
    const seq = state.seqBase + run.events.length + 1;
    // A run that nobody could follow while it ran and whose task ends for good (its caller gets the task in the
    // answer): its events would never be read (nobody has their seqs, a terminal task takes no SubscribeToTask
    // without one), so its end is written without them: three records and their encoding less per turn. A run
    // that ends waiting for input is logged whole: SubscribeToTask finds where its next run starts in the log.
    const unread = !state.followable && !leavesWaiting(last);
    if (!unread) this.catchUp(run, state);
    const batch = unread
      ? undefined
      : [
          ...state.queue.splice(0, state.queue.length),
          { seq, payload: encodeLoggedEvent(last, run.taskId, run.contextId), final: true },
        ];
    try {
      const written = await write(batch ? { fence: state.fence, events: batch } : { fence: state.fence });
      // Nothing more of this run goes to the log (its final event, published next, was written or passed over).
      state.loggedFinal = seq;
      // The run's last event is durable with its outcome: the lease is freed now, in the same tick as the
      // write's end (finish has nothing left to flush), so nobody who read the final task finds the context
      // still leased. A lost replica's task being ended under this lease keeps it until finish.
      if (!state.ending) {
        state.released = true;
        clearTimeout(state.renewer);
        await this.releaseLease(state.fence);
      }
      return written;
    } catch (error) {
      // Nothing of the write landed: the events queued before it are logged as usual (finish flushes them).
      if (batch) state.queue.unshift(...batch.slice(0, -1));
      throw error;
    }
  }

  /** The seq after which this run's events start in the shared log. */
  streamStart(run: TaskRun): number {
    return this.runs.get(run)?.seqBase ?? 0;
  }

  /** Queues a published event for the shared log; called from the run's publish path, so it never blocks. */
  private enqueue(run: TaskRun, event: StreamResponse): void {
    const state = this.runs.get(run);
    if (!state || state.lost || state.released || !state.followable) return;
    this.catchUp(run, state);
    // A flush in flight takes everything queued meanwhile. Otherwise events gather for eventBatchMs, so a
    // streaming agent costs a write per window, not per chunk; the run's last event goes at once.
    if (state.flushing) return;
    if (endsRun(event)) this.startFlush(run, state);
    else state.gathering ??= setTimeout(() => this.startFlush(run, state), this.options.eventBatchMs ?? 20);
  }

  /**
   * The run's task was just shown to someone outside the engine (TaskRun.visible): from now on its events are
   * logged, those it published before first, so a subscriber reads the run from its start.
   */
  shown(run: TaskRun): void {
    const state = this.runs.get(run);
    if (!state || state.followable) return;
    state.followable = true;
    const last = run.events[run.events.length - 1];
    if (last) this.enqueue(run, last);
  }

  /** Queues the run's published events that are not yet (each once, in seq order). */
  private catchUp(run: TaskRun, state: RunState): void {
    for (; state.queued < run.events.length; state.queued++) {
      const event = run.events[state.queued]!;
      const seq = state.seqBase + state.queued + 1;
      // Logged already, with the run's final write; or a Message that ends a run nobody was shown: no one can
      // subscribe to its task, which is not kept.
      if (seq === state.loggedFinal || (!run.visible && event.payload.case === "message")) continue;
      state.queue.push({ seq, payload: encodeLoggedEvent(event, run.taskId, run.contextId), final: endsRun(event) });
    }
  }

  private startFlush(run: TaskRun, state: RunState): void {
    clearTimeout(state.gathering);
    state.gathering = undefined;
    if (state.queue.length > 0) state.flushing ??= this.flush(run, state);
  }

  private async flush(run: TaskRun, state: RunState): Promise<void> {
    // The first append waits for the end of the tick: the events an agent publishes in one go (a snapshot,
    // then chunks without I/O between them) share one batch instead of the first going alone.
    await new Promise<void>((resolve) => setImmediate(resolve));
    try {
      while (state.queue.length > 0 && !state.lost) {
        // Everything queued while the previous batch was in flight goes in one transaction.
        const batch = state.queue.splice(0, state.queue.length);
        // The run's last event: the log may free the lease in the same write (finish then has nothing to do).
        const endsRun = batch[batch.length - 1]!.final;
        let failingSince: number | undefined;
        for (let attempt = 1; ; attempt++) {
          try {
            const result = await this.options.events.append(run.tenant, run.taskId, batch, state.fence, { endsRun });
            if (result.released) state.released = true;
            break;
          } catch (error) {
            // An attempt cut off by the outage may have committed before its answer was lost: then this
            // retry is refused for not continuing the log. Only this run writes the task's log under its
            // fence, and a batch is one transaction, so a log that reaches the batch's last seq holds it.
            // A final batch frees the lease in the same transaction, so its retry is FENCED when it landed.
            if (failingSince !== undefined && error instanceof StoreError && (error.code !== "FENCED" || endsRun)) {
              const landed = await this.options.events.lastSeq(run.tenant, run.taskId).catch(() => -1);
              if (landed >= batch[batch.length - 1]!.seq) {
                if (error.code === "FENCED") state.released = true;
                break;
              }
            }
            failingSince ??= Date.now();
            // A database that is away (a restart, a failover) is waited out for as long as the lease
            // can still be live: the fenced append is safe to retry, and lands or is FENCED once
            // PostgreSQL is back. A store error (not an outage) still gives up after a few tries.
            const outage = !(error instanceof StoreError) && Date.now() - failingSince < this.outageToleranceMs;
            const fenced = error instanceof StoreError && error.code === "FENCED";
            // FENCED after an outage may only mean the lease lapsed while nobody could renew it: renewing
            // it (possible only while no other replica took it, which bumps the token) makes the append valid again.
            if (fenced && !state.lost && attempt < maxFlushTries && (await this.renew(run, state))) continue;
            if (fenced || state.lost || (attempt >= maxFlushTries && !outage)) {
              this.lose(run, state, error);
              return;
            }
            await new Promise((resolve) => setTimeout(resolve, Math.min(50 * attempt, 250)));
          }
        }
      }
    } finally {
      state.flushing = undefined;
    }
  }

  private lose(run: TaskRun, state: RunState, error: unknown): void {
    if (state.lost) return;
    state.lost = true;
    state.queue.length = 0;
    clearTimeout(state.gathering);
    this.options.logger.warn({ taskId: run.taskId, err: error }, "lost the context lease; stopping the task here");
    if (!run.finished) run.abort(new Error("this replica lost the context lease (executor lost)"));
  }

  private renewIntervalMs(): number {
    return Math.max(1, Math.floor(this.options.leaseTtlMs / 3));
  }

  /** The next renewal of a run: every ttl/3, or every 250 ms while the database fails. */
  private scheduleRenewal(run: TaskRun, state: RunState, delayMs: number): void {
    clearTimeout(state.renewer);
    if (state.lost || !this.runs.has(run)) return;
    state.renewer = setTimeout(() => {
      void this.renew(run, state).then(() =>
        this.scheduleRenewal(
          run,
          state,
          state.renewFailingSince === undefined
            ? this.renewIntervalMs()
            : Math.min(renewRetryMs, this.renewIntervalMs()),
        ),
      );
    }, delayMs);
    state.renewer.unref();
  }

  /**
   * Renews the run's lease; true while it is held. A renewal also succeeds on a lease that lapsed during a
   * database outage as long as no replica took it over (that bumps the token, and then this run is lost).
   * Failures (the database away) are retried until `outageToleranceMs` has passed without a success.
   */
  private renew(run: TaskRun, state: RunState): Promise<boolean> {
    if (state.lost) return Promise.resolve(false);
    state.renewing ??= (async () => {
      try {
        const result = await this.options.leases.renew(state.fence, this.options.leaseTtlMs);
        state.renewFailingSince = undefined;
        if (state.lost) return false;
        // A renewal that crossed the run's last write, which freed the lease, finds it gone: that is the end.
        if (state.released) return false;
        if (!result.held) {
          this.lose(run, state, new Error("another replica took the lease over before it was renewed"));
          return false;
        }
        if (result.cancelRequested) run.cancel("canceled");
        return true;
      } catch (error) {
        this.sawOutage = true;
        state.renewFailingSince ??= Date.now();
        const failingMs = Date.now() - state.renewFailingSince;
        if (failingMs >= this.outageToleranceMs) {
          this.lose(run, state, new Error(`the database was unreachable for ${failingMs} ms (outage tolerance)`));
          return false;
        }
        this.options.logger.warn({ taskId: run.taskId, err: error }, "could not renew a context lease; retrying");
        return false;
      } finally {
        state.renewing = undefined;
      }
    })();
    return state.renewing;
  }

  /**
   * The run's final write failed (`attempt` tries, the first `failingMs` ago): true while another try can still
   * land, i.e. the lease may be live (the fence decides) and the failure is the database being away, for up to
   * outageToleranceMs. False once the lease is known lost, or the store refused for another reason a few times.
   */
  mayRetryEnd(run: TaskRun, error: unknown, attempt: number, failingMs: number): boolean {
    const state = this.runs.get(run);
    if (!state || state.lost || state.released || this.closed) return false;
    if (error instanceof StoreError && error.code === "FENCED") return false;
    // As in flush: the store's own refusals are StoreErrors; everything else is the database being away.
    return error instanceof StoreError ? attempt < maxFlushTries : failingMs < this.outageToleranceMs;
  }

  /**
   * Gives up recording the end of a run whose final write could not land. Its lease is never freed (a freed
   * lease would leave the task unfinished for good): once it expires, the sweep of any replica, this one's
   * too, takes it over and ends the task FAILED with a final event. Resolves with the task once its stored
   * state no longer waits for that (polled every sweep interval), or undefined once `stop()` says so.
   */
  async abandon(run: TaskRun, why: unknown, stop: () => boolean): Promise<Task | undefined> {
    const state = this.runs.get(run);
    if (state && !state.lost) {
      state.lost = true;
      state.queue.length = 0;
      clearTimeout(state.gathering);
      clearTimeout(state.renewer);
    }
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
    this.pending.delete(run);
    const state = this.runs.get(run);
    if (!state) return;
    clearTimeout(state.renewer);
    // Events still gathering are written now: a run ends only once its log is durable.
    if (!state.lost && !state.released) this.startFlush(run, state);
    while (state.flushing) await state.flushing;
    await state.ending;
    this.runs.delete(run);
    if (!state.lost && !state.released) await this.releaseLease(state.fence);
  }

  /** Frees the lease of a run that never started (its send failed or was a retry). */
  async release(run: TaskRun): Promise<void> {
    this.pending.delete(run);
    const state = this.runs.get(run);
    if (!state) return;
    clearTimeout(state.renewer);
    clearTimeout(state.gathering);
    this.runs.delete(run);
    await state.ending;
    await this.releaseLease(state.fence);
  }

  /**
   * Gives a lease back. A release that fails leaves the context busy until
   * the lease expires (leaseTtlMs), when any replica's sweeper frees it: worth
   * a warning, not a failure of the run, whose outcome is already stored.
   */
  private async releaseLease(fence: Fence): Promise<void> {
    try {
      await this.options.leases.release(fence);
    } catch (error) {
      this.options.logger.warn(
        { taskId: fence.taskId, contextId: fence.key.contextId, err: error },
        "could not release a context lease; the context stays busy until the lease expires",
      );
    }
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

  /**
   * Ends a task that was running when this process last stopped (a LevelDB process owns its store, so
   * nobody else can be running it): FAILED, with a final event after the events it logged before the
   * crash, so a resume replays them and then ends.
   */
  async failInterrupted(tenant: string, contextId: string, taskId: string, why: string): Promise<void> {
    const key: ThreadKey = { tenant, contextId };
    const grant = await this.options.leases.tryAcquire(key, taskId, this.options.leaseTtlMs);
    if (!grant) return;
    const fence: Fence = { key, taskId, token: grant.token };
    try {
      await this.endLostTask(key, taskId, fence, why);
    } finally {
      await this.options.leases.release(fence).catch(() => {});
    }
  }

  /**
   * Records the end of a task that waits for input (no run holds its context) under the context's
   * lease: the final task, then its final event, which ends the streams that follow the task.
   */
  async endWaiting(tenant: string, task: Task): Promise<void> {
    const key: ThreadKey = { tenant, contextId: task.contextId };
    const grant = await this.options.leases.tryAcquire(key, task.id, this.options.leaseTtlMs);
    if (!grant) throw contextBusy(task.contextId, task.id, "cancel it");
    const fence: Fence = { key, taskId: task.id, token: grant.token };
    try {
      await this.options.store.putTask(taskRecord(tenant, task), { fence });
      await this.appendFinalStatus(tenant, task, fence);
    } finally {
      await this.options.leases.release(fence).catch(() => {});
    }
  }

  /** Appends the task's current status as the final event of its log, unless the log already ended. */
  private async appendFinalStatus(tenant: string, task: Task, fence: Fence): Promise<void> {
    const last = await this.options.events.lastSeq(tenant, task.id);
    const tail = last > 0 ? await this.options.events.read(tenant, task.id, last - 1, 1) : [];
    // A log that ended waiting for input goes on: the task's end is appended after that.
    if (tail[0]?.final && !endsWaiting(tail[0], task)) return;
    await this.options.events.append(
      tenant,
      task.id,
      [{ seq: last + 1, payload: encodeLoggedEvent(statusEvent(task), task.id, task.contextId), final: true }],
      fence,
    );
  }

  /** Ends the task of an expired lease as FAILED and appends its final event, under `fence`. */
  private async endLostTask(
    key: ThreadKey,
    taskId: string,
    fence: Fence,
    why = interruptedStatus(
      "executor lost: the replica running this task stopped renewing its lease; any partial reply was not kept",
      key.contextId,
    ),
  ): Promise<void> {
    const record = await this.options.store.getTask(key.tenant, taskId);
    if (record && isCutOffByLostRun(record.state)) {
      const task = fromBinary(TaskSchema, record.payload);
      setStatus(task, TaskState.FAILED, why);
      await this.options.store.putTask(taskRecord(key.tenant, task), { fence });
      await this.appendFinalStatus(key.tenant, task, fence);
      this.options.logger.warn({ taskId, contextId: key.contextId }, `ended a task as FAILED (${why})`);
    } else if (record && isTerminalState(record.state)) {
      // The run's outcome landed but it lost the lease before its final event did: the log's followers wait for
      // that event, so it is appended here (nothing is appended to a log that ended).
      await this.appendFinalStatus(key.tenant, fromBinary(TaskSchema, record.payload), fence);
    }
  }

  /** Takes over leases whose holders stopped renewing, ends their tasks and frees their contexts. */
  async sweep(): Promise<number> {
    if (this.sweeping) return 0;
    this.sweeping = true;
    let ended = 0;
    try {
      const expired = await this.options.leases.expired(20);
      if (this.sawOutage) {
        // The database is back: leases that lapsed while it was away say nothing about their holders yet.
        this.sawOutage = false;
        this.holdOffUntil = Date.now() + this.options.leaseTtlMs;
        this.options.logger.warn(
          { holdOffMs: this.options.leaseTtlMs },
          "the database is reachable again; expired leases are left to their holders for one lease lifetime",
        );
      }
      for (const lease of Date.now() < this.holdOffUntil ? [] : expired) {
        // This replica's own live run is never judged lost by this replica: its renewer renews the lease.
        if (this.isOwnLiveLease(lease.key, lease.token)) continue;
        const fence = await this.options.leases.takeOver(lease, this.options.leaseTtlMs);
        if (!fence) continue;
        this.options.onTakeover?.();
        try {
          await this.endLostTask(lease.key, lease.taskId, fence);
          ended++;
        } finally {
          await this.releaseLease(fence);
        }
      }
      if (Date.now() - this.lastEventSweep > this.options.eventRetentionMs / 10) {
        this.lastEventSweep = Date.now();
        await this.options.events.sweep(this.options.eventRetentionMs);
      }
    } catch (error) {
      this.sawOutage = true;
      this.options.logger.warn({ err: error }, "lease sweep failed; retrying on the next tick");
    } finally {
      this.sweeping = false;
    }
    return ended;
  }

  private isOwnLiveLease(key: ThreadKey, token: number): boolean {
    for (const [run, state] of this.runs) {
      if (
        !state.lost &&
        state.fence.token === token &&
        run.tenant === key.tenant &&
        state.fence.key.contextId === key.contextId
      ) {
        return true;
      }
    }
    return false;
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.sweeper);
    this.unsubscribeCancel();
    for (const state of this.runs.values()) {
      clearTimeout(state.renewer);
      clearTimeout(state.gathering);
    }
  }
}

/** A run's final event after which its task goes on: it left the task waiting for the client (input, auth). */
export function leavesWaiting(event: StreamResponse): boolean {
  const p = event.payload;
  return p.case === "statusUpdate" && isInterruptedState(p.value.status?.state ?? TaskState.UNSPECIFIED);
}

/** A logged final event that left the task waiting for input: the task goes on after it. */
function endsWaiting(event: TaskEvent, task: Task): boolean {
  return leavesWaiting(decodeLoggedEvent(event.payload, task.id, task.contextId));
}
