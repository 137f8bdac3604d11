// The PostgreSQL backend's key columns: the same digests as the LevelDB layout (core/digests.ts), as Buffers,
// so a thread or task has one identity whichever backend holds it.
import { decodeUtf8 } from "../core/bytes.js";
import { configHash, taskHash, tenantHash, threadHash } from "../core/digests.js";
import { checkId } from "../core/ids.js";
import { StoreError } from "../types.js";

/** A view of the same bytes as a Buffer, the type pg binds as bytea. */
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

/** Checks both ids, as every caller that holds a thread key (a fence, a lease) needs them checked. */
export const threadKeyOf = (tenant: string, contextId: string): Buffer =>
  asBuffer(threadHash(checkId("tenant", tenant), checkId("contextId", contextId)));
export const tenantKeyOf = (tenant: string): Buffer => asBuffer(tenantHash(tenant));
export const taskKeyOf = (tenant: string, taskId: string): Buffer => asBuffer(taskHash(tenant, taskId));
export const configKeyOf = (configId: string): Buffer => asBuffer(configHash(configId));
