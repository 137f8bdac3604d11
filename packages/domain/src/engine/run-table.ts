import type { TaskRun } from "./task-run.js";

/** The key of a (tenant, id) pair: a task's run, or a context's busy guard. */
function scopedKey(tenant: string, id: string): string {
  return `${tenant}\u0000${id}`;
}

/** Whether `run` was started by this very message: a send of it again is a true retry, not a new task. */
export function startedBy(run: TaskRun, trigger: TaskRun["trigger"]): boolean {
  const started = run.trigger;
  return (
    started.messageId === trigger.messageId &&
    started.payload.byteLength === trigger.payload.byteLength &&
    Buffer.compare(started.payload, trigger.payload) === 0
  );
}

/**
 * The engine's running tasks: by task, and by context (the busy guard: one
 * running task per (tenant, contextId)), with the runs freed from the guard
 * whose end is still being written. Only a SendClaim takes and frees a place.
 */
export class RunTable {
  /** Running tasks by tenant + taskId. */
  private readonly runs = new Map<string, TaskRun>();
  /** The running task of each (tenant, contextId): the busy guard. */
  private readonly busy = new Map<string, TaskRun>();
  /** Runs freed from the busy guard whose end is still being written (see leave). */
  private readonly ending = new Map<string, TaskRun>();

  live(tenant: string, taskId: string): TaskRun | undefined {
    return this.runs.get(scopedKey(tenant, taskId));
  }

  busyRun(tenant: string, contextId: string): TaskRun | undefined {
    return this.busy.get(scopedKey(tenant, contextId));
  }

  get size(): number {
    return this.runs.size;
  }

  values(): IterableIterator<TaskRun> {
    return this.runs.values();
  }

  /** Takes the context's busy guard for `run`; synchronous, so concurrent sends see it at once. */
  guard(run: TaskRun): void {
    this.busy.set(scopedKey(run.tenant, run.contextId), run);
  }

  /** Waits for the context's previous run to make its end durable (its lease is freed after that). */
  async previousEnded(run: TaskRun): Promise<void> {
    await this.ending.get(scopedKey(run.tenant, run.contextId))?.settled;
  }

  /** Lists `run` by its task (once its task is stored). */
  add(run: TaskRun): void {
    this.runs.set(scopedKey(run.tenant, run.taskId), run);
  }

  /** Frees the run's busy guard and its place by task; until it ends, a send to its context waits for it. */
  leave(run: TaskRun): void {
    const guardKey = scopedKey(run.tenant, run.contextId);
    if (this.busy.get(guardKey) === run) {
      this.busy.delete(guardKey);
      if (!run.finished) {
        this.ending.set(guardKey, run);
        void run.settled.then(() => {
          if (this.ending.get(guardKey) === run) this.ending.delete(guardKey);
        });
      }
    }
    const runKey = scopedKey(run.tenant, run.taskId);
    if (this.runs.get(runKey) === run) this.runs.delete(runKey);
  }
}
