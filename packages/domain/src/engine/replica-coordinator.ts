import type { StreamResponse, Task } from "@parley/proto";
import type { WriteOptions } from "@parley/store/backends";
import type { TaskRun } from "./task-run.js";

/**
 * What running as one of several replicas adds to the engine. The engine
 * always keeps its own in-process busy guard and run table; a coordinator
 * makes those decisions hold across processes (context leases, fenced writes,
 * a shared event log, cancels of runs on other replicas). The engine calls
 * it at fixed points of a run and never asks which kind it has. The shipped
 * one is LeaseCoordinator, on both backends (LevelDB's leases are in-process).
 */
export interface ReplicaCoordinator {
  /**
   * True when this process is the only one on its store: tasks left
   * unfinished at start were cut off by its own last stop, so the engine ends
   * them. With replicas, another one may be running them.
   */
  readonly ownsUnfinishedTasks: boolean;
  /** Takes the context for a new run across replicas, or throws CONTEXT_BUSY. Before anything is stored. */
  acquire(run: TaskRun, continued: boolean): Promise<void>;
  /** Options that every store write of this run passes (a fence), if any. */
  writeOptions(run: TaskRun): WriteOptions | undefined;
  /**
   * Runs the run's final store write (its final task, with its reply) with the options it must pass. Where the
   * store can, those also carry the run's queued events and `last`, its final event, so they land in the same
   * atomic write; `last` must then be published, unchanged, right after `write` settles (logging it again is
   * skipped). Otherwise the events go to the log as they would have.
   */
  finalWrite<T>(
    run: TaskRun,
    last: StreamResponse,
    write: (options: WriteOptions | undefined) => Promise<T>,
  ): Promise<T>;
  /**
   * Sees every event a run publishes, in order; it must only enqueue.
   * Undefined when there is nothing to do, so publishing costs nothing extra.
   */
  readonly onPublish: ((run: TaskRun, event: StreamResponse) => void) | undefined;
  /**
   * The run's task was just shown to someone outside the engine (TaskRun.visible turned true while it runs,
   * before its outcome is written): a coordinator that left a hidden run's events out of the log logs them now.
   */
  shown(run: TaskRun): void;
  /**
   * The run's final write failed (`attempt` tries, the first `failingMs` ago): whether trying it again can
   * still land (the run may still hold the context).
   */
  mayRetryEnd(run: TaskRun, error: unknown, attempt: number, failingMs: number): boolean;
  /**
   * Gives up recording the run's end: the context stays taken until whoever takes it over ends the task (FAILED,
   * with a final event). Resolves with the stored task once that happened, or undefined once `stop()` is true.
   */
  abandon(run: TaskRun, why: unknown, stop: () => boolean): Promise<Task | undefined>;
  /** After the run's last event: waits until its events are durable, then frees the context. */
  finish(run: TaskRun): Promise<void>;
  /** Frees what `acquire` took for a run that never started (its send failed, or was a retry). */
  release(run: TaskRun): Promise<void>;
  /**
   * Cancels a task that runs on another replica and answers with the task
   * once that run ended; undefined when no replica runs it.
   */
  cancelRemote(tenant: string, task: Task): Promise<Task | undefined>;
  /**
   * Ends a task cut off by this process's last stop (FAILED) and appends that end after the events it
   * logged.
   */
  failInterrupted(tenant: string, contextId: string, taskId: string, why: string): Promise<void>;
  /**
   * Records the end of a waiting task (a cancel) and appends it as the log's final event, which ends the
   * streams following the task.
   */
  endWaiting(tenant: string, task: Task): Promise<void>;
  close(): Promise<void>;
}
