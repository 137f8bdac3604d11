// The backend-neutral contract of Parley's durable state. Payloads are opaque
// bytes (the server stores binary-encoded protobuf messages), so the store
// knows nothing of A2A and no backend type leaks out of it.

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
