// The backend-neutral contract of Parley's durable state. Payloads are opaque
// bytes (the server stores binary-encoded protobuf messages), so the store
// knows nothing of A2A and no backend type leaks out of it.
import type { ConversationStore } from "./conversation-types.js";

/** Identifies one conversation: a tenant's contextId. */
export interface ThreadKey {
  readonly tenant: string;
  readonly contextId: string;
}

/**
 * Who wrote a stored message. `imported` marks a message brought in by an
 * operator from a log Parley did not write itself (an explicit legacy import):
 * its origin is the operator's word, not Parley's record.
 */
export type Provenance = "user" | "agent" | "inter-session" | "imported";

/** A message to append to a thread. */
export interface AppendInput {
  /** The sender-chosen id; with the payload it recognises true retries. */
  readonly messageId: string;
  readonly provenance: Provenance;
  /** The task the message belongs to, if any. */
  readonly taskId?: string;
  /** The raw message, as received or produced (never augmented). */
  readonly payload: Uint8Array;
  /**
   * True when the caller minted `messageId` itself for this very append (a
   * server-generated UUID), so no earlier message can carry it and the retry
   * lookup is skipped and the id is not indexed for later retry lookups
   * (those only ever look up ids that came from clients). Never set it for
   * an id that came from a client.
   */
  readonly fresh?: boolean;
}

/** A message as stored in a thread. */
export interface StoredMessage {
  /** 1 for the first message of the thread, increasing by one. */
  readonly sequence: number;
  readonly messageId: string;
  readonly provenance: Provenance;
  readonly taskId?: string;
  readonly payload: Uint8Array;
  /** Milliseconds since the epoch. */
  readonly createdAt: number;
}

/** A thread's summary (its meta record). */
export interface ThreadMeta {
  /** The original tenant and contextId, exactly as given. */
  readonly tenant: string;
  readonly contextId: string;
  readonly createdAt: number;
  readonly updatedAt: number;
  readonly messageCount: number;
  readonly lastSequence: number;
}

export interface AppendResult {
  readonly message: StoredMessage;
  /** True when this was a true retry: the stored record is returned and nothing was written. */
  readonly duplicate: boolean;
}

/** An A2A task record. The payload is the binary-encoded Task. */
export interface TaskRecord {
  readonly tenant: string;
  readonly taskId: string;
  readonly contextId: string;
  /** The numeric lf.a2a.v1.TaskState. */
  readonly state: number;
  /** The status timestamp in milliseconds; listings sort on it, newest first. */
  readonly updatedAt: number;
  /**
   * The encoded lf.a2a.v1.Task. Of a hidden record, a backend that keeps hidden tasks apart (LevelDB) never
   * reads it, so a caller may compute it on first read (a getter); listUnfinishedTasks then returns that task
   * with an empty payload, and crash recovery rebuilds the task from its thread (its messages carry its id).
   */
  readonly payload: Uint8Array;
  /**
   * True when this write creates the task under an id the caller minted just
   * now, so no earlier record can exist and a store may skip looking for one.
   * Never set it for an id that came from a client.
   */
  readonly created?: boolean;
  /**
   * True while nobody outside the engine can know of this task: a turn whose
   * answer may still be a Message (which no client ever looks up as a task).
   * The store then keeps only what crash recovery needs: getTask and listTasks
   * do not see the task, listUnfinishedTasks does (with `hidden` set, and the
   * payload empty where the backend kept only the task's ids, state and time). A later
   * write of the task replaces it, hidden or not; a hidden write in a terminal
   * state removes it. A backend may instead store it like any other task.
   */
  readonly hidden?: boolean;
}

export interface ListTasksQuery {
  readonly contextId?: string;
  readonly state?: number;
  /** Only tasks with updatedAt >= this. */
  readonly updatedAfter?: number;
  readonly limit: number;
  readonly cursor?: string;
}

export interface TaskPage {
  readonly tasks: TaskRecord[];
  /** Absent on the last page. */
  readonly nextCursor?: string;
  /** How many tasks match the query in all. */
  readonly totalSize: number;
}

export interface PushConfigRecord {
  readonly tenant: string;
  readonly taskId: string;
  readonly configId: string;
  readonly payload: Uint8Array;
}

export type PageOrder = "newest-first" | "oldest-first";

export interface MessagePage {
  readonly messages: StoredMessage[];
  /** Absent when there is nothing more in that direction. */
  readonly nextCursor?: string;
}

export interface ThreadPage {
  readonly threads: ThreadMeta[];
  readonly nextCursor?: string;
}

/** A message as an import writes it: with its original time, and its place given by the order of the import. */
export interface ImportedMessage {
  readonly messageId: string;
  readonly provenance: Provenance;
  readonly taskId?: string;
  readonly payload: Uint8Array;
  /** The original time it was stored, in milliseconds since the epoch (kept as is). */
  readonly createdAt: number;
}

/** What importThread writes into one thread, in one atomic batch. */
export interface ThreadImport {
  /** In thread order; each new one gets the next sequence after the thread's last one. */
  readonly messages: readonly ImportedMessage[];
  /** The thread's tasks (each with the thread's tenant and contextId). */
  readonly tasks: readonly TaskRecord[];
  /**
   * `empty`: refuse (CONFLICT) when the thread already holds a message the
   * import does not carry; `append`: add the import's new messages after the
   * thread's own.
   */
  readonly mode: "empty" | "append";
}

export interface ThreadImportResult {
  /** Messages written. */
  readonly added: number;
  /** Messages skipped because the thread already held them (same messageId and payload bytes). */
  readonly skipped: number;
  readonly tasksAdded: number;
  /** Tasks skipped because the thread already held a task with that id. */
  readonly tasksSkipped: number;
  /** The thread after the import; absent when it has no messages. */
  readonly thread?: ThreadMeta;
}

/**
 * Durable threads, tasks and push configs. Every method is async; every write
 * is one atomic batch. Implementations must be correct with several
 * instances of the server sharing one backend, except where the backend is
 * single-owner by nature (LevelDB), which then refuses a second owner.
 */
export interface ThreadStore {
  /**
   * Appends a message, and in the same atomic batch upserts `task` when given.
   * A true retry (same thread, same messageId, same payload bytes) returns the
   * stored record with `duplicate: true` and writes nothing.
   */
  append(key: ThreadKey, input: AppendInput, task?: TaskRecord): Promise<AppendResult>;
  /** The last `count` messages, oldest first, in O(count). The records may be shared: never modify them. */
  tail(key: ThreadKey, count: number): Promise<StoredMessage[]>;
  /** One page of a thread's messages; the cursor is opaque and bound to the order. */
  readMessages(
    key: ThreadKey,
    options: { readonly order: PageOrder; readonly limit: number; readonly cursor?: string },
  ): Promise<MessagePage>;
  getThread(key: ThreadKey): Promise<ThreadMeta | undefined>;
  /** A tenant's threads, most recently updated first, from an index (never a scan). */
  listThreads(tenant: string, options: { readonly limit: number; readonly cursor?: string }): Promise<ThreadPage>;
  /**
   * Deletes everything of the thread: its messages (and their retry index), its tasks with their push configs
   * and event logs, its sessions (conversations), its listing entries, and what a released lease kept of its
   * task ids. The same purge as retention (ThreadRetention), crash-safe the same way. Refused with StoreError
   * BUSY, deleting nothing, while a task holds the context's lease (or held it and was never ended) or
   * `options.busy` says so. Idempotent: `deleted` is false when nothing of the thread was stored.
   */
  deleteThread(key: ThreadKey, options?: DeleteThreadOptions): Promise<DeleteThreadResult>;
  /** Deletes threads whose last update is older than `olderThanMs` ago; returns how many. */
  sweepThreads(olderThanMs: number): Promise<number>;
  /**
   * Imports messages and tasks into one thread atomically, keeping their
   * original times. Idempotent: a message the thread already holds (same
   * messageId and payload bytes) and a task it already holds are skipped, so
   * importing the same data twice adds nothing. Fails with CONFLICT, writing
   * nothing, when `mode` is `empty` and the thread holds other messages, or
   * when a task id belongs to another thread of the tenant.
   */
  importThread(key: ThreadKey, data: ThreadImport): Promise<ThreadImportResult>;

  /** Inserts or replaces a task record and its indexes atomically. */
  putTask(task: TaskRecord): Promise<void>;
  getTask(tenant: string, taskId: string): Promise<TaskRecord | undefined>;
  listTasks(tenant: string, query: ListTasksQuery): Promise<TaskPage>;
  /** Every task, of every tenant, whose state is not terminal (for crash recovery). */
  listUnfinishedTasks(): Promise<TaskRecord[]>;

  putPushConfig(config: PushConfigRecord): Promise<void>;
  getPushConfig(tenant: string, taskId: string, configId: string): Promise<PushConfigRecord | undefined>;
  listPushConfigs(
    tenant: string,
    taskId: string,
    options: { readonly limit: number; readonly cursor?: string },
  ): Promise<{ readonly configs: PushConfigRecord[]; readonly nextCursor?: string }>;
  /** Returns false when there was no such config. */
  deletePushConfig(tenant: string, taskId: string, configId: string): Promise<boolean>;

  /** Flushes and releases the backend. Later calls fail with a StoreError. */
  close(): Promise<void>;
}

export interface DeleteThreadOptions {
  /** The caller's own busy guard (contexts with a send in flight): such a thread is refused as BUSY. */
  readonly busy?: (key: ThreadKey) => boolean;
}

export interface DeleteThreadResult {
  readonly deleted: boolean;
  readonly messageCount: number;
  /** Tasks deleted with the thread, each with its push configs and event log. */
  readonly tasks: number;
  /** Sessions (conversations) deleted with the thread. */
  readonly conversations: number;
}

/** Why a store operation failed. */
export type StoreErrorCode =
  | "INVALID_ID" // empty, too long, or not valid UTF-16
  | "INVALID_CURSOR" // a cursor that this store did not issue for this query
  | "LOCKED" // another process (or instance) owns the database
  | "CLOSED" // the store was closed
  | "CORRUPT" // a record failed its own consistency checks
  | "CONFLICT" // an import would merge into another thread's data (see importThread)
  | "FENCED" // a write carried a lease fence that is no longer the live lease of its context
  | "BUSY" // a delete met a context whose lease a task holds (or held and never ended)
  | "UNAVAILABLE"; // the store cannot acknowledge writes now (a disk full, damage found at open); see StoreHealth

export class StoreError extends Error {
  override readonly name = "StoreError";
  constructor(
    readonly code: StoreErrorCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** Documented limits on identifiers, in UTF-8 bytes. */
export const idLimits = {
  tenant: 256,
  contextId: 1024,
  messageId: 1024,
  taskId: 1024,
  configId: 1024,
  conversationId: 1024,
} as const;

/** The terminal lf.a2a.v1.TaskState values (COMPLETED, FAILED, CANCELED, REJECTED). */
export const terminalTaskStates: ReadonlySet<number> = new Set([3, 4, 5, 7]);

// ---- retention: deleting idle threads with everything that belongs to them ----

/**
 * One retention pass: the threads whose last message was stored before their tenant's cutoff. A tenant named in
 * `tenants` takes its own cutoff (undefined keeps its threads); every other tenant takes `idleBefore` (absent
 * keeps them). Cutoffs are epoch milliseconds of the caller's clock, compared with ThreadMeta.updatedAt.
 */
export interface RetentionQuery {
  readonly idleBefore?: number;
  readonly tenants?: ReadonlyMap<string, number | undefined>;
  /** Most threads this call deletes; the next call goes on. */
  readonly limit: number;
  /** Contexts the caller knows to be busy (its busy guard): never deleted. */
  readonly busy?: (key: ThreadKey) => boolean;
}

export interface RetentionResult {
  /** Threads deleted, with their messages, tasks, push configs and task event logs. */
  readonly threads: number;
  readonly messages: number;
  readonly tasks: number;
  /** Idle threads left alone: a task holds their lease (or held it and was never ended), or `busy` said so. */
  readonly skipped: number;
  /** True when `limit` stopped the pass: more threads may be due. */
  readonly more: boolean;
}

/**
 * Deletes idle threads, each with its tasks, their push configs and their event logs, walking each tenant's
 * listing index from its oldest thread (never a scan of the live ones). Crash-safe on both backends: a thread
 * is listed and readable whole, or not at all, and an interrupted deletion is finished before the store is used
 * again (LevelDB) or rolled back and redone by the next pass (PostgreSQL). A thread whose context lease is held,
 * or was lost by a replica and not yet ended, is skipped until it is free.
 */
export interface ThreadRetention {
  purgeIdleThreads(query: RetentionQuery): Promise<RetentionResult>;
}

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
