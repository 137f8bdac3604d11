/*
 * Key layout of the LevelDB backend.
 *
 * Every key is binary; `H(...)` is SHA-256 over a domain tag and the fields,
 * each written as u32 big-endian length + UTF-8 bytes (see core/digests.ts);
 * numbers are u64 big-endian; `inv(t)` is MAX_SAFE_INTEGER - t so that
 * ascending key order is newest first:
 *
 *   parley:v1:t: th                       thread meta (original tenant + contextId, times, counts, listedAt)
 *   parley:v1:m: th seq                   one message (header + raw payload bytes)
 *   parley:v1:i: th H(messageId)          [(seq, SHA-256 of payload)...] of messages with that id (retries)
 *   parley:v1:l: H(tenant) inv(listed) th    listThreads index, newest first (listed <= updated <= listed + 250 ms)
 *   parley:v1:u: at th                    sweepThreads index, oldest first (at <= updated; moved by sweeps, not appends)
 *   parley:v1:x: th                       a deletion that must be finished (crash-safe purge)
 *   parley:v1:y: th                       a retention deletion that must be finished: messages, tasks (level-retention.ts)
 *   parley:v1:k: tk                       task record
 *   parley:v1:d: H(tenant) inv(updated) taskId   listTasks index per tenant (value: state, th)
 *   parley:v1:c: th inv(updated) taskId   listTasks index per context (value: state)
 *   parley:v1:r: tk                       tasks in a non-terminal state (value: empty, or a hidden task's record)
 *   parley:v1:p: tk H(configId)           push notification config
 *   parley:v1:e: tk lastSeq               one appended batch of task events (level-event-log.ts)
 *   parley:v1:f: ended tk                 task event logs by the time their last run ended (retention sweep)
 *   parley:v1:g: tk                       head of a task's event log (last seq, when it ended)
 *   parley:v1:s: sk                       conversation record (level-conversations.ts)
 *   parley:v1:v: sk seq                   one conversation event
 *   parley:v1:o: H(tenant) inv(created) sk   listConversations index, newest first
 *   parley:v1:w: th sk                    the conversations of a thread (deleted with it)
 *   parley:v1:z: sk                       conversations recorded as running (recovery)
 *   parley:v1:n:                          the commit counter: batches written since the store was created (u64)
 *   parley:v1:a:                          present when every value of the store is sealed (level-seal.ts)
 *
 * Every value is stored in the checksum envelope of level-seal.ts (records written before it existed are read
 * as they are, unless the store says all its values are sealed).
 *
 * with th = H("parley.thread.v1", tenant, contextId) and
 *      tk = H("parley.task.v1", tenant, taskId) and
 *      sk = H("parley.conversation.v1", tenant, conversationId).
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
import type { Level } from "level";
import { ByteWriter, concatBytes, encodeUtf8, u64 } from "../core/bytes.js";
import { MAX_TIME } from "../core/checks.js";

/** The prefix of every key of this layout. */
export const KEYSPACE = encodeUtf8("parley:v1:");

function table(name: string): Uint8Array {
  return encodeUtf8(`parley:v1:${name}:`);
}
export const T_META = table("t");
export const T_MESSAGE = table("m");
export const T_MESSAGE_ID = table("i");
export const T_THREADS_BY_TENANT = table("l");
export const T_THREADS_BY_UPDATED = table("u");
export const T_PURGE = table("x");
export const T_RETENTION = table("y");
export const T_TASK = table("k");
export const T_TASKS_BY_TENANT = table("d");
export const T_TASKS_BY_CONTEXT = table("c");
export const T_TASKS_UNFINISHED = table("r");
export const T_PUSH = table("p");
export const T_EVENT = table("e");
export const T_EVENTS_ENDED = table("f");
export const T_EVENT_HEAD = table("g");
export const T_CONVERSATION = table("s");
export const T_CONVERSATION_EVENT = table("v");
export const T_CONVERSATIONS_BY_TENANT = table("o");
export const T_CONVERSATIONS_BY_THREAD = table("w");
export const T_CONVERSATIONS_RUNNING = table("z");
export const COMMIT_KEY = table("n");
export const SEALED_KEY = table("a");

export const SEQ_BYTES = 8;
/** How many keys one range delete or multi-get handles at a time. */
export const PURGE_CHUNK = 1000;
export const EMPTY = new Uint8Array(0);

export type Db = Level<Uint8Array, Uint8Array>;
export type Snapshot = ReturnType<Db["snapshot"]>;
export type BatchOp = { type: "put"; key: Uint8Array; value: Uint8Array } | { type: "del"; key: Uint8Array };

export const key = (...parts: Uint8Array[]) => concatBytes(parts);
export const inv = (time: number) => u64(MAX_TIME - time);

/** `m: th seq`, written in one buffer (every append writes one and reads its neighbours by it). */
export const messageKey = (th: Uint8Array, sequence: number) =>
  new ByteWriter(T_MESSAGE.length + th.length + SEQ_BYTES).bytes(T_MESSAGE).bytes(th).u64(sequence).done();

/** The smallest key greater than every key starting with `prefix`. */
export function prefixEnd(prefix: Uint8Array): Uint8Array {
  const end = prefix.slice();
  for (let i = end.length - 1; i >= 0; i--) {
    if (end[i]! < 0xff) {
      end[i]! += 1;
      return end.subarray(0, i + 1);
    }
  }
  throw new RangeError("a prefix of only 0xff bytes has no end");
}
