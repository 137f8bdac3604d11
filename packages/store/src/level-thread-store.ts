/*
 * LevelDB backend of ThreadStore.
 *
 * Key layout (every key is binary; `H(...)` is SHA-256 over a domain tag and
 * the fields, each written as u32 big-endian length + UTF-8 bytes; numbers are
 * u64 big-endian; `inv(t)` is MAX_SAFE_INTEGER - t so that ascending key order
 * is newest first):
 *
 *   parley:v1:t: th                       thread meta (original tenant + contextId, times, counts)
 *   parley:v1:m: th seq                   one message (header + raw payload bytes)
 *   parley:v1:i: th H(messageId)          [(seq, SHA-256 of payload)...] of messages with that id (retries)
 *   parley:v1:l: H(tenant) inv(updated) th   listThreads index, newest first
 *   parley:v1:u: updated th               sweepThreads index, oldest first
 *   parley:v1:x: th                       a deletion that must be finished (crash-safe purge)
 *   parley:v1:k: tk                       task record
 *   parley:v1:d: H(tenant) inv(updated) taskId   listTasks index per tenant (value: state, th)
 *   parley:v1:c: th inv(updated) taskId   listTasks index per context (value: state)
 *   parley:v1:r: tk                       tasks in a non-terminal state
 *   parley:v1:p: tk H(configId)           push notification config
 *
 * with th = H("parley.thread.v1", tenant, contextId) and
 *      tk = H("parley.task.v1", tenant, taskId).
 *
 * Why versioned: a future layout gets its own prefix and migrates explicitly;
 * nothing outside `parley:v1:` is ever read, so keys left by older layouts or
 * other tools (sanitised names, digests under another prefix) cannot be
 * mistaken for a thread. Lookups go through exact keys and indexes written in
 * the same batch as the data, and every record carries its original ids,
 * which are compared on read; a record without a valid meta is never loaded.
 *
 * Why length-prefixed: plain concatenation is ambiguous ("tenant/a"+"b" vs
 * "tenant"+"/ab"), and sanitising ("tenant/a" -> "tenanta") is many-to-one;
 * both let two conversations share one history. Length-prefixed fields under
 * a domain tag are injective, so only a SHA-256 collision could merge them.
 *
 * Why never a path: ids are caller-controlled text (`../x`, NUL, NFC vs NFD,
 * case variants). They are only hashed and stored as record data, so no id
 * reaches the filesystem, and distinct strings stay distinct, byte for byte.
 */
import { Level } from "level";
import {
  ByteReader,
  bytesEqual,
  compareBytes,
  concatBytes,
  decodeUtf8,
  encodeUtf8,
  lengthPrefixed,
  readU64,
  sha256,
  toHex,
  u32,
  u64,
} from "./bytes.js";
import {
  checkLimit,
  checkPayload,
  checkProvenance,
  checkTask,
  checkTime,
  MAX_TIME,
  provenanceByCode,
  provenanceCodes,
} from "./checks.js";
import { checkId } from "./ids.js";
import { createKeyedMutex } from "./keyed-mutex.js";
import { claimPath } from "./open-paths.js";
import { RecentTails } from "./recent-tails.js";
import {
  type AppendInput,
  type AppendResult,
  type ListTasksQuery,
  type MessagePage,
  type PageOrder,
  type PushConfigRecord,
  type StoredMessage,
  StoreError,
  type TaskPage,
  type TaskRecord,
  type ThreadKey,
  type ThreadMeta,
  type ThreadPage,
  type ThreadStore,
  terminalTaskStates,
} from "./types.js";

export interface LevelThreadStoreOptions {
  /** The database directory; created if missing. */
  readonly path: string;
  /**
   * fsync every write. Without it an acknowledged write survives a crash of
   * the process (it is in the OS page cache) but not of the machine.
   */
  readonly sync?: boolean;
  /** The clock for createdAt/updatedAt and sweeps; Date.now by default. */
  readonly now?: () => number;
}

/** ThreadStore plus helpers meant for tools (imports, benchmarks), not for the request path. */
export interface LevelThreadStore extends ThreadStore {
  /**
   * Appends many messages to one thread in a single atomic batch, without
   * retry detection (the messageId index is still written, so later appends
   * recognise retries of imported messages).
   */
  importMessages(key: ThreadKey, inputs: readonly AppendInput[]): Promise<ThreadMeta>;
}

const RECORD_VERSION = 1;
const CURSOR_VERSION = 1;
const HASH_BYTES = 32;
const SEQ_BYTES = 8;
const PURGE_CHUNK = 1000;

function table(name: string): Uint8Array {
  return encodeUtf8(`parley:v1:${name}:`);
}
const T_META = table("t");
const T_MESSAGE = table("m");
const T_MESSAGE_ID = table("i");
const T_THREADS_BY_TENANT = table("l");
const T_THREADS_BY_UPDATED = table("u");
const T_PURGE = table("x");
const T_TASK = table("k");
const T_TASKS_BY_TENANT = table("d");
const T_TASKS_BY_CONTEXT = table("c");
const T_TASKS_UNFINISHED = table("r");
const T_PUSH = table("p");

function digest(tag: string, fields: readonly string[]): Uint8Array {
  return sha256(lengthPrefixed([encodeUtf8(tag), ...fields.map(encodeUtf8)]));
}
/**
 * The digests of recently used threads, tenants and tasks: one send hashes the
 * same ids several times (append, indexes, history read). The cache key
 * length-prefixes every field, so it is unambiguous; the digests are never mutated.
 */
const recentDigests = new Map<string, Uint8Array>();
const RECENT_DIGESTS = 4_096;
function cachedDigest(tag: string, fields: readonly string[]): Uint8Array {
  let cacheKey = tag;
  for (const field of fields) cacheKey += `\u0000${field.length}:${field}`;
  let found = recentDigests.get(cacheKey);
  if (!found) {
    found = digest(tag, fields);
    recentDigests.set(cacheKey, found);
    if (recentDigests.size > RECENT_DIGESTS) recentDigests.delete(recentDigests.keys().next().value!);
  }
  return found;
}
const threadHash = (tenant: string, contextId: string) => cachedDigest("parley.thread.v1", [tenant, contextId]);
const tenantHash = (tenant: string) => cachedDigest("parley.tenant.v1", [tenant]);
const taskHash = (tenant: string, taskId: string) => cachedDigest("parley.task.v1", [tenant, taskId]);
const messageIdHash = (messageId: string) => digest("parley.message-id.v1", [messageId]);
const configHash = (configId: string) => digest("parley.push-config.v1", [configId]);

/** The hex thread digest under which a (tenant, contextId) conversation is stored. */
export function threadDigest(tenant: string, contextId: string): string {
  return toHex(threadHash(checkId("tenant", tenant), checkId("contextId", contextId)));
}

const key = (...parts: Uint8Array[]) => concatBytes(parts);
const inv = (time: number) => u64(MAX_TIME - time);

/** The smallest key greater than every key starting with `prefix`. */
function prefixEnd(prefix: Uint8Array): Uint8Array {
  const end = prefix.slice();
  for (let i = end.length - 1; i >= 0; i--) {
    if (end[i]! < 0xff) {
      end[i]! += 1;
      return end.subarray(0, i + 1);
    }
  }
  throw new RangeError("a prefix of only 0xff bytes has no end");
}

interface DecodedMeta extends ThreadMeta {}

function encodeMeta(meta: ThreadMeta): Uint8Array {
  return key(
    Uint8Array.of(RECORD_VERSION),
    u64(meta.createdAt),
    u64(meta.updatedAt),
    u64(meta.messageCount),
    u64(meta.lastSequence),
    lengthPrefixed([encodeUtf8(meta.tenant), encodeUtf8(meta.contextId)]),
  );
}

function decodeMeta(bytes: Uint8Array): DecodedMeta {
  const r = new ByteReader(bytes);
  if (r.u8() !== RECORD_VERSION) throw new RangeError("unknown record version");
  const createdAt = r.u64();
  const updatedAt = r.u64();
  const messageCount = r.u64();
  const lastSequence = r.u64();
  const tenant = r.string();
  const contextId = r.string();
  r.end();
  return { tenant, contextId, createdAt, updatedAt, messageCount, lastSequence };
}

function encodeMessage(m: StoredMessage): Uint8Array {
  const taskPart =
    m.taskId === undefined ? Uint8Array.of(0) : key(Uint8Array.of(1), lengthPrefixed([encodeUtf8(m.taskId)]));
  return key(
    Uint8Array.of(RECORD_VERSION, provenanceCodes[m.provenance]),
    u64(m.createdAt),
    lengthPrefixed([encodeUtf8(m.messageId)]),
    taskPart,
    m.payload,
  );
}

function decodeMessage(sequence: number, bytes: Uint8Array): StoredMessage {
  const r = new ByteReader(bytes);
  if (r.u8() !== RECORD_VERSION) throw new RangeError("unknown record version");
  const provenance = provenanceByCode.get(r.u8());
  if (provenance === undefined) throw new RangeError("unknown provenance");
  const createdAt = r.u64();
  const messageId = r.string();
  const hasTask = r.u8();
  if (hasTask > 1) throw new RangeError("bad task flag");
  const taskId = hasTask === 1 ? r.string() : undefined;
  const payload = r.rest();
  return taskId === undefined
    ? { sequence, messageId, provenance, payload, createdAt }
    : { sequence, messageId, provenance, taskId, payload, createdAt };
}

interface MessageIdEntry {
  readonly sequence: number;
  readonly digest: Uint8Array;
}

const ID_ENTRY_BYTES = SEQ_BYTES + HASH_BYTES;

function encodeMessageIdEntries(entries: readonly MessageIdEntry[]): Uint8Array {
  return concatBytes(entries.flatMap((e) => [u64(e.sequence), e.digest]));
}

/**
 * Entries above the thread's lastSequence are dropped: the meta is the commit
 * point, so they cannot belong to this thread's messages.
 */
function decodeMessageIdEntries(k: Uint8Array, raw: Uint8Array | undefined, lastSequence: number): MessageIdEntry[] {
  if (raw === undefined) return [];
  return decodeOrCorrupt("messageId index", k, () => {
    if (raw.length % ID_ENTRY_BYTES !== 0) throw new RangeError("length is not a whole number of entries");
    const entries: MessageIdEntry[] = [];
    for (let at = 0; at < raw.length; at += ID_ENTRY_BYTES) {
      const sequence = readU64(raw, at);
      if (sequence <= lastSequence) {
        entries.push({ sequence, digest: raw.slice(at + SEQ_BYTES, at + ID_ENTRY_BYTES) });
      }
    }
    return entries;
  });
}

function encodeTask(t: TaskRecord): Uint8Array {
  return key(
    Uint8Array.of(RECORD_VERSION),
    u32(t.state),
    u64(t.updatedAt),
    lengthPrefixed([encodeUtf8(t.tenant), encodeUtf8(t.taskId), encodeUtf8(t.contextId)]),
    t.payload,
  );
}

function decodeTask(bytes: Uint8Array): TaskRecord {
  const r = new ByteReader(bytes);
  if (r.u8() !== RECORD_VERSION) throw new RangeError("unknown record version");
  const state = r.u32();
  const updatedAt = r.u64();
  const tenant = r.string();
  const taskId = r.string();
  const contextId = r.string();
  return { tenant, taskId, contextId, state, updatedAt, payload: r.rest() };
}

function encodePush(c: PushConfigRecord): Uint8Array {
  return key(
    Uint8Array.of(RECORD_VERSION),
    lengthPrefixed([encodeUtf8(c.tenant), encodeUtf8(c.taskId), encodeUtf8(c.configId)]),
    c.payload,
  );
}

function decodePush(bytes: Uint8Array): PushConfigRecord {
  const r = new ByteReader(bytes);
  if (r.u8() !== RECORD_VERSION) throw new RangeError("unknown record version");
  const tenant = r.string();
  const taskId = r.string();
  const configId = r.string();
  return { tenant, taskId, configId, payload: r.rest() };
}

function decodeOrCorrupt<T>(what: string, k: Uint8Array, decode: () => T): T {
  try {
    return decode();
  } catch (cause) {
    throw new StoreError("CORRUPT", `${what} at key ${toHex(k)} failed to decode: ${(cause as Error).message}`, {
      cause,
    });
  }
}

// Cursors: base64url of [version, kind, 8-byte query tag, position]. The tag
// binds a cursor to the query (thread and order, tenant and filters) it was
// issued for, so a cursor replayed against another query is refused.
const CURSOR_TAG_BYTES = 8;

function cursorTag(kind: string, fields: readonly string[]): Uint8Array {
  return digest(`parley.cursor.${kind}.v1`, fields).subarray(0, CURSOR_TAG_BYTES);
}

function encodeCursor(kind: number, tag: Uint8Array, position: Uint8Array): string {
  return Buffer.from(key(Uint8Array.of(CURSOR_VERSION, kind), tag, position)).toString("base64url");
}

function decodeCursor(cursor: unknown, kind: number, tag: Uint8Array, what: string): Uint8Array {
  if (typeof cursor !== "string" || cursor.length === 0 || !/^[A-Za-z0-9_-]+$/.test(cursor)) {
    throw new StoreError("INVALID_CURSOR", `${what} cursor is not a cursor issued by this store`);
  }
  const bytes = new Uint8Array(Buffer.from(cursor, "base64url"));
  // Buffer ignores stray trailing characters; only the exact string this store issued is accepted.
  if (Buffer.from(bytes).toString("base64url") !== cursor) {
    throw new StoreError("INVALID_CURSOR", `${what} cursor is not a cursor issued by this store`);
  }
  const head = 2 + CURSOR_TAG_BYTES;
  if (bytes.length < head || bytes[0] !== CURSOR_VERSION || bytes[1] !== kind) {
    throw new StoreError("INVALID_CURSOR", `${what} cursor is not a cursor issued by this store`);
  }
  if (!bytesEqual(bytes.subarray(2, head), tag)) {
    throw new StoreError("INVALID_CURSOR", `${what} cursor was issued for a different query`);
  }
  return bytes.slice(head);
}

const CURSOR_MESSAGES = 0x6d;
const CURSOR_THREADS = 0x6c;
const CURSOR_TASKS = 0x64;
const CURSOR_PUSH = 0x70;

type Db = Level<Uint8Array, Uint8Array>;
type Snapshot = ReturnType<Db["snapshot"]>;
type BatchOp = { type: "put"; key: Uint8Array; value: Uint8Array } | { type: "del"; key: Uint8Array };

const EMPTY = new Uint8Array(0);

/**
 * Opens (creating if needed) a LevelDB-backed ThreadStore. Fails with
 * StoreError LOCKED if another process, or another store in this process,
 * owns the directory.
 */
export async function createLevelThreadStore(options: LevelThreadStoreOptions): Promise<LevelThreadStore> {
  if (typeof options?.path !== "string" || options.path.length === 0) {
    throw new TypeError("createLevelThreadStore needs options.path, the database directory");
  }
  const claim = await claimPath(options.path);
  const db: Db = new Level<Uint8Array, Uint8Array>(claim.realPath, { keyEncoding: "view", valueEncoding: "view" });
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
  const store = new LevelStore(db, claim, options.sync === true, options.now ?? Date.now);
  try {
    await store.finishPendingPurges();
  } catch (cause) {
    await store.close();
    throw cause;
  }
  return store;
}

/** Where a task's index entries sit: all a rewrite needs to remove them. */
interface TaskIndexPosition {
  readonly tenant: string;
  readonly contextId: string;
  readonly updatedAt: number;
}

/** How many task index positions stay cached; a miss only costs one read. */
const TASK_POSITION_CACHE_SIZE = 10_000;
/** How many thread meta records stay cached. */
const META_CACHE_SIZE = 10_000;
/** Newest messages cached per thread: more than a turn's history read (20 + 1 by default). */
const TAIL_CACHE_MESSAGES = 64;
/** Payload bytes of cached tails across all threads. */
const TAIL_CACHE_BYTES = 16 * 1024 * 1024;

class LevelStore implements LevelThreadStore {
  private readonly locks = createKeyedMutex();
  /**
   * Index positions of recently written tasks, so rewriting a task (twice per
   * send) needs no read of the old record. Sound because this process is the
   * database's only owner (the LevelDB lock), and entries change only under
   * the task's lock, after their batch is written.
   */
  private readonly taskPositions = new Map<string, TaskIndexPosition>();
  private queued: { ops: BatchOp[]; resolve: () => void; reject: (error: unknown) => void }[] = [];
  private writing = false;
  /**
   * Meta records of recently written or read threads, for the same reason:
   * an append then needs at most the message-id read, and a history read
   * none. Every path that changes a meta record updates or drops its entry.
   */
  private readonly metas = new Map<string, ThreadMeta>();

  /** The newest messages of recently used threads; same soundness argument as the metas. */
  private readonly tails = new RecentTails(TAIL_CACHE_MESSAGES, TAIL_CACHE_BYTES);

  private remember(th: Uint8Array, meta: ThreadMeta | undefined): void {
    const hex = toHex(th);
    this.metas.delete(hex);
    if (!meta) {
      this.tails.drop(hex);
      return;
    }
    this.metas.set(hex, meta);
    if (this.metas.size > META_CACHE_SIZE) this.metas.delete(this.metas.keys().next().value!);
  }

  private cachedMeta(th: Uint8Array, tenant: string, contextId: string): ThreadMeta | undefined {
    const meta = this.metas.get(toHex(th));
    return meta && meta.tenant === tenant && meta.contextId === contextId ? meta : undefined;
  }
  private readonly inFlight = new Set<Promise<unknown>>();
  private closing: Promise<void> | undefined;

  constructor(
    private readonly db: Db,
    private readonly claim: { readonly realPath: string; release(): void },
    private readonly sync: boolean,
    private readonly now: () => number,
  ) {}

  /** Tracks the operation so close() can wait for it; refuses new work once closing. */
  private op<T>(name: string, work: () => Promise<T>): Promise<T> {
    if (this.closing) {
      return Promise.reject(
        new StoreError("CLOSED", `${name} called after the store at ${this.claim.realPath} was closed`),
      );
    }
    const p = work();
    this.inFlight.add(p);
    const forget = () => this.inFlight.delete(p);
    p.then(forget, forget);
    return p;
  }

  /**
   * Group commit: while one batch is being written, the batches that arrive
   * meanwhile are merged and written together next. Each caller's operations
   * stay all-or-nothing (they land in one LevelDB batch), and concurrent
   * appends share the fixed cost of a native write instead of paying it each.
   * Appends to one thread never meet in a merged batch: they are serialised
   * by the thread's lock, and a caller's promise settles only after its batch.
   */
  private write(ops: BatchOp[]): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.queued.push({ ops, resolve, reject });
      if (!this.writing) void this.flush();
    });
  }

  /**
   * Reads one small record synchronously. From LevelDB's cache that takes about
   * 2 us of the event loop, where the asynchronous get (thread-pool hop, snapshot,
   * promise) costs 7-10 us of it (measured); a read that misses the OS page
   * cache holds the loop for one disk read instead. Range reads stay asynchronous.
   */
  private pointRead(k: Uint8Array): Uint8Array | undefined {
    return this.db.getSync(k);
  }

  private async flush(): Promise<void> {
    this.writing = true;
    while (this.queued.length > 0) {
      const group = this.queued;
      this.queued = [];
      const ops = group.length === 1 ? group[0]!.ops : group.flatMap((g) => g.ops);
      try {
        // No options object unless fsync is wanted: abstract-level copies the options into every
        // operation, which made each op of an unsynced batch about three times as expensive (measured).
        await (this.sync ? this.db.batch(ops, { sync: true }) : this.db.batch(ops));
        for (const g of group) g.resolve();
      } catch (error) {
        for (const g of group) g.reject(error);
      }
    }
    this.writing = false;
  }

  // ---- threads ----

  /** The meta of a thread, or undefined; CORRUPT if the record is not this thread's. */
  private async readMeta(th: Uint8Array, tenant: string, contextId: string): Promise<DecodedMeta | undefined> {
    const cached = this.cachedMeta(th, tenant, contextId);
    if (cached) return cached;
    const k = key(T_META, th);
    return this.parseMeta(k, this.pointRead(k), tenant, contextId);
  }

  private parseMeta(k: Uint8Array, raw: Uint8Array | undefined, tenant: string, contextId: string) {
    if (raw === undefined) return undefined;
    const meta = decodeOrCorrupt("thread meta", k, () => decodeMeta(raw));
    if (meta.tenant !== tenant || meta.contextId !== contextId) {
      throw new StoreError("CORRUPT", `thread meta at key ${toHex(k)} belongs to another conversation`);
    }
    return meta;
  }

  private threadIndexOps(th: Uint8Array, old: ThreadMeta | undefined, next: ThreadMeta): BatchOp[] {
    const tn = tenantHash(next.tenant);
    const ops: BatchOp[] = [];
    if (old) {
      ops.push({ type: "del", key: key(T_THREADS_BY_TENANT, tn, inv(old.updatedAt), th) });
      ops.push({ type: "del", key: key(T_THREADS_BY_UPDATED, u64(old.updatedAt), th) });
    }
    ops.push({ type: "put", key: key(T_META, th), value: encodeMeta(next) });
    ops.push({ type: "put", key: key(T_THREADS_BY_TENANT, tn, inv(next.updatedAt), th), value: EMPTY });
    ops.push({ type: "put", key: key(T_THREADS_BY_UPDATED, u64(next.updatedAt), th), value: EMPTY });
    return ops;
  }

  /**
   * Looks for a true retry among the messages that carry this messageId. The
   * digest narrows the candidates; the stored bytes are then compared in full.
   */
  private findRetry(
    th: Uint8Array,
    entries: readonly MessageIdEntry[],
    payloadDigest: Uint8Array,
    input: AppendInput,
  ): StoredMessage | undefined {
    for (const { sequence, digest: entryDigest } of entries) {
      if (!bytesEqual(entryDigest, payloadDigest)) continue;
      const mk = key(T_MESSAGE, th, u64(sequence));
      const raw = this.pointRead(mk);
      if (raw === undefined) continue;
      const stored = decodeOrCorrupt("message", mk, () => decodeMessage(sequence, raw));
      if (stored.messageId === input.messageId && bytesEqual(stored.payload, input.payload)) return stored;
    }
    return undefined;
  }

  append(threadKey: ThreadKey, input: AppendInput, task?: TaskRecord): Promise<AppendResult> {
    return this.op("append", async () => {
      const tenant = checkId("tenant", threadKey?.tenant);
      const contextId = checkId("contextId", threadKey?.contextId);
      checkId("messageId", input?.messageId);
      if (input.taskId !== undefined) checkId("taskId", input.taskId);
      checkProvenance(input.provenance);
      checkPayload("payload", input.payload);
      if (task !== undefined) {
        checkTask(task);
        if (task.tenant !== tenant || task.contextId !== contextId) {
          throw new RangeError("the task given with append must have the thread's tenant and contextId");
        }
      }
      const th = threadHash(tenant, contextId);
      return this.locks.run(`t:${toHex(th)}`, async () => {
        const metaKey = key(T_META, th);
        // A fresh id needs no retry lookup and gets no index entry.
        const idKey = input.fresh ? undefined : key(T_MESSAGE_ID, th, messageIdHash(input.messageId));
        // At most two point reads (the meta unless cached, the id index of an existing thread), then one batch.
        let meta: ThreadMeta | undefined = this.cachedMeta(th, tenant, contextId);
        let rawIds: Uint8Array | undefined;
        if (!meta) {
          meta = this.parseMeta(metaKey, this.pointRead(metaKey), tenant, contextId);
        }
        if (idKey && meta) rawIds = this.pointRead(idKey);
        const sequence = (meta?.lastSequence ?? 0) + 1;
        let idEntry: { key: Uint8Array; entries: MessageIdEntry[] } | undefined;
        if (idKey) {
          const entries = meta ? decodeMessageIdEntries(idKey, rawIds, meta.lastSequence) : [];
          const payloadDigest = sha256(input.payload);
          const retry = this.findRetry(th, entries, payloadDigest, input);
          if (retry) return { message: retry, duplicate: true };
          idEntry = { key: idKey, entries: [...entries, { sequence, digest: payloadDigest }] };
        }
        const now = this.now();
        const message: StoredMessage = {
          sequence,
          messageId: input.messageId,
          provenance: input.provenance,
          ...(input.taskId === undefined ? {} : { taskId: input.taskId }),
          payload: input.payload.slice(),
          createdAt: now,
        };
        const next: ThreadMeta = {
          tenant,
          contextId,
          createdAt: meta?.createdAt ?? now,
          updatedAt: now,
          messageCount: (meta?.messageCount ?? 0) + 1,
          lastSequence: sequence,
        };
        const ops: BatchOp[] = [
          { type: "put", key: key(T_MESSAGE, th, u64(sequence)), value: encodeMessage(message) },
          ...this.threadIndexOps(th, meta, next),
        ];
        if (idEntry) ops.push({ type: "put", key: idEntry.key, value: encodeMessageIdEntries(idEntry.entries) });
        try {
          if (task === undefined) {
            await this.write(ops);
          } else {
            await this.withTask(task, async (taskOps) => this.write([...ops, ...taskOps]));
          }
        } catch (error) {
          this.remember(th, undefined);
          throw error;
        }
        this.remember(th, next);
        this.tails.appended(toHex(th), meta?.lastSequence ?? 0, message);
        return { message, duplicate: false };
      });
    });
  }

  importMessages(threadKey: ThreadKey, inputs: readonly AppendInput[]): Promise<ThreadMeta> {
    return this.op("importMessages", async () => {
      const tenant = checkId("tenant", threadKey?.tenant);
      const contextId = checkId("contextId", threadKey?.contextId);
      for (const input of inputs) {
        checkId("messageId", input.messageId);
        if (input.taskId !== undefined) checkId("taskId", input.taskId);
        checkProvenance(input.provenance);
        checkPayload("payload", input.payload);
      }
      const th = threadHash(tenant, contextId);
      return this.locks.run(`t:${toHex(th)}`, async () => {
        this.remember(th, undefined);
        const meta = await this.readMeta(th, tenant, contextId);
        if (inputs.length === 0 && meta) return meta;
        const now = this.now();
        let sequence = meta?.lastSequence ?? 0;
        const ops: BatchOp[] = [];
        const idLists = new Map<string, { key: Uint8Array; entries: MessageIdEntry[] }>();
        for (const input of inputs) {
          const idKey = key(T_MESSAGE_ID, th, messageIdHash(input.messageId));
          const hex = toHex(idKey);
          if (!idLists.has(hex)) idLists.set(hex, { key: idKey, entries: [] });
        }
        if (meta) {
          const lists = [...idLists.values()];
          const raws = await this.db.getMany(lists.map((l) => l.key));
          for (const [i, l] of lists.entries())
            l.entries.push(...decodeMessageIdEntries(l.key, raws[i], meta.lastSequence));
        }
        for (const input of inputs) {
          sequence += 1;
          const message: StoredMessage = {
            sequence,
            messageId: input.messageId,
            provenance: input.provenance,
            ...(input.taskId === undefined ? {} : { taskId: input.taskId }),
            payload: input.payload,
            createdAt: now,
          };
          ops.push({ type: "put", key: key(T_MESSAGE, th, u64(sequence)), value: encodeMessage(message) });
          const list = idLists.get(toHex(key(T_MESSAGE_ID, th, messageIdHash(input.messageId))))!;
          list.entries.push({ sequence, digest: sha256(input.payload) });
        }
        for (const list of idLists.values()) {
          ops.push({ type: "put", key: list.key, value: encodeMessageIdEntries(list.entries) });
        }
        const next: ThreadMeta = {
          tenant,
          contextId,
          createdAt: meta?.createdAt ?? now,
          updatedAt: now,
          messageCount: (meta?.messageCount ?? 0) + inputs.length,
          lastSequence: sequence,
        };
        ops.push(...this.threadIndexOps(th, meta, next));
        await this.write(ops);
        return next;
      });
    });
  }

  private async readRange(
    th: Uint8Array,
    range: { gte: number; lte: number },
    reverse: boolean,
    limit: number,
  ): Promise<StoredMessage[]> {
    if (range.gte > range.lte || limit === 0) return [];
    const entries = await this.db
      .iterator({
        gte: key(T_MESSAGE, th, u64(range.gte)),
        lte: key(T_MESSAGE, th, u64(range.lte)),
        reverse,
        limit,
      })
      .all();
    return entries.map(([k, v]) => {
      const sequence = readU64(k, k.length - SEQ_BYTES);
      return decodeOrCorrupt("message", k, () => decodeMessage(sequence, v));
    });
  }

  tail(threadKey: ThreadKey, count: number): Promise<StoredMessage[]> {
    return this.op("tail", async () => {
      const tenant = checkId("tenant", threadKey?.tenant);
      const contextId = checkId("contextId", threadKey?.contextId);
      checkLimit("count", count, true);
      const th = threadHash(tenant, contextId);
      const meta = await this.readMeta(th, tenant, contextId);
      if (!meta || count === 0) return [];
      const hex = toHex(th);
      const cached = this.tails.get(hex, meta.lastSequence, count);
      if (cached) return cached;
      // Bounded by lastSequence: the meta is the commit point, so anything above it is not part of the thread.
      const newest = (await this.readRange(th, { gte: 1, lte: meta.lastSequence }, true, count)).reverse();
      // Cached only if no write changed the thread during the read.
      if (this.metas.get(hex) === meta) this.tails.put(hex, newest);
      return newest;
    });
  }

  readMessages(
    threadKey: ThreadKey,
    options: { readonly order: PageOrder; readonly limit: number; readonly cursor?: string },
  ): Promise<MessagePage> {
    return this.op("readMessages", async () => {
      const tenant = checkId("tenant", threadKey?.tenant);
      const contextId = checkId("contextId", threadKey?.contextId);
      const order = options?.order;
      if (order !== "newest-first" && order !== "oldest-first") {
        throw new RangeError(`order must be newest-first or oldest-first, got ${String(order)}`);
      }
      const limit = checkLimit("limit", options.limit);
      const th = threadHash(tenant, contextId);
      const tag = cursorTag("messages", [toHex(th), order]);
      let after: number | undefined;
      if (options.cursor !== undefined) {
        const position = decodeCursor(options.cursor, CURSOR_MESSAGES, tag, "readMessages");
        if (position.length !== SEQ_BYTES) {
          throw new StoreError("INVALID_CURSOR", "readMessages cursor is not a cursor issued by this store");
        }
        after = readU64(position, 0);
      }
      const meta = await this.readMeta(th, tenant, contextId);
      if (!meta) return { messages: [] };
      const newestFirst = order === "newest-first";
      const range = newestFirst
        ? { gte: 1, lte: Math.min(meta.lastSequence, (after ?? meta.lastSequence + 1) - 1) }
        : { gte: (after ?? 0) + 1, lte: meta.lastSequence };
      const messages = await this.readRange(th, range, newestFirst, limit + 1);
      if (messages.length <= limit) return { messages };
      messages.length = limit;
      const last = messages[limit - 1]!.sequence;
      return { messages, nextCursor: encodeCursor(CURSOR_MESSAGES, tag, u64(last)) };
    });
  }

  getThread(threadKey: ThreadKey): Promise<ThreadMeta | undefined> {
    return this.op("getThread", async () => {
      const tenant = checkId("tenant", threadKey?.tenant);
      const contextId = checkId("contextId", threadKey?.contextId);
      return this.readMeta(threadHash(tenant, contextId), tenant, contextId);
    });
  }

  listThreads(tenant: string, options: { readonly limit: number; readonly cursor?: string }): Promise<ThreadPage> {
    return this.op("listThreads", async () => {
      checkId("tenant", tenant);
      const limit = checkLimit("limit", options?.limit);
      const prefix = key(T_THREADS_BY_TENANT, tenantHash(tenant));
      const tag = cursorTag("threads", [tenant]);
      let gt: Uint8Array | undefined;
      if (options.cursor !== undefined) {
        const position = decodeCursor(options.cursor, CURSOR_THREADS, tag, "listThreads");
        if (position.length !== 8 + HASH_BYTES) {
          throw new StoreError("INVALID_CURSOR", "listThreads cursor is not a cursor issued by this store");
        }
        gt = key(prefix, position);
      }
      const snapshot = this.db.snapshot();
      try {
        const keys = await this.db
          .keys({ ...(gt ? { gt } : { gte: prefix }), lt: prefixEnd(prefix), limit: limit + 1, snapshot })
          .all();
        const page = keys.slice(0, limit);
        const metaKeys = page.map((k) => key(T_META, k.subarray(k.length - HASH_BYTES)));
        const raws = await this.db.getMany(metaKeys, { snapshot });
        const threads: ThreadMeta[] = [];
        raws.forEach((raw, i) => {
          // An index entry without its meta, or whose meta names another tenant, was not written by
          // this store's batches (planted or foreign data): it is never listed.
          if (raw === undefined) return;
          const meta = decodeOrCorrupt("thread meta", metaKeys[i]!, () => decodeMeta(raw));
          if (meta.tenant !== tenant) return;
          threads.push(meta);
        });
        if (keys.length <= limit) return { threads };
        const lastKey = page[page.length - 1]!;
        return { threads, nextCursor: encodeCursor(CURSOR_THREADS, tag, lastKey.subarray(prefix.length)) };
      } finally {
        await snapshot.close();
      }
    });
  }

  /*
   * Deletion is two-phase so that it is crash-safe without one huge batch: an
   * atomic batch removes the meta and the thread indexes and records a purge
   * marker (the thread is gone from that instant), then the messages and the
   * messageId index are cleared in ranges, then the marker is removed. Opening
   * the store finishes any purge a crash interrupted, before the store is used.
   *
   * Tasks of the thread are kept: a task has its own lifetime (GetTask and
   * ListTasks must still answer after a conversation's history is pruned) and
   * its own retention, and its records reference the contextId only as data.
   */
  private async deleteLocked(th: Uint8Array, meta: ThreadMeta): Promise<void> {
    this.remember(th, undefined);
    const tn = tenantHash(meta.tenant);
    await this.write([
      { type: "del", key: key(T_META, th) },
      { type: "del", key: key(T_THREADS_BY_TENANT, tn, inv(meta.updatedAt), th) },
      { type: "del", key: key(T_THREADS_BY_UPDATED, u64(meta.updatedAt), th) },
      { type: "put", key: key(T_PURGE, th), value: u64(meta.lastSequence) },
    ]);
    await this.purge(th);
  }

  private async purge(th: Uint8Array): Promise<void> {
    for (const prefix of [key(T_MESSAGE, th), key(T_MESSAGE_ID, th)]) {
      await this.db.clear({ gte: prefix, lt: prefixEnd(prefix) });
    }
    await this.db.del(key(T_PURGE, th), { sync: this.sync });
  }

  async finishPendingPurges(): Promise<void> {
    const keys = await this.db.keys({ gte: T_PURGE, lt: prefixEnd(T_PURGE) }).all();
    for (const k of keys) {
      const th = k.slice(T_PURGE.length);
      await this.locks.run(`t:${toHex(th)}`, () => this.purge(th));
    }
  }

  deleteThread(threadKey: ThreadKey): Promise<{ readonly deleted: boolean; readonly messageCount: number }> {
    return this.op("deleteThread", async () => {
      const tenant = checkId("tenant", threadKey?.tenant);
      const contextId = checkId("contextId", threadKey?.contextId);
      const th = threadHash(tenant, contextId);
      return this.locks.run(`t:${toHex(th)}`, async () => {
        const meta = await this.readMeta(th, tenant, contextId);
        if (!meta) return { deleted: false, messageCount: 0 };
        await this.deleteLocked(th, meta);
        return { deleted: true, messageCount: meta.messageCount };
      });
    });
  }

  sweepThreads(olderThanMs: number): Promise<number> {
    return this.op("sweepThreads", async () => {
      checkTime("olderThanMs", olderThanMs);
      const cutoff = this.now() - olderThanMs;
      if (cutoff <= 0) return 0;
      let deleted = 0;
      for (;;) {
        const keys = await this.db
          .keys({ gte: T_THREADS_BY_UPDATED, lt: key(T_THREADS_BY_UPDATED, u64(cutoff)), limit: PURGE_CHUNK })
          .all();
        if (keys.length === 0) return deleted;
        for (const k of keys) {
          const th = k.slice(k.length - HASH_BYTES);
          const gone = await this.locks.run(`t:${toHex(th)}`, async () => {
            const mk = key(T_META, th);
            const raw = await this.db.get(mk);
            if (raw === undefined) {
              // A stray index entry (no thread behind it) would otherwise be found by every sweep.
              await this.db.del(k);
              return false;
            }
            const meta = decodeOrCorrupt("thread meta", mk, () => decodeMeta(raw));
            // Re-checked under the lock: an append may have refreshed the thread since the index was read.
            if (meta.updatedAt >= cutoff) return false;
            await this.deleteLocked(th, meta);
            return true;
          });
          if (gone) deleted += 1;
        }
      }
    });
  }

  // ---- tasks ----

  /** Runs `write` under the task's lock with the ops that upsert it (old index entries removed first). */
  private withTask<T>(task: TaskRecord, write: (ops: BatchOp[]) => Promise<T>): Promise<T> {
    const tk = taskHash(task.tenant, task.taskId);
    const tkHex = toHex(tk);
    return this.locks.run(`k:${tkHex}`, async () => {
      const recordKey = key(T_TASK, tk);
      let old: TaskIndexPosition | undefined = this.taskPositions.get(tkHex);
      if (!old && !task.created) {
        const raw = this.pointRead(recordKey);
        old = raw === undefined ? undefined : decodeOrCorrupt("task", recordKey, () => decodeTask(raw));
      }
      const taskIdBytes = encodeUtf8(task.taskId);
      const ops: BatchOp[] = [];
      if (old) {
        ops.push({ type: "del", key: key(T_TASKS_BY_TENANT, tenantHash(old.tenant), inv(old.updatedAt), taskIdBytes) });
        ops.push({
          type: "del",
          key: key(T_TASKS_BY_CONTEXT, threadHash(old.tenant, old.contextId), inv(old.updatedAt), taskIdBytes),
        });
        ops.push({ type: "del", key: key(T_TASKS_UNFINISHED, tk) });
      }
      const th = threadHash(task.tenant, task.contextId);
      ops.push({ type: "put", key: recordKey, value: encodeTask(task) });
      ops.push({
        type: "put",
        key: key(T_TASKS_BY_TENANT, tenantHash(task.tenant), inv(task.updatedAt), taskIdBytes),
        value: key(u32(task.state), th),
      });
      ops.push({
        type: "put",
        key: key(T_TASKS_BY_CONTEXT, th, inv(task.updatedAt), taskIdBytes),
        value: u32(task.state),
      });
      if (!terminalTaskStates.has(task.state))
        ops.push({ type: "put", key: key(T_TASKS_UNFINISHED, tk), value: EMPTY });
      let written: T;
      try {
        written = await write(ops);
      } catch (error) {
        // The batch may or may not have landed: forget the position and read it next time.
        this.taskPositions.delete(tkHex);
        throw error;
      }
      this.taskPositions.delete(tkHex);
      this.taskPositions.set(tkHex, { tenant: task.tenant, contextId: task.contextId, updatedAt: task.updatedAt });
      if (this.taskPositions.size > TASK_POSITION_CACHE_SIZE) {
        this.taskPositions.delete(this.taskPositions.keys().next().value!);
      }
      return written;
    });
  }

  putTask(task: TaskRecord): Promise<void> {
    return this.op("putTask", async () => {
      checkTask(task);
      await this.withTask(task, (ops) => this.write(ops));
    });
  }

  private async readTask(tenant: string, taskId: string, snapshot?: Snapshot): Promise<TaskRecord | undefined> {
    const k = key(T_TASK, taskHash(tenant, taskId));
    const raw = await this.db.get(k, { snapshot });
    if (raw === undefined) return undefined;
    const task = decodeOrCorrupt("task", k, () => decodeTask(raw));
    if (task.tenant !== tenant || task.taskId !== taskId) {
      throw new StoreError("CORRUPT", `task at key ${toHex(k)} belongs to another task`);
    }
    return task;
  }

  getTask(tenant: string, taskId: string): Promise<TaskRecord | undefined> {
    return this.op("getTask", async () => this.readTask(checkId("tenant", tenant), checkId("taskId", taskId)));
  }

  listTasks(tenant: string, query: ListTasksQuery): Promise<TaskPage> {
    return this.op("listTasks", async () => {
      checkId("tenant", tenant);
      const limit = checkLimit("limit", query?.limit);
      const { contextId, state, updatedAfter } = query;
      if (contextId !== undefined) checkId("contextId", contextId);
      if (state !== undefined && (!Number.isInteger(state) || state < 0)) {
        throw new RangeError(`state must be a TaskState number, got ${String(state)}`);
      }
      if (updatedAfter !== undefined && (typeof updatedAfter !== "number" || Number.isNaN(updatedAfter))) {
        throw new RangeError(`updatedAfter must be a number of milliseconds, got ${String(updatedAfter)}`);
      }
      const prefix =
        contextId === undefined
          ? key(T_TASKS_BY_TENANT, tenantHash(tenant))
          : key(T_TASKS_BY_CONTEXT, threadHash(tenant, contextId));
      const tag = cursorTag("tasks", [
        tenant,
        contextId === undefined ? "" : `c${contextId}`,
        state === undefined ? "" : `s${state}`,
        updatedAfter === undefined ? "" : `u${updatedAfter}`,
      ]);
      let after: Uint8Array | undefined;
      if (query.cursor !== undefined) {
        const position = decodeCursor(query.cursor, CURSOR_TASKS, tag, "listTasks");
        if (position.length <= 8) {
          throw new StoreError("INVALID_CURSOR", "listTasks cursor is not a cursor issued by this store");
        }
        after = key(prefix, position);
      }
      // updatedAt >= updatedAfter  <=>  inv(updatedAt) <= inv(updatedAfter): an upper key bound.
      let end = prefixEnd(prefix);
      if (updatedAfter !== undefined && updatedAfter > 0) {
        if (updatedAfter > MAX_TIME) return { tasks: [], totalSize: 0 };
        end = key(prefix, u64(MAX_TIME - Math.ceil(updatedAfter) + 1));
      }
      const snapshot = this.db.snapshot();
      try {
        let totalSize = 0;
        const page: Uint8Array[] = [];
        let more = false;
        // totalSize needs every match, so the whole (index-only) range is walked; records are read for the page only.
        for await (const [k, v] of this.db.iterator({ gte: prefix, lt: end, snapshot })) {
          if (state !== undefined && new DataView(v.buffer, v.byteOffset, 4).getUint32(0) !== state) continue;
          totalSize += 1;
          if (after !== undefined && compareBytes(k, after) <= 0) continue;
          if (page.length < limit) page.push(k);
          else more = true;
        }
        const tasks: TaskRecord[] = [];
        for (const k of page) {
          const taskId = decodeOrCorrupt("task index", k, () => decodeUtf8(k.subarray(prefix.length + 8)));
          const task = await this.readTask(tenant, taskId, snapshot);
          if (task) tasks.push(task);
        }
        if (!more) return { tasks, totalSize };
        const lastKey = page[page.length - 1]!;
        return { tasks, totalSize, nextCursor: encodeCursor(CURSOR_TASKS, tag, lastKey.subarray(prefix.length)) };
      } finally {
        await snapshot.close();
      }
    });
  }

  listUnfinishedTasks(): Promise<TaskRecord[]> {
    return this.op("listUnfinishedTasks", async () => {
      const snapshot = this.db.snapshot();
      try {
        const keys = await this.db.keys({ gte: T_TASKS_UNFINISHED, lt: prefixEnd(T_TASKS_UNFINISHED), snapshot }).all();
        const recordKeys = keys.map((k) => key(T_TASK, k.subarray(T_TASKS_UNFINISHED.length)));
        const tasks: TaskRecord[] = [];
        for (let i = 0; i < recordKeys.length; i += PURGE_CHUNK) {
          const chunk = recordKeys.slice(i, i + PURGE_CHUNK);
          const raws = await this.db.getMany(chunk, { snapshot });
          raws.forEach((raw, j) => {
            if (raw === undefined) return;
            const task = decodeOrCorrupt("task", chunk[j]!, () => decodeTask(raw));
            if (!terminalTaskStates.has(task.state)) tasks.push(task);
          });
        }
        return tasks;
      } finally {
        await snapshot.close();
      }
    });
  }

  // ---- push configs ----

  putPushConfig(config: PushConfigRecord): Promise<void> {
    return this.op("putPushConfig", async () => {
      checkId("tenant", config?.tenant);
      checkId("taskId", config.taskId);
      checkId("configId", config.configId);
      checkPayload("payload", config.payload);
      const k = key(T_PUSH, taskHash(config.tenant, config.taskId), configHash(config.configId));
      await this.db.put(k, encodePush(config), { sync: this.sync });
    });
  }

  private async readPush(k: Uint8Array, tenant: string, taskId: string, configId?: string) {
    const raw = await this.db.get(k);
    if (raw === undefined) return undefined;
    const config = decodeOrCorrupt("push config", k, () => decodePush(raw));
    if (
      config.tenant !== tenant ||
      config.taskId !== taskId ||
      (configId !== undefined && config.configId !== configId)
    ) {
      throw new StoreError("CORRUPT", `push config at key ${toHex(k)} belongs to another config`);
    }
    return config;
  }

  getPushConfig(tenant: string, taskId: string, configId: string): Promise<PushConfigRecord | undefined> {
    return this.op("getPushConfig", async () => {
      checkId("tenant", tenant);
      checkId("taskId", taskId);
      checkId("configId", configId);
      return this.readPush(key(T_PUSH, taskHash(tenant, taskId), configHash(configId)), tenant, taskId, configId);
    });
  }

  listPushConfigs(
    tenant: string,
    taskId: string,
    options: { readonly limit: number; readonly cursor?: string },
  ): Promise<{ readonly configs: PushConfigRecord[]; readonly nextCursor?: string }> {
    return this.op("listPushConfigs", async () => {
      checkId("tenant", tenant);
      checkId("taskId", taskId);
      const limit = checkLimit("limit", options?.limit);
      const prefix = key(T_PUSH, taskHash(tenant, taskId));
      const tag = cursorTag("push-configs", [tenant, taskId]);
      let gt: Uint8Array | undefined;
      if (options.cursor !== undefined) {
        const position = decodeCursor(options.cursor, CURSOR_PUSH, tag, "listPushConfigs");
        if (position.length !== HASH_BYTES) {
          throw new StoreError("INVALID_CURSOR", "listPushConfigs cursor is not a cursor issued by this store");
        }
        gt = key(prefix, position);
      }
      const entries = await this.db
        .iterator({ ...(gt ? { gt } : { gte: prefix }), lt: prefixEnd(prefix), limit: limit + 1 })
        .all();
      const page = entries.slice(0, limit);
      const configs = page.map(([k, v]) => {
        const config = decodeOrCorrupt("push config", k, () => decodePush(v));
        if (config.tenant !== tenant || config.taskId !== taskId) {
          throw new StoreError("CORRUPT", `push config at key ${toHex(k)} belongs to another task`);
        }
        return config;
      });
      if (entries.length <= limit) return { configs };
      const lastKey = page[page.length - 1]![0];
      return { configs, nextCursor: encodeCursor(CURSOR_PUSH, tag, lastKey.subarray(prefix.length)) };
    });
  }

  deletePushConfig(tenant: string, taskId: string, configId: string): Promise<boolean> {
    return this.op("deletePushConfig", async () => {
      checkId("tenant", tenant);
      checkId("taskId", taskId);
      checkId("configId", configId);
      const k = key(T_PUSH, taskHash(tenant, taskId), configHash(configId));
      return this.locks.run(`p:${toHex(k)}`, async () => {
        if (!(await this.readPush(k, tenant, taskId, configId))) return false;
        await this.db.del(k, { sync: this.sync });
        return true;
      });
    });
  }

  close(): Promise<void> {
    if (!this.closing) {
      this.closing = (async () => {
        // Let accepted operations finish (and their batches land) before the handle goes away.
        await Promise.allSettled([...this.inFlight]);
        try {
          await this.db.close();
        } finally {
          this.claim.release();
        }
      })();
    }
    return this.closing;
  }
}
