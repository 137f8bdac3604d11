/**
 * At most `slots` LevelDB range reads open at once; the others wait here, before their iterator exists.
 *
 * Why: a LevelDB iterator pins the data blocks it has read until it is closed, and its close is queued on the
 * libuv pool behind every other read. A seek reads one block per level and per level-0 file, and such a block
 * can hold a multi-megabyte value of another table (a task record, a long reply) that does not fit LevelDB's
 * block cache, so each iterator reads its own copy in a pool thread. 100 SubscribeToTask calls arriving at once
 * opened 100 iterators that each held ~20 MB: the process's RSS jumped by 2 GB of glibc arena memory, which it
 * kept. The pool runs only a few reads at a time anyway (UV_THREADPOOL_SIZE, 4 by default), so waiting here
 * costs no throughput and bounds what open iterators hold to `slots` of them.
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
