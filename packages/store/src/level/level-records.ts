// The record encodings of the LevelDB backend: thread metas, messages, message-id lists, tasks, push configs.
import { ByteReader, ByteWriter, readU64, toHex, utf8FieldsLength } from "../core/bytes.js";
import { provenanceByCode, provenanceCodes } from "../core/checks.js";
import { HASH_BYTES } from "../core/digests.js";
import { type PushConfigRecord, type StoredMessage, StoreError, type TaskRecord, type ThreadMeta } from "../types.js";
import { SEQ_BYTES } from "./level-keys.js";

const RECORD_VERSION = 1;

/**
 * A thread meta as this backend stores it. `listedAt` is the time under which
 * the thread's listing entry (`l:`) sits: at most LISTING_SLACK_MS before
 * updatedAt, so an append soon after the last one (a turn's reply) need not
 * move the entry (level-thread-writes.ts). Never handed out: see publicMeta.
 */
export interface LevelMeta extends ThreadMeta {
  readonly listedAt: number;
}

/** Version 1 had no listedAt (its entry sat at updatedAt); version 2 adds it after lastSequence. */
const META_VERSION = 2;

export function encodeMeta(meta: LevelMeta): Uint8Array {
  const ids = [meta.tenant, meta.contextId];
  return new ByteWriter(1 + 5 * 8 + utf8FieldsLength(ids))
    .u8(META_VERSION)
    .u64(meta.createdAt)
    .u64(meta.updatedAt)
    .u64(meta.messageCount)
    .u64(meta.lastSequence)
    .u64(meta.listedAt)
    .utf8Fields(ids)
    .done();
}

export function decodeMeta(bytes: Uint8Array): LevelMeta {
  const r = new ByteReader(bytes);
  const version = r.u8();
  if (version !== 1 && version !== META_VERSION) throw new RangeError("unknown record version");
  const createdAt = r.u64();
  const updatedAt = r.u64();
  const messageCount = r.u64();
  const lastSequence = r.u64();
  const listedAt = version === 1 ? updatedAt : r.u64();
  const tenant = r.string();
  const contextId = r.string();
  r.end();
  if (listedAt > updatedAt) throw new RangeError("listed after its last update");
  return { tenant, contextId, createdAt, updatedAt, messageCount, lastSequence, listedAt };
}

/** The meta as the ThreadStore interface gives it out (without the backend's listedAt). */
export function publicMeta(meta: LevelMeta): ThreadMeta {
  const { listedAt: _, ...rest } = meta;
  return rest;
}

export function encodeMessage(m: StoredMessage): Uint8Array {
  const messageId = [m.messageId];
  const taskId = m.taskId === undefined ? undefined : [m.taskId];
  const length = 2 + 8 + utf8FieldsLength(messageId) + 1 + (taskId ? utf8FieldsLength(taskId) : 0) + m.payload.length;
  const w = new ByteWriter(length).u8(RECORD_VERSION).u8(provenanceCodes[m.provenance]).u64(m.createdAt);
  w.utf8Fields(messageId);
  if (taskId) w.u8(1).utf8Fields(taskId);
  else w.u8(0);
  return w.bytes(m.payload).done();
}

export function decodeMessage(sequence: number, bytes: Uint8Array): StoredMessage {
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

export interface MessageIdEntry {
  readonly sequence: number;
  readonly digest: Uint8Array;
}

const ID_ENTRY_BYTES = SEQ_BYTES + HASH_BYTES;

export function encodeMessageIdEntries(entries: readonly MessageIdEntry[]): Uint8Array {
  const w = new ByteWriter(entries.length * ID_ENTRY_BYTES);
  for (const e of entries) w.u64(e.sequence).bytes(e.digest);
  return w.done();
}

/**
 * Entries above the thread's lastSequence are dropped: the meta is the commit
 * point, so they cannot belong to this thread's messages.
 */
export function decodeMessageIdEntries(
  k: Uint8Array,
  raw: Uint8Array | undefined,
  lastSequence: number,
): MessageIdEntry[] {
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

export function encodeTask(t: TaskRecord): Uint8Array {
  const ids = [t.tenant, t.taskId, t.contextId];
  const payload = t.payload;
  return new ByteWriter(1 + 4 + 8 + utf8FieldsLength(ids) + payload.length)
    .u8(RECORD_VERSION)
    .u32(t.state)
    .u64(t.updatedAt)
    .utf8Fields(ids)
    .bytes(payload)
    .done();
}

export function decodeTask(bytes: Uint8Array): TaskRecord {
  const r = new ByteReader(bytes);
  if (r.u8() !== RECORD_VERSION) throw new RangeError("unknown record version");
  const state = r.u32();
  const updatedAt = r.u64();
  const tenant = r.string();
  const taskId = r.string();
  const contextId = r.string();
  return { tenant, taskId, contextId, state, updatedAt, payload: r.rest() };
}

export function encodePush(c: PushConfigRecord): Uint8Array {
  const ids = [c.tenant, c.taskId, c.configId];
  return new ByteWriter(1 + utf8FieldsLength(ids) + c.payload.length)
    .u8(RECORD_VERSION)
    .utf8Fields(ids)
    .bytes(c.payload)
    .done();
}

export function decodePush(bytes: Uint8Array): PushConfigRecord {
  const r = new ByteReader(bytes);
  if (r.u8() !== RECORD_VERSION) throw new RangeError("unknown record version");
  const tenant = r.string();
  const taskId = r.string();
  const configId = r.string();
  return { tenant, taskId, configId, payload: r.rest() };
}

export function decodeOrCorrupt<T>(what: string, k: Uint8Array, decode: () => T): T {
  try {
    return decode();
  } catch (cause) {
    throw new StoreError("CORRUPT", `${what} at key ${toHex(k)} failed to decode: ${(cause as Error).message}`, {
      cause,
    });
  }
}
