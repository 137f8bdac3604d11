import type { BatchOp, Db } from "./level-keys.js";

/**
 * Group commit: while one batch is being written, the batches that arrive
 * meanwhile are merged and written together next. Each caller's operations
 * stay all-or-nothing (they land in one LevelDB batch), and concurrent
 * appends share the fixed cost of a native write instead of paying it each.
 * Appends to one thread never meet in a merged batch: they are serialised
 * by the thread's lock, and a caller's promise settles only after its batch.
 */
export function createBatchWriter(db: Db, sync: boolean): (ops: BatchOp[]) => Promise<void> {
  let queued: { ops: BatchOp[]; resolve: () => void; reject: (error: unknown) => void }[] = [];
  let writing = false;

  async function flush(): Promise<void> {
    writing = true;
    while (queued.length > 0) {
      const group = queued;
      queued = [];
      const ops = group.length === 1 ? group[0]!.ops : group.flatMap((g) => g.ops);
      try {
        // No options object unless fsync is wanted: abstract-level copies the options into every
        // operation, which made each op of an unsynced batch about three times as expensive (measured).
        await (sync ? db.batch(ops, { sync: true }) : db.batch(ops));
        for (const g of group) g.resolve();
      } catch (error) {
        for (const g of group) g.reject(error);
      }
    }
    writing = false;
  }

  return (ops) =>
    new Promise<void>((resolve, reject) => {
      queued.push({ ops, resolve, reject });
      if (!writing) void flush();
    });
}
