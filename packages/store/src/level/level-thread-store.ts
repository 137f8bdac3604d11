// The LevelDB backend of ThreadStore: opens the directory (one owning process) and runs each job's module under
// close() tracking. The key layout is described in level-keys.ts.
import { readdir, stat, statfs } from "node:fs/promises";
import { join } from "node:path";
import { Level } from "level";
import type { ConversationStore } from "../conversation-types.js";
import { bindJobs } from "../core/bind-jobs.js";
import { u64 } from "../core/bytes.js";
import { taskHash } from "../core/digests.js";
import type { CommitStats, StoreHealth } from "../replica-types.js";
import {
  type AppendInput,
  type AppendResult,
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
import { createLevelContext, forgetCaches, type LevelContext, pointRead, scanThreads } from "./level-context.js";
import { conversationJobs } from "./level-conversations.js";
import { createLevelHealth } from "./level-health.js";
import { COMMIT_KEY, type Db, KEYSPACE, prefixEnd, SEALED_KEY } from "./level-keys.js";
import type { LevelBatchOp, LevelKeyspace } from "./level-keyspace.js";
import {
  checkValues,
  damagedStore,
  droppedAtOpen,
  openFailure,
  readCloseRecord,
  readDamageFile,
  removeCloseRecord,
  storedCommits,
  writeCloseRecord,
  writeDamageFile,
} from "./level-open-check.js";
import { pushConfigJobs } from "./level-push-configs.js";
import { createReadGate, poolSize } from "./level-read-gate.js";
import { finishPendingRetention, type LevelRetentionHooks, purgeIdleThreads } from "./level-retention.js";
import { type SealMode, sealEncoding, unwrapDecodeError } from "./level-seal.js";
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
  /**
   * Hears each change of the store's health (a write failed, writes resumed, damage found) with what caused it,
   * for the log; the store recovers from write failures by itself (see `health()`).
   */
  readonly onHealth?: (health: StoreHealth, detail?: unknown) => void;
}

export const MIN_WRITE_BUFFER_BYTES = 1024 * 1024;
export const MAX_WRITE_BUFFER_BYTES = 1024 * 1024 * 1024;
/**
 * 32 MiB, not LevelDB's 4 MiB. Keys are hashed, so every table a full buffer becomes spans the whole key
 * range and is merged with all of level 1 when it is compacted: the larger the buffer, the more turns each
 * such merge carries. Past this size compaction gains little and the inserts into the larger table slow
 * down (bench/turn-cost.mjs; the figures are in the commit that set it).
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
  /** Whether writes are acknowledged and the store was found whole (see StoreHealth). */
  health(): StoreHealth;
  /** Settles once the background check of every value and thread (started when the store opens) has run. */
  checked(): Promise<readonly string[]>;
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
  const mode: SealMode = { strict: false };
  const db: Db = new Level<Uint8Array, Uint8Array>(claim.realPath, {
    keyEncoding: "view",
    valueEncoding: sealEncoding(mode),
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
    throw await openFailure(claim.realPath, cause);
  }
  const health = createLevelHealth();
  if (options.onHealth) health.onChange = options.onHealth;
  const ctx = createLevelContext(db, options.sync === true, options.now ?? Date.now, health);
  const store = levelThreadStore(ctx, claim, mode);
  try {
    await checkOpen(ctx, claim.realPath, mode);
    await finishPendingPurges(ctx);
    await finishPendingRetention(ctx);
  } catch (cause) {
    await store.close();
    throw cause;
  }
  return store;
}

/**
 * The checks of an open that LevelDB does not make: the log records it dropped while recovering (only a line in
 * its LOG file says so), and batches missing since the last clean close (a log cut or zeroed after it, which
 * LevelDB reads as a shorter log without a word). A finding is kept in DAMAGE_FILE, and while that file exists
 * the store refuses to open: the operator restores from an export, or removes the file to accept the store.
 */
async function checkOpen(ctx: LevelContext, path: string, mode: SealMode): Promise<void> {
  const dropped = await droppedAtOpen(path);
  ctx.write.commits = storedCommits(ctx);
  const closed = await readCloseRecord(path);
  const findings: string[] = [];
  if (dropped.length > 0) {
    findings.push(`LevelDB dropped damaged records of its write-ahead log while opening: ${dropped.join(" | ")}`);
  }
  if (closed !== undefined && ctx.write.commits < closed) {
    findings.push(
      `${closed - ctx.write.commits} of the ${closed} write batches the store held at its last clean close are ` +
        "missing: its write-ahead log was cut or damaged after that close",
    );
  }
  if (findings.length > 0) await writeDamageFile(path, findings.join("; "));
  await removeCloseRecord(path);
  mode.strict = ctx.db.getSync(SEALED_KEY) !== undefined;
  const damage = await readDamageFile(path);
  if (damage !== undefined) throw damagedStore(path, damage);
  if (!mode.strict) {
    // A new store: every value it will hold is sealed, so a value without the envelope is damage.
    const [any] = await ctx.db.keys({ gte: KEYSPACE, lt: prefixEnd(KEYSPACE), limit: 1 }).all();
    if (any === undefined) {
      await ctx.write([{ type: "put", key: SEALED_KEY, value: new Uint8Array([1]) }]);
      mode.strict = true;
    }
  }
}

/** The first wait before reopening the handle after a failed write, and the longest (it doubles up to there). */
const RECOVER_FIRST_MS = 250;
const RECOVER_MAX_MS = 5_000;
/** Free bytes a reopen needs beyond the write-ahead logs it turns into a table. */
const REOPEN_SPARE_BYTES = 1024 * 1024;

/** Whether the file system has room for a reopen: LevelDB writes the logs' contents into a table when it opens. */
async function roomToReopen(path: string): Promise<boolean> {
  try {
    let logs = 0;
    for (const name of await readdir(path)) {
      if (name.endsWith(".log")) logs += (await stat(join(path, name))).size;
    }
    const fs = await statfs(path);
    return fs.bavail * fs.bsize >= logs + REOPEN_SPARE_BYTES;
  } catch {
    return true;
  }
}

function levelThreadStore(
  ctx: LevelContext,
  claim: { readonly realPath: string; release(): void },
  mode: SealMode,
): LevelThreadStore {
  const inFlight = new Set<Promise<unknown>>();
  const rangeGate = createReadGate(poolSize());
  let closing: Promise<void> | undefined;
  /** Set while the handle is being reopened: new operations wait for it. */
  let reopening: Promise<void> | undefined;
  let recoverTimer: NodeJS.Timeout | undefined;
  let recoverDelay = RECOVER_FIRST_MS;

  /** A handle error as callers see it: a failed checksum as CORRUPT, a handle closed by a failed reopen as UNAVAILABLE. */
  const storeErrorOf = (error: unknown): unknown => {
    const unwrapped = unwrapDecodeError(error);
    if (unwrapped !== error) {
      reportDamage(`a read found ${(unwrapped as Error).message}`);
      return unwrapped;
    }
    if ((error as { code?: string })?.code === "LEVEL_DATABASE_NOT_OPEN" && !closing) return ctx.health.refusal();
    return error;
  };
  const rethrow = (error: unknown): never => {
    throw storeErrorOf(error);
  };

  /** Tracks the operation so close() can wait for it; refuses new work once closing. */
  function op<T>(name: string, work: () => Promise<T>): Promise<T> {
    if (closing) {
      return Promise.reject(new StoreError("CLOSED", `${name} called after the store at ${claim.realPath} was closed`));
    }
    if (reopening) return reopening.then(() => op(name, work));
    const p = work().catch(rethrow);
    inFlight.add(p);
    const forget = () => inFlight.delete(p);
    p.then(forget, forget);
    return p;
  }

  let damageReported = false;
  /** Damage found after the open: kept in DAMAGE_FILE and in the health, once per process. */
  function reportDamage(report: string): void {
    if (damageReported) return;
    damageReported = true;
    ctx.health.damaged(report);
    writeDamageFile(claim.realPath, report).catch((error: unknown) =>
      ctx.health.onChange?.(ctx.health.current(), error),
    );
  }

  // A failed write leaves the handle unwritable; reopen it once the file system has room again, then probe.
  const onHealth = ctx.health.onChange;
  ctx.health.onChange = (health, detail) => {
    onHealth?.(health, detail);
    if (!health.ok && health.condition === "write-failed") scheduleRecovery();
  };
  function scheduleRecovery(): void {
    if (recoverTimer || closing) return;
    recoverTimer = setTimeout(() => {
      recoverTimer = undefined;
      void recover();
    }, recoverDelay);
    recoverTimer.unref();
    recoverDelay = Math.min(recoverDelay * 2, RECOVER_MAX_MS);
  }
  async function recover(): Promise<void> {
    if (closing || ctx.health.writable) return;
    if (!(await roomToReopen(claim.realPath))) return scheduleRecovery();
    let release!: () => void;
    reopening = new Promise<void>((resolve) => (release = resolve));
    let resumed = false;
    try {
      await Promise.allSettled([...inFlight]);
      if (closing) return;
      // LevelDB replays the log into a table when it opens: what the failed write left at its end is dropped there.
      await ctx.db.close();
      await ctx.db.open();
      forgetCaches(ctx);
      const dropped = await droppedAtOpen(claim.realPath);
      const commits = storedCommits(ctx);
      await ctx.db.batch([{ type: "put", key: COMMIT_KEY, value: u64(commits + 1) }], { sync: true });
      ctx.write.commits = commits + 1;
      resumed = true;
      recoverDelay = RECOVER_FIRST_MS;
      ctx.health.writesResumed();
      if (dropped.length > 0) {
        onHealth?.(ctx.health.current(), {
          message: `reopening dropped what the failed write left in LevelDB's log: ${dropped.join(" | ")}`,
        });
      }
    } catch (error) {
      onHealth?.(ctx.health.current(), error);
    } finally {
      reopening = undefined;
      release();
      if (!resumed) scheduleRecovery();
    }
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
      if (reopening) throw ctx.health.refusal();
      try {
        return pointRead(ctx, k);
      } catch (error) {
        throw storeErrorOf(error);
      }
    },
    taskDigest: taskHash,
  };
  // The stored threads are read into the filter in the background, from the open on: until it holds them all,
  // appends read the meta as before. A failed scan leaves it incomplete, so nothing is ever answered from it.
  // Both background reads stop for a reopen too (it waits for every operation in flight); the filter then stays
  // incomplete and the check reports what it read.
  const interrupted = () => closing !== undefined || reopening !== undefined;
  const scanned = op("scanThreads", () => scanThreads(ctx, interrupted)).then(
    () => ctx.threads.completed,
    () => false,
  );
  // Every value's checksum and every thread's count and sequence, read once in the background after the open.
  const checked = op("checkValues", () => checkValues(ctx, mode, interrupted)).then(
    (found) => {
      if (found.length > 0 && !closing) reportDamage(`the check after opening found: ${found.join("; ")}`);
      return found as readonly string[];
    },
    (error: unknown) => {
      if (!closing) reportDamage(`the check after opening could not read the store: ${(error as Error).message}`);
      return [String(error)] as readonly string[];
    },
  );
  return {
    ...bindJobs<
      Omit<LevelThreadStore, "close" | "keyspace" | "commitStats" | "threadsScanned" | "health" | "checked">,
      LevelContext
    >(ctx, jobs, op),
    threadsScanned: () => scanned,
    checked: () => checked,
    health: () => ctx.health.current(),
    keyspace: () => keyspace,
    commitStats: () => ctx.write.stats(),
    close() {
      closing ??= (async () => {
        // Let accepted operations finish (and their batches land) before the handle goes away.
        if (recoverTimer) clearTimeout(recoverTimer);
        await reopening;
        await Promise.allSettled([...inFlight]);
        try {
          await ctx.db.close();
          // The count the next open compares with: batches missing then were lost after this close.
          await writeCloseRecord(claim.realPath, ctx.write.commits).catch(() => undefined);
        } finally {
          claim.release();
        }
      })();
      return closing;
    },
  };
}
