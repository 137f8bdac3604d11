/**
 * Runs tasks one at a time per key, in arrival order. Only sound because a
 * LevelDB directory has exactly one owning process (see open-paths.ts), so
 * in-process ordering is the whole story for that backend.
 */
export function createKeyedMutex() {
  const tails = new Map<string, Promise<unknown>>();
  return {
    run<T>(key: string, task: () => Promise<T>): Promise<T> {
      const previous = tails.get(key);
      // Nobody holds the key: start now rather than a microtask later (most runs, as a thread is rarely contended).
      const result = previous === undefined ? start(task) : previous.then(task, task);
      // The tail settles when this task does, never rejects, and drops its entry once nobody queued behind it,
      // so the map does not grow with every thread ever touched.
      const tail: Promise<unknown> = result.then(
        () => release(key, tail),
        () => release(key, tail),
      );
      tails.set(key, tail);
      return result;
    },
  };

  function release(key: string, tail: Promise<unknown>): undefined {
    if (tails.get(key) === tail) tails.delete(key);
    return undefined;
  }
}

/** Calls the task, a synchronous throw included in the promise as `previous.then(task)` would have it. */
function start<T>(task: () => Promise<T>): Promise<T> {
  try {
    return task();
  } catch (error) {
    return Promise.reject(error);
  }
}
