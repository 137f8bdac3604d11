import type { StreamResponse } from "@parley/proto";
import { StoreError } from "@parley/store";
import type { TaskEvent, TaskEventLog, WriteOptions } from "@parley/store/backends";
import { encodeLoggedEvent } from "../engine/logged-events.js";
import type { TaskRun } from "../engine/task-run.js";
import { defaultOutageToleranceMs, lostLease, maxStoreTries, type RunLease } from "./lease-keeper.js";
import { endsRun, leavesWaiting } from "./run-ends.js";

export interface EventLogWriterOptions {
  readonly events: TaskEventLog;
  /** How long a run's events gather before one write to the log; the run's last event goes at once. */
  readonly eventBatchMs?: number;
  /** How long a write is retried while the database is away before the run is given up as lost. */
  readonly outageToleranceMs?: number;
  /**
   * True where one process owns the store: nobody else can find a hidden run's task (TaskRun.visible), so its
   * events are not logged while it stays hidden.
   */
  readonly ownsStore?: boolean;
}

/** Copies each run's published events into the shared task event log, in seq order and in batches. */
export interface EventLogWriter {
  /** Starts logging the run that holds `lease`; earlier runs of its task fill seqs 1..seqBase. */
  open(lease: RunLease, seqBase: number): void;
  /** The seq after which the run's events start in the log. */
  streamStart(run: TaskRun): number;
  /** Queues a published event; called from the run's publish path, so it never blocks. */
  enqueue(run: TaskRun, event: StreamResponse): void;
  /** The run's task was just shown outside the engine: its events are logged from now on, earlier ones first. */
  shown(run: TaskRun): void;
  /**
   * Runs the run's final store write carrying its queued events and `last` (where the store takes events in its
   * writes, ReplicaCoordinator.finalWrite); `landed` runs once that write is durable.
   */
  finalWrite<T>(
    lease: RunLease,
    last: StreamResponse,
    write: (options: WriteOptions) => Promise<T>,
    landed: () => Promise<void>,
  ): Promise<T>;
  /** Writes what gathered now; resolves once everything queued is durable or given up. */
  drain(run: TaskRun): Promise<void>;
  /** Drops what is queued and stops gathering: the run's lease is gone. */
  drop(run: TaskRun): void;
  /** Stops logging the run (nothing queued is written). */
  forget(run: TaskRun): void;
  close(): void;
}

/** One run's way into the log. */
interface RunLog {
  readonly lease: RunLease;
  /** The seq of the event before this run's first. */
  readonly seqBase: number;
  readonly queue: TaskEvent[];
  flushing: Promise<void> | undefined;
  /** The seq of the run's final event once it was logged with the run's final write, else 0. */
  loggedFinal: number;
  /** How many of the run's events (TaskRun.events) went to the queue or were passed over. */
  queued: number;
  /** Whether someone outside the engine could know of the run's task while it ran (see ownsStore). */
  followable: boolean;
  /** The pending start of the next flush, while events gather. */
  gathering: NodeJS.Timeout | undefined;
}

export function createEventLogWriter(options: EventLogWriterOptions): EventLogWriter {
  const { events } = options;
  const batchMs = options.eventBatchMs ?? 20;
  const outageToleranceMs = options.outageToleranceMs ?? defaultOutageToleranceMs;
  const logs = new Map<TaskRun, RunLog>();

  /** Queues the run's published events that are not yet (each once, in seq order). */
  const catchUp = (log: RunLog): void => {
    const run = log.lease.run;
    for (; log.queued < run.events.length; log.queued++) {
      const event = run.events[log.queued]!;
      const seq = log.seqBase + log.queued + 1;
      // Logged already, with the run's final write; or a Message that ends a run nobody was shown: no one can
      // subscribe to its task, which is not kept.
      if (seq === log.loggedFinal || (!run.visible && event.payload.case === "message")) continue;
      log.queue.push({ seq, payload: encodeLoggedEvent(event, run.taskId, run.contextId), final: endsRun(event) });
    }
  };

  const startFlush = (log: RunLog): void => {
    clearTimeout(log.gathering);
    log.gathering = undefined;
    if (log.queue.length > 0) log.flushing ??= flush(log);
  };

  const enqueue = (log: RunLog, event: StreamResponse): void => {
    const { lease } = log;
    if (lease.lost || lease.released || !log.followable) return;
    catchUp(log);
    // A flush in flight takes everything queued meanwhile. Otherwise events gather for a batch window, so a
    // streaming agent costs a write per window, not per chunk; the run's last event goes at once.
    if (log.flushing) return;
    if (endsRun(event)) startFlush(log);
    else log.gathering ??= setTimeout(() => startFlush(log), batchMs);
  };

  const flush = async (log: RunLog): Promise<void> => {
    const { lease } = log;
    const { run, fence } = lease;
    // The first append waits for the end of the tick: the events an agent publishes in one go (a snapshot,
    // then chunks without I/O between them) share one batch instead of the first going alone.
    await new Promise<void>((resolve) => setImmediate(resolve));
    try {
      while (log.queue.length > 0 && !lease.lost) {
        // Everything queued while the previous batch was in flight goes in one transaction.
        const batch = log.queue.splice(0, log.queue.length);
        // The run's last event: the log may free the lease in the same write (then nothing is left to free).
        const final = batch[batch.length - 1]!.final;
        let failingSince: number | undefined;
        for (let attempt = 1; ; attempt++) {
          try {
            const result = await events.append(run.tenant, run.taskId, batch, fence, { endsRun: final });
            if (result.released) lease.markReleased();
            break;
          } catch (error) {
            // An attempt cut off by the outage may have committed before its answer was lost: then this
            // retry is refused for not continuing the log. Only this run writes the task's log under its
            // fence, and a batch is one transaction, so a log that reaches the batch's last seq holds it.
            // A final batch frees the lease in the same transaction, so its retry is FENCED when it landed.
            if (failingSince !== undefined && error instanceof StoreError && (error.code !== "FENCED" || final)) {
              const landed = await events.lastSeq(run.tenant, run.taskId).catch(() => -1);
              if (landed >= batch[batch.length - 1]!.seq) {
                if (error.code === "FENCED") lease.markReleased();
                break;
              }
            }
            failingSince ??= Date.now();
            // A database that is away (a restart, a failover) is waited out for as long as the lease can still
            // be live: the fenced append is safe to retry. A store error (not an outage) gives up after a few tries.
            const outage = !(error instanceof StoreError) && Date.now() - failingSince < outageToleranceMs;
            const fenced = error instanceof StoreError && error.code === "FENCED";
            // FENCED after an outage may only mean the lease lapsed while nobody could renew it: renewing it
            // (possible only while no other replica took it, which bumps the token) makes the append valid again.
            if (fenced && !lease.lost && attempt < maxStoreTries && (await lease.renew())) continue;
            if (fenced || lease.lost || (attempt >= maxStoreTries && !outage)) {
              lease.lose(error);
              return;
            }
            await new Promise((resolve) => setTimeout(resolve, Math.min(50 * attempt, 250)));
          }
        }
      }
    } finally {
      log.flushing = undefined;
    }
  };

  const clear = (log: RunLog): void => {
    clearTimeout(log.gathering);
    log.gathering = undefined;
  };

  return {
    open(lease, seqBase) {
      const run = lease.run;
      logs.set(run, {
        lease,
        seqBase,
        queue: [],
        flushing: undefined,
        loggedFinal: 0,
        queued: 0,
        followable: run.visible || options.ownsStore !== true,
        gathering: undefined,
      });
    },
    streamStart: (run) => logs.get(run)?.seqBase ?? 0,
    enqueue(run, event) {
      const log = logs.get(run);
      if (log) enqueue(log, event);
    },
    shown(run) {
      const log = logs.get(run);
      if (!log || log.followable) return;
      log.followable = true;
      const last = run.events[run.events.length - 1];
      if (last) enqueue(log, last);
    },
    async finalWrite(lease, last, write, landed) {
      const run = lease.run;
      const log = logs.get(run);
      // Earlier batches first: the log takes this run's events in seq order, each batch after the one before.
      while (log?.flushing) await log.flushing;
      if (lease.lost) throw lostLease(run);
      if (!log || lease.released) return write({ fence: lease.fence });
      clear(log);
      const seq = log.seqBase + run.events.length + 1;
      // A run that nobody could follow while it ran and whose task ends for good (its caller gets the task in the
      // answer): its events would never be read, so its end is written without them. A run that ends waiting for
      // input is logged whole: SubscribeToTask finds where its next run starts in the log.
      const unread = !log.followable && !leavesWaiting(last);
      if (!unread) catchUp(log);
      const batch = unread
        ? undefined
        : [
            ...log.queue.splice(0, log.queue.length),
            { seq, payload: encodeLoggedEvent(last, run.taskId, run.contextId), final: true },
          ];
      try {
        const written = await write(batch ? { fence: lease.fence, events: batch } : { fence: lease.fence });
        // Nothing more of this run goes to the log (its final event, published next, was written or passed over).
        log.loggedFinal = seq;
        await landed();
        return written;
      } catch (error) {
        // Nothing of the write landed: the events queued before it are logged as usual (drain flushes them).
        if (batch) log.queue.unshift(...batch.slice(0, -1));
        throw error;
      }
    },
    async drain(run) {
      const log = logs.get(run);
      if (!log) return;
      if (!log.lease.lost && !log.lease.released) startFlush(log);
      while (log.flushing) await log.flushing;
    },
    drop(run) {
      const log = logs.get(run);
      if (!log) return;
      log.queue.length = 0;
      clear(log);
    },
    forget(run) {
      const log = logs.get(run);
      if (log) clear(log);
      logs.delete(run);
    },
    close() {
      for (const log of logs.values()) clear(log);
    },
  };
}
