// Page cursors of both backends: base64url of [version, kind, 8-byte query tag, position]. The tag binds a
// cursor to the query (thread and order, tenant and filters) it was issued for, so a cursor replayed against
// another query is refused; the position is the backend's own (a sequence, an index key suffix, a digest).

import { StoreError } from "../types.js";
import { bytesEqual, concatBytes } from "./bytes.js";
import { digest, HASH_BYTES } from "./digests.js";

const CURSOR_VERSION = 1;
const CURSOR_TAG_BYTES = 8;
const SEQ_BYTES = 8;

export interface CursorKind {
  readonly code: number;
  /** The operation that issues and takes it, for error messages. */
  readonly what: string;
  /** Whether a position of this length can have been issued; both backends issue the same shapes. */
  readonly fits: (length: number) => boolean;
}

/** Messages: a sequence. Threads: updatedAt + thread digest. Tasks: updatedAt + taskId. Push: config digest.
 *  Conversations: inverted createdAt + conversation digest. */
export const cursorKinds = {
  messages: { code: 0x6d, what: "readMessages", fits: (n) => n === SEQ_BYTES },
  threads: { code: 0x6c, what: "listThreads", fits: (n) => n === SEQ_BYTES + HASH_BYTES },
  tasks: { code: 0x64, what: "listTasks", fits: (n) => n > SEQ_BYTES },
  push: { code: 0x70, what: "listPushConfigs", fits: (n) => n === HASH_BYTES },
  conversations: { code: 0x73, what: "listConversations", fits: (n) => n === SEQ_BYTES + HASH_BYTES },
} as const satisfies Record<string, CursorKind>;

/** Binds a cursor to the query it was issued for. */
export function cursorTag(kind: string, fields: readonly string[]): Uint8Array {
  return digest(`parley.cursor.${kind}.v1`, fields).subarray(0, CURSOR_TAG_BYTES);
}

export function encodeCursor(kind: CursorKind, tag: Uint8Array, position: Uint8Array): string {
  return Buffer.from(concatBytes([Uint8Array.of(CURSOR_VERSION, kind.code), tag, position])).toString("base64url");
}

/** The position of a cursor this store issued for this query; INVALID_CURSOR for anything else. */
export function decodeCursor(cursor: unknown, kind: CursorKind, tag: Uint8Array): Uint8Array {
  const refuse = () => new StoreError("INVALID_CURSOR", `${kind.what} cursor is not a cursor issued by this store`);
  if (typeof cursor !== "string" || cursor.length === 0 || !/^[A-Za-z0-9_-]+$/.test(cursor)) throw refuse();
  const bytes = new Uint8Array(Buffer.from(cursor, "base64url"));
  // Buffer ignores stray trailing characters; only the exact string this store issued is accepted.
  if (Buffer.from(bytes).toString("base64url") !== cursor) throw refuse();
  const head = 2 + CURSOR_TAG_BYTES;
  if (bytes.length < head || bytes[0] !== CURSOR_VERSION || bytes[1] !== kind.code) throw refuse();
  if (!bytesEqual(bytes.subarray(2, head), tag)) {
    throw new StoreError("INVALID_CURSOR", `${kind.what} cursor was issued for a different query`);
  }
  const position = bytes.slice(head);
  if (!kind.fits(position.length)) throw refuse();
  return position;
}
