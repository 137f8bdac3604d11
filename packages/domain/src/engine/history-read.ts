import { fromBinary } from "@bufbuild/protobuf";
import { type Message, MessageSchema, Role } from "@parley/proto";
import type { StoredMessage, ThreadKey, ThreadStore } from "@parley/store";
import { type HistoryEntry, messageText } from "../thread/history.js";
import { parleyMetadataOf } from "../thread/parley-metadata.js";

/** Earlier messages of the thread (before `beforeSequence`), oldest first, at most `max`. */
export async function readHistory(
  store: ThreadStore,
  key: ThreadKey,
  beforeSequence: number,
  max: number,
): Promise<HistoryEntry[]> {
  // The first message of a thread has no history: skip the read.
  if (max <= 0 || beforeSequence <= 1) return [];
  const tail = await store.tail(key, max + 1);
  return tail
    .filter((m) => m.sequence < beforeSequence)
    .slice(-max)
    .map(historyEntry);
}

/**
 * History entries of stored messages already decoded: a store may hand back
 * the same StoredMessage objects turn after turn (LevelDB keeps a thread's
 * recent tail in memory), and a stored message never changes.
 */
const decodedHistory = new WeakMap<StoredMessage, HistoryEntry>();

function historyEntry(stored: StoredMessage): HistoryEntry {
  let entry = decodedHistory.get(stored);
  if (entry === undefined) {
    entry = decodeHistoryEntry(stored);
    decodedHistory.set(stored, entry);
  }
  return entry;
}

/**
 * Records the history entry of a message this process just appended, from the message it appended: the
 * next turn of the thread finds it without decoding the stored bytes (the reply's chain report is a
 * google.protobuf.Struct, slow to decode). The entry is the one decodeHistoryEntry makes of the stored bytes.
 */
export function rememberAppended(
  stored: StoredMessage,
  message: Pick<Message, "parts" | "metadata" | "role">,
  text: string = messageText(message),
): void {
  // The first turn of a thread (its messages 1 and 2) is read back from the database by the next one (a
  // store caches a thread's tail once it has read it), so an entry for those objects would never be used.
  if (stored.sequence <= 2 || decodedHistory.has(stored)) return;
  decodedHistory.set(stored, historyEntryOf(stored, message, text));
}

function decodeHistoryEntry(stored: StoredMessage): HistoryEntry {
  const message = fromBinary(MessageSchema, stored.payload);
  return historyEntryOf(stored, message, messageText(message));
}

function historyEntryOf(
  stored: StoredMessage,
  message: Pick<Message, "metadata" | "role">,
  text: string,
): HistoryEntry {
  const source = parleyMetadataOf(message).source;
  return {
    sequence: stored.sequence,
    provenance: stored.provenance,
    text,
    ...(source !== undefined ? { source } : {}),
    ...(stored.provenance === "imported" ? { role: message.role === Role.AGENT ? "agent" : "user" } : {}),
  } as HistoryEntry;
}
