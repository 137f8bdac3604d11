import type { TaskEvent } from "../replica-types.js";
import { StoreError } from "../types.js";
import { checkId } from "./ids.js";

/** Validates a batch: consecutive seqs starting right after `last`, byte payloads. */
export function checkEventBatch(taskId: string, events: readonly TaskEvent[], last: number): void {
  checkId("taskId", taskId);
  if (!Array.isArray(events) || events.length === 0) throw new RangeError("events must be a non-empty array");
  events.forEach((event, i) => {
    if (!(event?.payload instanceof Uint8Array)) throw new TypeError(`events[${i}].payload must be a Uint8Array`);
    if (typeof event.final !== "boolean") throw new TypeError(`events[${i}].final must be a boolean`);
    if (!Number.isSafeInteger(event.seq) || event.seq < 1) {
      throw new RangeError(`events[${i}].seq must be an integer >= 1, got ${String(event.seq)}`);
    }
    if (i > 0 && event.seq !== events[i - 1]!.seq + 1) {
      throw new RangeError(`events[${i}].seq is ${event.seq}; seqs in a batch must be consecutive`);
    }
  });
  if (last >= 0 && events[0]!.seq !== last + 1) {
    throw new StoreError(
      "CORRUPT",
      `task ${taskId} has events up to seq ${last}; an append must start at ${last + 1}, not ${events[0]!.seq}`,
    );
  }
}

export function checkAfterSeq(afterSeq: unknown): number {
  if (typeof afterSeq !== "number" || !Number.isSafeInteger(afterSeq) || afterSeq < 0) {
    throw new RangeError(`afterSeq must be an integer >= 0, got ${String(afterSeq)}`);
  }
  return afterSeq;
}

/** Resolves on abort instead of rejecting, so a follower ends cleanly when its subscriber leaves. */
export function abortPromise(signal: AbortSignal): { promise: Promise<void>; dispose: () => void } {
  let dispose = () => {};
  const promise = new Promise<void>((resolve) => {
    if (signal.aborted) return resolve();
    const onAbort = () => resolve();
    signal.addEventListener("abort", onAbort, { once: true });
    dispose = () => signal.removeEventListener("abort", onAbort);
  });
  return { promise, dispose };
}
