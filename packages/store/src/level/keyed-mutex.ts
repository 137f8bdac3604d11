/**
 * Runs tasks one at a time per key, in arrival order. Only sound because a
 * LevelDB directory has exactly one owning process (see open-paths.ts), so
 * in-process ordering is the whole story for that backend.
 */
export function createKeyedMutex() {
  const tails = new Map<string, Promise<void>>();
  return {
    run<T>(key: string, task: () => Promise<T>): Promise<T> {
      const previous = tails.get(key);
      let settle!: () => void;
      const tail = new Promise<void>((resolve) => {
        settle = resolve;
      });
      // In place before the task starts, so whatever it starts under the same key queues behind it.
      tails.set(key, tail);
      // Nobody holds the key: start now rather than a microtask later (most runs: a thread is rarely contended).
      const result = previous === undefined ? start(task) : previous.then(task, task);
      // Drop the entry once nobody queued behind this task, so the map does not grow with every thread ever
      // touched; then let the next one start.
      const finish = () => {
        if (tails.get(key) === tail) tails.delete(key);
        settle();
      };
      result.then(finish, finish);
      return result;
    },
  };
}

/** Calls the task, a synchronous throw included in the promise as `previous.then(task)` would have it. */
function start<T>(task: () => Promise<T>): Promise<T> {
  try {
    return task();
  } catch (error) {
    return Promise.reject(error);
  }
}
