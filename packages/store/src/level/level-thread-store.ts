// The LevelDB backend of ThreadStore: opens the directory (one owning process) and runs each job's module under
// close() tracking. The key layout is described in level-keys.ts.
import { Level } from "level";
import type { ConversationStore } from "../conversation-types.js";
import { bindJobs } from "../core/bind-jobs.js";
import { taskHash } from "../core/digests.js";
import {
  type AppendInput,
  type AppendResult,
  type CommitStats,
  type DeleteThreadOptions,
  type DeleteThreadResult,
  type RetentionQuery,
  type RetentionResult,
  StoreError,
  type TaskRecord,
  type ThreadKey,
  type ThreadMeta,
  type ThreadStore,
} from "../types.js";
import { createLevelContext, type LevelContext, pointRead, scanThreads } from "./level-context.js";
import { conversationJobs } from "./level-conversations.js";
import type { Db } from "./level-keys.js";
import type { LevelBatchOp, LevelKeyspace } from "./level-keyspace.js";
import { pushConfigJobs } from "./level-push-configs.js";
import { createReadGate, poolSize } from "./level-read-gate.js";
import { finishPendingRetention, type LevelRetentionHooks, purgeIdleThreads } from "./level-retention.js";
import { taskJobs } from "./level-tasks.js";
import { finishPendingPurges, threadDeletes } from "./level-thread-deletes.js";
import { importThread } from "./level-thread-import.js";
import { threadReads } from "./level-thread-reads.js";
import { append, importMessages } from "./level-thread-writes.js";
import { claimPath } from "./open-paths.js";

export interface LevelThreadStoreOptions {
  /** The database directory; created if missing. */
  readonly path: string;
  /**
   * fsync every write (group-committed: concurrent writes share one fsync). Without it an
   * acknowledged write survives a crash of the process (it is in the OS page cache) but not
   * an OS crash or a power cut.
   */
  readonly sync?: boolean;
  /** The clock for createdAt/updatedAt and sweeps; Date.now by default. */
  readonly now?: () => number;
  /**
   * How many bytes of writes LevelDB gathers in memory before it writes them to disk as one table file
   * (LevelDB's write_buffer_size): DEFAULT_WRITE_BUFFER_BYTES unless given, from MIN_WRITE_BUFFER_BYTES to
   * MAX_WRITE_BUFFER_BYTES. Under steady writes the process holds up to twice this (a full table being
   * written out while the next fills).
   */
  readonly writeBufferBytes?: number;
}

export const MIN_WRITE_BUFFER_BYTES = 1024 * 1024;
export const MAX_WRITE_BUFFER_BYTES = 1024 * 1024 * 1024;
/**
 * 32 MiB, not LevelDB's 4 MiB. Keys are hashed, so every table a full buffer becomes spans the whole key
 * range and is merged with all of level 1 when it is compacted: the larger the buffer, the more turns each
 * such merge carries. Over 190 000 bridge sends (the store grown to about 150 MB), LevelDB's compaction
 * thread spent 135 us per send in the last 8 s block at 4 MiB, 68 at 16 MiB and 43 at 32 MiB; at 64 MiB,
 * 30, with the libuv pool's inserts into the larger table up from 10 to 22 us (measured with bench/turn-cost.mjs).
 */
export const DEFAULT_WRITE_BUFFER_BYTES = 32 * 1024 * 1024;

function writeBufferBytesOf(options: LevelThreadStoreOptions): number {
  const bytes = options.writeBufferBytes ?? DEFAULT_WRITE_BUFFER_BYTES;
  if (!Number.isInteger(bytes) || bytes < MIN_WRITE_BUFFER_BYTES || bytes > MAX_WRITE_BUFFER_BYTES) {
    throw new RangeError(
      `createLevelThreadStore: writeBufferBytes must be a whole number of bytes from ${MIN_WRITE_BUFFER_BYTES} to ${MAX_WRITE_BUFFER_BYTES}, got ${String(options.writeBufferBytes)}`,
    );
  }
  return bytes;
}

/** ThreadStore and ConversationStore, plus helpers meant for tools (imports, benchmarks), not for the request path. */
export interface LevelThreadStore extends ThreadStore, ConversationStore {
  /** `hooks`: the leases and event log beside the store (createStore passes them), as for purgeIdleThreads. */
  deleteThread(key: ThreadKey, options?: DeleteThreadOptions, hooks?: LevelRetentionHooks): Promise<DeleteThreadResult>;
  /** `extra`: ops of another table of this database written in the same batch (not when the append is a retry). */
  append(key: ThreadKey, input: AppendInput, task?: TaskRecord, extra?: readonly LevelBatchOp[]): Promise<AppendResult>;
  /** `extra`: ops of another table of this database written in the same batch. */
  putTask(task: TaskRecord, extra?: readonly LevelBatchOp[]): Promise<void>;
  /**
   * Appends many messages to one thread in a single atomic batch, without
   * retry detection (the messageId index is still written, so later appends
   * recognise retries of imported messages).
   */
  importMessages(key: ThreadKey, inputs: readonly AppendInput[]): Promise<ThreadMeta>;
  /** The store's database for the tables of other components (the task event log) and its group commit. */
  keyspace(): LevelKeyspace;
  /** The retention pass (level-retention.ts); createStore gives it the leases and the event log as hooks. */
  purgeIdleThreads(query: RetentionQuery, hooks?: LevelRetentionHooks): Promise<RetentionResult>;
  /** Writes, batches and synced batches of the group commit so far (shows how many writes share an fsync). */
  commitStats(): CommitStats;
  /**
   * Settles once the stored threads are read into the store's thread filter (started when it opens): true
   * when the filter then holds them all, false when the scan stopped (the store closed, or a read failed).
   */
  threadsScanned(): Promise<boolean>;
}

/**
 * Opens (creating if needed) a LevelDB-backed ThreadStore. Fails with
 * StoreError LOCKED if another process, or another store in this process,
 * owns the directory.
 */
export async function createLevelThreadStore(options: LevelThreadStoreOptions): Promise<LevelThreadStore> {
  if (typeof options?.path !== "string" || options.path.length === 0) {
    throw new TypeError("createLevelThreadStore needs options.path, the database directory");
  }
  const writeBufferSize = writeBufferBytesOf(options);
  const claim = await claimPath(options.path);
  const db: Db = new Level<Uint8Array, Uint8Array>(claim.realPath, {
    keyEncoding: "view",
    valueEncoding: "view",
    writeBufferSize,
  });
  try {
    await db.open();
  } catch (cause) {
    claim.release();
    const err = cause as { code?: string; cause?: { code?: string } };
    if (err.code === "LEVEL_LOCKED" || err.cause?.code === "LEVEL_LOCKED") {
      throw new StoreError("LOCKED", `the database at ${claim.realPath} is locked by another process`, { cause });
    }
    throw cause;
  }
  const ctx = createLevelContext(db, options.sync === true, options.now ?? Date.now);
  const store = levelThreadStore(ctx, claim);
  try {
    await finishPendingPurges(ctx);
    await finishPendingRetention(ctx);
  } catch (cause) {
    await store.close();
    throw cause;
  }
  return store;
}

function levelThreadStore(ctx: LevelContext, claim: { readonly realPath: string; release(): void }): LevelThreadStore {
  const inFlight = new Set<Promise<unknown>>();
  const rangeGate = createReadGate(poolSize());
  let closing: Promise<void> | undefined;

  /** Tracks the operation so close() can wait for it; refuses new work once closing. */
  function op<T>(name: string, work: () => Promise<T>): Promise<T> {
    if (closing) {
      return Promise.reject(new StoreError("CLOSED", `${name} called after the store at ${claim.realPath} was closed`));
    }
    const p = work();
    inFlight.add(p);
    const forget = () => inFlight.delete(p);
    p.then(forget, forget);
    return p;
  }

  const jobs = {
    append,
    importMessages,
    importThread,
    purgeIdleThreads,
    ...threadReads,
    ...threadDeletes,
    ...taskJobs,
    ...pushConfigJobs,
    ...conversationJobs,
  };
  const keyspace: LevelKeyspace = {
    path: claim.realPath,
    write: (ops) => op("write", () => ctx.write(ops)),
    // Through the read gate: no iterator is opened before the pool can run it (see level-read-gate.ts).
    range: (gte, lt, options = {}) =>
      op("range", () =>
        rangeGate.run(() =>
          ctx.db.iterator({ gte, lt, reverse: options.reverse ?? false, limit: options.limit ?? -1 }).all(),
        ),
      ),
    get: (k) => {
      if (closing) throw new StoreError("CLOSED", `read called after the store at ${claim.realPath} was closed`);
      return pointRead(ctx, k);
    },
    taskDigest: taskHash,
  };
  // The stored threads are read into the filter in the background, from the open on: until it holds them all,
  // appends read the meta as before. A failed scan leaves it incomplete, so nothing is ever answered from it.
  const scanned = op("scanThreads", () => scanThreads(ctx, () => closing !== undefined)).then(
    () => ctx.threads.completed,
    () => false,
  );
  return {
    ...bindJobs<Omit<LevelThreadStore, "close" | "keyspace" | "commitStats" | "threadsScanned">, LevelContext>(
      ctx,
      jobs,
      op,
    ),
    threadsScanned: () => scanned,
    keyspace: () => keyspace,
    commitStats: () => ctx.write.stats(),
    close() {
      closing ??= (async () => {
        // Let accepted operations finish (and their batches land) before the handle goes away.
        await Promise.allSettled([...inFlight]);
        try {
          await ctx.db.close();
        } finally {
          claim.release();
        }
      })();
      return closing;
    },
  };
}
