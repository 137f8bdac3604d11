import type { BatchOp } from "./level-keys.js";

/** One operation of an atomic LevelDB batch. */
export type LevelBatchOp = BatchOp;

export interface LevelRangeOptions {
  readonly reverse?: boolean;
  readonly limit?: number;
}

/**
 * What a component that keeps its own tables in the thread store's LevelDB
 * (the task event log) may do there. One process owns the directory, so the
 * component shares the store's handle, its group commit and its close:
 * opening a second database would mean a second lock and a second write queue.
 */
export interface LevelKeyspace {
  /** The database directory, for error messages. */
  readonly path: string;
  /** Writes the operations atomically, merged into the store's next group commit. */
  write(ops: LevelBatchOp[]): Promise<void>;
  /** Entries with gte <= key < lt, in key order (or reversed), at most `limit`. */
  range(gte: Uint8Array, lt: Uint8Array, options?: LevelRangeOptions): Promise<[Uint8Array, Uint8Array][]>;
  /** One record read synchronously from the cache (see the store's pointRead). */
  get(key: Uint8Array): Uint8Array | undefined;
  /** The digest the store files a task's records under: H("parley.task.v1", tenant, taskId). */
  taskDigest(tenant: string, taskId: string): Uint8Array;
}
