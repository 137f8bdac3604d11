import { Code, ConnectError } from "@connectrpc/connect";
import type { StreamResponse, Task } from "@parley/proto";

/** The task an event belongs to; a TaskRun is one. */
export interface TaskEventSource {
  readonly tenant: string;
  readonly contextId: string;
  readonly taskId: string;
}

/**
 * Registers `listener` to be called once when a follower's reader goes away (at once when it already has) and
 * returns the function that stops listening: `onAbort` of the handler's context (call-context.ts), which
 * makes no AbortSignal for an in-process call. An AbortSignal is kept until the next mark-compact, whatever
 * holds it (its prototype is swapped when it is made), and with it every listener still on it. The listener may
 * be given the error the stream ends with (the call's deadline passed); without one it ends CANCELED.
 */
export type GoneWatch = (listener: (why?: ConnectError) => void) => () => void;

/** Why a run was stopped from outside its agent: the turn runner ends it CANCELED or FAILED by this. */
export class RunStop extends Error {
  constructor(
    readonly kind: "cancel" | "shutdown",
    message: string,
  ) {
    super(message);
  }
}

/**
 * The live state of one running task: its current snapshot and the append-only
 * log of every event it published. Subscribers keep only an index into the
 * shared log, so a late subscriber replays from the first event and any number
 * of subscribers cost one log; the log is dropped with the run when it ends.
 */
export class TaskRun implements TaskEventSource {
  readonly events: StreamResponse[] = [];
  /**
   * Whether anyone outside the engine may know of this task: its caller was
   * handed it (a stream, returnImmediately, a push config, a continued task)
   * or someone asked for it (GetTask, CancelTask, SubscribeToTask). A run that
   * is not visible and ends with a Message leaves no task behind: the store
   * keeps only its turn-in-flight record while it runs.
   */
  visible = true;
  /**
   * Whether the store holds only the run's turn-in-flight record (TaskRecord.hidden), not its task: a hidden run's
   * task, and on a store one process owns (ReplicaCoordinator.ownsUnfinishedTasks) a new task handed to its caller
   * too, since there every reader of a running task asks this process, which answers from the run. A listing
   * writes the task first (Engine.revealRunning); the run's outcome writes it in any case.
   */
  storedHidden = false;
  /**
   * Made when the agent first asks for its signal: an AbortController and its signal are costly to make
   * and to collect (see GoneWatch), and most agents never look at it. abort() fires it when it exists.
   */
  private controller: AbortController | undefined;
  private stopped = false;
  private stopReason: unknown;
  /** Resolves when the run has ended (terminal or interrupted state, or a direct message). */
  readonly settled: Promise<void>;
  private settle!: () => void;
  /**
   * Settles at the next publish or at the end; made when a follower first waits for it (most runs have no
   * follower at all: a promise and its resolver per event were made for nobody).
   */
  private changed: Promise<void> | undefined;
  private wake: (() => void) | undefined;
  private ended = false;
  private interruptRequested = false;

  constructor(
    readonly tenant: string,
    readonly contextId: string,
    public task: Task,
    /** The inbound message that started this run, to recognise a retry while it runs. */
    readonly trigger: { readonly messageId: string; readonly payload: Uint8Array },
    /** Sees every event as it is published (push delivery); must not throw or block. */
    private readonly listener?: (run: TaskRun, event: StreamResponse) => void,
  ) {
    this.settled = new Promise((resolve) => {
      this.settle = resolve;
    });
  }

  get taskId(): string {
    return this.task.id;
  }

  get finished(): boolean {
    return this.ended;
  }

  /** Whether the run was stopped (cancel, shutdown, agent timeout, a lost lease): the turn stops reading its agent. */
  get aborted(): boolean {
    return this.stopped;
  }

  /** Why the run was stopped (the reason its signal fires with); undefined while it was not. */
  get abortReason(): unknown {
    return this.stopReason;
  }

  /** The signal the agent is handed: fires with the reason when the run is stopped. */
  get signal(): AbortSignal {
    if (this.controller === undefined) {
      this.controller = new AbortController();
      if (this.stopped) this.controller.abort(this.stopReason);
    }
    return this.controller.signal;
  }

  /** Stops the run's agent with `reason`, as AbortController.abort does: the first reason stays. */
  abort(reason: unknown): void {
    if (this.stopped) return;
    this.stopped = true;
    this.stopReason = reason;
    this.controller?.abort(reason);
  }

  /** Stops the agent; the task ends CANCELED. */
  cancel(why: string): void {
    if (!this.ended) this.abort(new RunStop("cancel", why));
  }

  /** Stops the agent because the server shuts down (`why` says how); the task ends FAILED (interrupted). */
  interrupt(why = "the server shut down"): void {
    this.interruptRequested = true;
    if (!this.ended) this.abort(new RunStop("shutdown", why));
  }

  /** Whether the server asked the run to stop for its shutdown (also after the run was stopped otherwise). */
  get interrupted(): boolean {
    return this.interruptRequested;
  }

  private nextChange(): Promise<void> {
    this.changed ??= new Promise((resolve) => {
      this.wake = resolve;
    });
    return this.changed;
  }

  /** Settles the followers' wait, if any: the next wait gets a new promise. */
  private changedNow(): void {
    const wake = this.wake;
    this.changed = undefined;
    this.wake = undefined;
    wake?.();
  }

  publish(event: StreamResponse): void {
    if (this.ended) throw new Error(`task ${this.taskId} published an event after it ended`);
    this.events.push(event);
    this.listener?.(this, event);
    this.changedNow();
  }

  end(): void {
    if (this.ended) return;
    this.ended = true;
    this.changedNow();
    this.settle();
  }

  /**
   * Every event from `from` on, then live ones until the run ends. A consumer
   * that falls more than `maxLag` events behind is cut off with an error
   * rather than holding the producer or growing memory without bound.
   * `hold` runs when the reading starts and returns what to run when it ends
   * (a stream count's release): a follower never read holds nothing.
   * `watchGone` hears of the reader going away (see GoneWatch).
   */
  async *follow(
    from: number,
    watchGone: GoneWatch,
    maxLag: number,
    hold?: () => () => void,
  ): AsyncGenerator<StreamResponse> {
    const release = hold?.();
    let next = from;
    // A wait is one promise, settled by the next publish or by the abort. Not Promise.race with one promise that
    // the abort rejects: each race left a reaction on that promise until the stream ended, a few hundred bytes
    // per event of a stream held open.
    let gone = false;
    let goneWith: ConnectError | undefined;
    let stopWaiting: (() => void) | undefined;
    const waitForChange = (resolve: () => void) => {
      stopWaiting = resolve;
      void this.nextChange().then(resolve);
    };
    // Called at once when the reader is already gone.
    const stopWatching = watchGone((why) => {
      gone = true;
      goneWith = why;
      stopWaiting?.();
    });
    try {
      for (;;) {
        while (next < this.events.length) {
          if (this.events.length - next > maxLag) {
            throw new ConnectError(
              `subscriber fell ${this.events.length - next} events behind task ${this.taskId} (limit ${maxLag}); resubscribe to catch up`,
              Code.ResourceExhausted,
            );
          }
          yield this.events[next++]!;
        }
        if (this.ended) return;
        if (!gone) {
          await new Promise<void>(waitForChange);
          stopWaiting = undefined;
        }
        if (gone) throw goneWith ?? new ConnectError("subscriber went away", Code.Canceled);
      }
    } finally {
      stopWatching();
      release?.();
    }
  }
}
