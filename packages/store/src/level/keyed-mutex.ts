/**
 * Runs tasks one at a time per key, in arrival order. Only sound because a
 * LevelDB directory has exactly one owning process (see open-paths.ts), so
 * in-process ordering is the whole story for that backend.
 */
export function createKeyedMutex() {
  const tails = new Map<string, Promise<unknown>>();
  return {
    run<T>(key: string, task: () => Promise<T>): Promise<T> {
      const previous = tails.get(key) ?? Promise.resolve();
      const result = previous.then(task, task);
      const tail = result.then(
        () => undefined,
        () => undefined,
      );
      tails.set(key, tail);
      // Drop the entry once nobody queued behind us, so the map does not grow with every thread ever touched.
      void tail.then(() => {
        if (tails.get(key) === tail) tails.delete(key);
      });
      return result;
    },
  };
}
