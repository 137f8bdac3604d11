/**
 * The deadline of one outbound call, held whatever the garbage collector does: a strongly referenced timer
 * aborts a controller. Not AbortSignal.timeout: its timer holds the signal weakly, and AbortSignal.any holds its
 * sources weakly, so a collection can drop the timeout before it fires. `clear()` when the call
 * ends, or the timer keeps its closure (and the process) alive until it fires.
 */
export interface Deadline {
  /** Aborts with a TimeoutError when the time is up, or with the parent's reason when that aborts first. */
  readonly signal: AbortSignal;
  /** True when the signal fired because the time was up (not because the parent aborted). */
  readonly expired: boolean;
  /** Stops the timer and forgets the parent; the signal stays as it is. */
  clear(): void;
}

/** A deadline `ms` from now, aborted early with `parent`. */
export function createDeadline(ms: number, parent?: AbortSignal): Deadline {
  const controller = new AbortController();
  let expired = false;
  const onParent = () => controller.abort(parent?.reason);
  const timer = setTimeout(() => {
    expired = true;
    parent?.removeEventListener("abort", onParent);
    controller.abort(new DOMException(`the deadline of ${ms} ms passed`, "TimeoutError"));
  }, ms);
  if (parent?.aborted) {
    clearTimeout(timer);
    controller.abort(parent.reason);
  } else {
    parent?.addEventListener("abort", onParent, { once: true });
  }
  return {
    signal: controller.signal,
    get expired() {
      return expired;
    },
    clear() {
      clearTimeout(timer);
      parent?.removeEventListener("abort", onParent);
    },
  };
}
