/**
 * At most `slots` LevelDB range reads open at once; the others wait here, before their iterator exists.
 *
 * Why: a LevelDB iterator pins the data blocks it has read until it is closed, and its close is queued on the
 * libuv pool behind every other read. A seek's block can hold a multi-megabyte value of another table (a task
 * record, a long reply) too large for LevelDB's block cache, so each iterator holds its own copy, and glibc keeps
 * the arena memory a burst of them took. The pool runs only a few reads at a time anyway (UV_THREADPOOL_SIZE),
 * so waiting here costs no throughput and bounds what open iterators hold to `slots` of them.
 */
export interface ReadGate {
  run<T>(read: () => Promise<T>): Promise<T>;
}

export function createReadGate(slots: number): ReadGate {
  let open = 0;
  const waiting: (() => void)[] = [];
  const release = () => {
    open--;
    waiting.shift()?.();
  };
  return {
    async run(read) {
      if (open >= slots) await new Promise<void>((resolve) => waiting.push(resolve));
      open++;
      try {
        return await read();
      } finally {
        release();
      }
    },
  };
}

/** The libuv pool's size: how many LevelDB reads run at once at most. */
export function poolSize(env: NodeJS.ProcessEnv = process.env): number {
  const n = Number(env.UV_THREADPOOL_SIZE);
  return Number.isInteger(n) && n > 0 ? n : 4;
}
