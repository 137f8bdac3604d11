import type { ConversationStore } from "./conversation-types.js";
import type { AppendInput, AppendResult, TaskRecord, ThreadKey, ThreadRetention, ThreadStore } from "./types.js";

// ---- multi-replica pieces: leases, fenced writes, task event logs ----

/**
 * Proof of holding a context's lease. `token` grows by one with every grant
 * of that context, so a write carrying an older token can be refused.
 */
export interface Fence {
  readonly key: ThreadKey;
  readonly taskId: string;
  readonly token: number;
}

/** A granted lease; `orphan` names the task of an expired lease that nobody ended (the caller must end it). */
export interface LeaseGrant extends Fence {
  readonly orphan?: { readonly taskId: string; readonly token: number };
}

/** A lease whose holder stopped renewing it and that was never released. */
export interface ExpiredLease {
  readonly key: ThreadKey;
  readonly taskId: string;
  readonly token: number;
}

export interface RenewResult {
  /** False once the lease was released or passed to another holder: the holder must stop writing. */
  readonly held: boolean;
  /** A cancel was requested for the lease's task (recorded, so a missed notification is seen here). */
  readonly cancelRequested: boolean;
}

/** The live holder of a context, for error messages and cancel routing. */
export interface LeaseHolder {
  readonly taskId: string;
  readonly token: number;
}

/**
 * One in-flight task per context, across every replica sharing the backend.
 * Expiry is judged by the backend's clock, never by the caller's.
 */
export interface ContextLeases {
  /** Grants the lease at once or returns null at once when it is held and not expired. */
  tryAcquire(key: ThreadKey, taskId: string, ttlMs: number): Promise<LeaseGrant | null>;
  /**
   * Extends the lease of `fence`. A lease that lapsed is renewed too while it still carries the fence's token
   * (nobody acquired or took it over since, so no newer fence exists): a holder that could not renew during a
   * database outage keeps its lease when nobody judged it lost. Released or replaced: held is false.
   */
  renew(fence: Fence, ttlMs: number): Promise<RenewResult>;
  /** Frees the context; false when the fence was no longer the live lease. */
  release(fence: Fence): Promise<boolean>;
  holder(key: ThreadKey): Promise<LeaseHolder | undefined>;
  /** Leases past their expiry that were never released, oldest first. */
  expired(limit: number): Promise<ExpiredLease[]>;
  /** Takes an expired lease over (token + 1) so the caller can end its task; null if someone else did. */
  takeOver(lease: ExpiredLease, ttlMs: number): Promise<Fence | null>;
  /** Records a cancel for the context's live task and wakes its holder; false when `taskId` holds no live lease. */
  requestCancel(key: ThreadKey, taskId: string): Promise<boolean>;
  /** Calls `handler` when a cancel is requested for a lease (on any replica); returns the unsubscribe. */
  onCancel(handler: (key: ThreadKey, taskId: string) => void): () => void;
  close(): Promise<void>;
}

/** Write options of the executor: a write with a fence lands only while that fence is the live lease. */
export interface WriteOptions {
  readonly fence?: Fence;
  /**
   * An append that takes the context's lease itself, in the same statement (only where
   * FencedThreadStore.acquiresInAppend; never with a fence): the write happens only when the lease is granted.
   */
  readonly acquire?: LeaseRequest;
  /**
   * Events of the fence's task to append to its event log in the same atomic write (only where
   * FencedThreadStore.writesEvents, and only with a fence): a run's last events land with its final task and
   * reply, or not at all, in one batch instead of two. Their seqs must follow the log's last one, as in
   * TaskEventLog.append. An append that turns out to be a retry (nothing written) still appends them.
   */
  readonly events?: readonly TaskEvent[];
}

/** The lease an append takes for its run (see WriteOptions.acquire). */
export interface LeaseRequest {
  readonly taskId: string;
  readonly ttlMs: number;
  /** Told the grant before the append settles, also when the message turned out to be a retry. */
  granted(grant: LeaseGrant): void;
  /** The error the append fails with when another task holds the lease ("" when it is unknown); nothing is written. */
  busy(holderTaskId: string): Error;
}

/** A ThreadStore whose executor writes can be fenced; writes without a fence behave as ThreadStore's. */
export interface FencedThreadStore extends ThreadStore {
  /** True when append can take the context's lease in the same write (WriteOptions.acquire): PostgreSQL. */
  readonly acquiresInAppend?: boolean;
  /** True when a fenced write can carry task events into the same atomic write (WriteOptions.events): LevelDB. */
  readonly writesEvents?: boolean;
  append(key: ThreadKey, input: AppendInput, task?: TaskRecord, options?: WriteOptions): Promise<AppendResult>;
  putTask(task: TaskRecord, options?: WriteOptions): Promise<void>;
}

/** One event of a task's stream; `seq` is 1 for the task's first event and grows by one. */
export interface TaskEvent {
  readonly seq: number;
  readonly payload: Uint8Array;
  /** The last event of a run: a subscriber stops after it. */
  readonly final: boolean;
}

/** The durable per-task event log every replica replays and follows. */
export interface AppendEventsOptions {
  /**
   * The batch ends the run that holds `fence` (its last event is final): a log kept in the same database as
   * the leases frees the lease in the same transaction, so the run's end costs no extra round trip.
   */
  readonly endsRun?: boolean;
}

export interface AppendEventsResult {
  /** True when the append also freed the fence's lease (see AppendEventsOptions.endsRun); false: the caller frees it. */
  readonly released: boolean;
}

/** See TaskEventLog.latestRun. */
export interface LatestRun {
  /** The seq of the log's last final event, 0 when it has none. */
  readonly start: number;
  /** Whether the log's last event is final. */
  readonly ended: boolean;
}

export interface TaskEventLog {
  /**
   * Appends events with consecutive seqs following the last stored one. Fails
   * with FENCED when the fence is stale, and with CORRUPT when a seq is taken.
   */
  append(
    tenant: string,
    taskId: string,
    events: readonly TaskEvent[],
    fence: Fence,
    options?: AppendEventsOptions,
  ): Promise<AppendEventsResult>;
  /** Events with seq > afterSeq, in order, at most `limit`. */
  read(tenant: string, taskId: string, afterSeq: number, limit: number): Promise<TaskEvent[]>;
  /** The highest stored seq, 0 when there is none. */
  lastSeq(tenant: string, taskId: string): Promise<number>;
  /**
   * Tells the log that `taskId` names a task its caller has just created (a fresh id), whose log is therefore
   * empty: its first append need not read the log to check that its seqs start at 1. A log that checks inside
   * its write (PostgreSQL) ignores it.
   */
  startsEmpty(tenant: string, taskId: string): void;
  /**
   * Where the task's latest run starts, without reading its events: `start` is the seq of the last final event
   * (0 when there is none) and `ended` whether the log ends with it (the latest run is over). A subscriber needs
   * only this to know where to begin; reading the log for it made every SubscribeToTask copy the whole log.
   */
  latestRun(tenant: string, taskId: string): Promise<LatestRun>;
  /** Replays events after `afterSeq`, then follows new ones until a final event or the signal aborts. */
  subscribe(tenant: string, taskId: string, afterSeq: number, signal: AbortSignal): AsyncIterable<TaskEvent>;
  /** Drops the logs of tasks whose last event is final and older than `olderThanMs`; returns how many. */
  sweep(olderThanMs: number): Promise<number>;
  close(): Promise<void>;
}

/**
 * An open backend. PostgreSQL is shared by N replicas, which coordinate through
 * its leases and event logs; LevelDB has one owning process, whose leases live
 * in memory and whose task event log is durable in its own database, so the
 * server runs the same lease and log code on both and a LevelDB server's
 * streams are resumable too (also after the task ended, and after a restart).
 */
export type StoreBackend = LevelBackend | ReplicaBackend;

/** The LevelDB group commit's counts since the store opened: how many writes shared how many batches and fsyncs. */
export interface CommitStats {
  /** Atomic writes callers asked for (one per `write` call). */
  readonly writes: number;
  /** LevelDB batches written; one batch carries every write queued while the previous one was in flight. */
  readonly batches: number;
  /** Batches written with `sync: true` (each ends with one fsync of LevelDB's log); 0 unless synced. */
  readonly syncedBatches: number;
}

/**
 * Whether the store can serve: `ok`, or the condition (`write-failed`: writes fail and are retried by the store
 * itself; `damaged`: the open found data lost or damaged, writes stay refused until an operator acts) and a
 * reason naming it, for readiness and the log.
 */
export type StoreHealth =
  | { readonly ok: true }
  | { readonly ok: false; readonly condition: "write-failed" | "damaged"; readonly reason: string };

/** The embedded single-process backend: threads, tasks, push configs, in-process leases, durable event logs. */
export interface LevelBackend {
  readonly kind: "level";
  readonly store: FencedThreadStore;
  readonly conversations: ConversationStore;
  readonly leases: ContextLeases;
  readonly events: TaskEventLog;
  readonly retention: ThreadRetention;
  /** True when every write is fsynced before it is acknowledged (durability "synced"). */
  readonly synced: boolean;
  /** The group commit's counts so far. */
  commitStats(): CommitStats;
  /** Whether the store accepts writes and was found whole at open (readiness). */
  health(): StoreHealth;
  close(): Promise<void>;
}

/** A backend with everything a replica needs: threads and tasks, leases, and task event logs. */
export interface ReplicaBackend {
  readonly kind: "postgres";
  readonly store: FencedThreadStore;
  readonly conversations: ConversationStore;
  readonly leases: ContextLeases;
  readonly events: TaskEventLog;
  readonly retention: ThreadRetention;
  close(): Promise<void>;
}
