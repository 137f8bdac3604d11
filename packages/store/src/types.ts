// The backend-neutral contract of Parley's durable state. Payloads are opaque
// bytes (the server stores binary-encoded protobuf messages), so the store
// knows nothing of A2A and no backend type leaks out of it.

/** Identifies one conversation: a tenant's contextId. */
export interface ThreadKey {
  readonly tenant: string;
  readonly contextId: string;
}

/** Who wrote a stored message. */
export type Provenance = "user" | "agent" | "inter-session";

/** A message to append to a thread. */
export interface AppendInput {
  /** The sender-chosen id; with the payload it recognises true retries. */
  readonly messageId: string;
  readonly provenance: Provenance;
  /** The task the message belongs to, if any. */
  readonly taskId?: string;
  /** The raw message, as received or produced (never augmented). */
  readonly payload: Uint8Array;
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
  readonly payload: Uint8Array;
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
  /** The last `count` messages, oldest first, in O(count). */
  tail(key: ThreadKey, count: number): Promise<StoredMessage[]>;
  /** One page of a thread's messages; the cursor is opaque and bound to the order. */
  readMessages(
    key: ThreadKey,
    options: { readonly order: PageOrder; readonly limit: number; readonly cursor?: string },
  ): Promise<MessagePage>;
  getThread(key: ThreadKey): Promise<ThreadMeta | undefined>;
  /** A tenant's threads, most recently updated first, from an index (never a scan). */
  listThreads(tenant: string, options: { readonly limit: number; readonly cursor?: string }): Promise<ThreadPage>;
  /** Deletes the thread, its messages and every index entry. Idempotent. */
  deleteThread(key: ThreadKey): Promise<{ readonly deleted: boolean; readonly messageCount: number }>;
  /** Deletes threads whose last update is older than `olderThanMs` ago; returns how many. */
  sweepThreads(olderThanMs: number): Promise<number>;

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

/** Why a store operation failed. */
export type StoreErrorCode =
  | "INVALID_ID" // empty, too long, or not valid UTF-16
  | "INVALID_CURSOR" // a cursor that this store did not issue for this query
  | "LOCKED" // another process (or instance) owns the database
  | "CLOSED" // the store was closed
  | "CORRUPT"; // a record failed its own consistency checks

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
} as const;

/** The terminal lf.a2a.v1.TaskState values (COMPLETED, FAILED, CANCELED, REJECTED). */
export const terminalTaskStates: ReadonlySet<number> = new Set([3, 4, 5, 7]);
