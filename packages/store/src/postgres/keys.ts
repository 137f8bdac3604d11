import { bytesEqual, concatBytes, decodeUtf8, encodeUtf8, lengthPrefixed, sha256 } from "../bytes.js";
import { threadDigest } from "../level-thread-store.js";
import { StoreError } from "../types.js";

// The same versioned, length-prefixed SHA-256 digests as the LevelDB layout,
// so a thread or task has one identity whichever backend holds it.
function digest(tag: string, fields: readonly string[]): Buffer {
  return asBuffer(sha256(lengthPrefixed([encodeUtf8(tag), ...fields.map(encodeUtf8)])));
}

export function asBuffer(bytes: Uint8Array): Buffer {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** A plain Uint8Array copy: callers compare prototypes, and pg's Buffers may share a pool. */
export function asBytes(value: Uint8Array): Uint8Array {
  return new Uint8Array(value);
}

/** An id as the bytes stored for it. */
export const idBytes = (id: string): Buffer => Buffer.from(id, "utf8");

/** A stored id back as text; bytes that are not UTF-8 were not written by this store. */
export function idText(bytes: Buffer, what: string): string {
  try {
    return decodeUtf8(bytes);
  } catch (cause) {
    throw new StoreError("CORRUPT", `a stored ${what} is not valid UTF-8`, { cause });
  }
}

export const threadKeyOf = (tenant: string, contextId: string): Buffer =>
  Buffer.from(threadDigest(tenant, contextId), "hex");
export const tenantKeyOf = (tenant: string): Buffer => digest("parley.tenant.v1", [tenant]);
export const taskKeyOf = (tenant: string, taskId: string): Buffer => digest("parley.task.v1", [tenant, taskId]);
export const configKeyOf = (configId: string): Buffer => digest("parley.push-config.v1", [configId]);

const CURSOR_VERSION = 1;
const CURSOR_TAG_BYTES = 8;

export const cursorKinds = { messages: 0x6d, threads: 0x6c, tasks: 0x64, push: 0x70 } as const;

/** Binds a cursor to the query it was issued for, so one replayed against another query is refused. */
export function cursorTag(kind: string, fields: readonly string[]): Uint8Array {
  return digest(`parley.cursor.${kind}.v1`, fields).subarray(0, CURSOR_TAG_BYTES);
}

export function encodeCursor(kind: number, tag: Uint8Array, position: Uint8Array): string {
  return asBuffer(concatBytes([Uint8Array.of(CURSOR_VERSION, kind), tag, position])).toString("base64url");
}

export function decodeCursor(cursor: unknown, kind: number, tag: Uint8Array, what: string): Buffer {
  const refuse = () => new StoreError("INVALID_CURSOR", `${what} cursor is not a cursor issued by this store`);
  if (typeof cursor !== "string" || cursor.length === 0 || !/^[A-Za-z0-9_-]+$/.test(cursor)) throw refuse();
  const bytes = Buffer.from(cursor, "base64url");
  if (bytes.toString("base64url") !== cursor) throw refuse();
  const head = 2 + CURSOR_TAG_BYTES;
  if (bytes.length < head || bytes[0] !== CURSOR_VERSION || bytes[1] !== kind) throw refuse();
  if (!bytesEqual(bytes.subarray(2, head), tag)) {
    throw new StoreError("INVALID_CURSOR", `${what} cursor was issued for a different query`);
  }
  return bytes.subarray(head);
}
