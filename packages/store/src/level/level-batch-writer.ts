import { u64 } from "../core/bytes.js";
import type { CommitStats } from "../replica-types.js";
import type { LevelHealth } from "./level-health.js";
import { type BatchOp, COMMIT_KEY, type Db } from "./level-keys.js";

export interface BatchWriter {
  /** Writes the operations atomically, in the next group commit; settles once that batch is written (and synced). */
  (ops: BatchOp[]): Promise<void>;
  /** The counts so far (a copy). */
  stats(): CommitStats;
  /** The commit counter the last written batch stored (see COMMIT_KEY); set from the store when it opens. */
  commits: number;
}

/**
 * Group commit: while one batch is being written, the batches that arrive
 * meanwhile are merged and written together next. Each caller's operations
 * stay all-or-nothing (they land in one LevelDB batch), and concurrent
 * appends share the fixed cost of a native write instead of paying it each.
 * With `sync`, that fixed cost is an fsync of LevelDB's log, so concurrent
 * turns share one fsync: every caller of a group is acknowledged only after
 * the synced batch that holds its operations has returned.
 * Appends to one thread never meet in a merged batch: they are serialised
 * by the thread's lock, and a caller's promise settles only after its batch.
 * Every write of the store goes through here, one batch at a time: after a failed batch the handle may have lost
 * its place in its log (LevelDB then writes later records where a reopen cannot read them), so the health turns
 * unwritable and every later write is refused without reaching the handle until the store reopens it.
 * Each batch also stores the commit counter, which the open check compares with the count at the last close.
 */
export function createBatchWriter(db: Db, sync: boolean, health: LevelHealth): BatchWriter {
  let queued: { ops: BatchOp[]; resolve: () => void; reject: (error: unknown) => void }[] = [];
  let writing = false;
  let writes = 0;
  let batches = 0;
  let syncedBatches = 0;

  async function flush(): Promise<void> {
    writing = true;
    while (queued.length > 0) {
      const group = queued;
      queued = [];
      if (!health.writable) {
        const refusal = health.refusal();
        for (const g of group) g.reject(refusal);
        continue;
      }
      const ops = group.length === 1 ? group[0]!.ops.slice() : group.flatMap((g) => g.ops);
      ops.push({ type: "put", key: COMMIT_KEY, value: u64(write.commits + 1) });
      try {
        // No options object unless fsync is wanted: abstract-level copies the options into every
        // operation of the batch, a cost an unsynced batch need not pay.
        await (sync ? db.batch(ops, { sync: true }) : db.batch(ops));
        batches++;
        write.commits++;
        if (sync) syncedBatches++;
        for (const g of group) g.resolve();
      } catch (error) {
        const failure = refusedBeforeTheHandle(error) ? error : health.writeFailed(error);
        for (const g of group) g.reject(failure);
      }
    }
    writing = false;
  }

  const write = Object.assign(
    (ops: BatchOp[]) =>
      new Promise<void>((resolve, reject) => {
        if (!health.writable) {
          reject(health.refusal());
          return;
        }
        writes++;
        queued.push({ ops, resolve, reject });
        if (!writing) void flush();
      }),
    { stats: (): CommitStats => ({ writes, batches, syncedBatches }), commits: 0 },
  );
  return write;
}

/** abstract-level's own refusal of an operation (an invalid key or value): nothing reached LevelDB's log. */
function refusedBeforeTheHandle(error: unknown): boolean {
  const code = (error as { code?: unknown })?.code;
  return typeof code === "string" && (code.startsWith("LEVEL_INVALID_") || code === "LEVEL_ENCODING_NOT_SUPPORTED");
}
