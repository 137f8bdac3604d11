import { hash } from "node:crypto";

/** The domain tag the digest starts with, length-prefixed, made once. */
const domain = lengthPrefixed(Buffer.from("parley.new-context.v1"));

function lengthPrefixed(field: Buffer): Buffer {
  const out = Buffer.allocUnsafe(4 + field.byteLength);
  out.writeUInt32BE(field.byteLength, 0);
  field.copy(out, 4);
  return out;
}

/**
 * The contextId of a message sent without one, derived from (tenant,
 * messageId, message bytes) instead of drawn at random. A true retry (same
 * tenant, messageId and bytes) therefore lands in the context of the first
 * send, where the busy guard attaches it to the running task and the thread's
 * messageId index answers it with the first task once that has ended; a
 * message with another messageId, or the same messageId with other bytes,
 * gets a context of its own. Nothing extra is stored, so this holds across
 * restarts and replicas for as long as the first conversation is kept.
 */
export function contextIdOfNewConversation(tenant: string, messageId: string, payload: Uint8Array): string {
  // Length-prefixed fields under a domain tag: no two different triples hash the same input. The input is
  // written into one buffer and hashed at once, not through a Buffer per field and an update each; the
  // bytes hashed are the same as those updates', so are the contextIds.
  const tenantBytes = Buffer.byteLength(tenant);
  const idBytes = Buffer.byteLength(messageId);
  const input = Buffer.allocUnsafe(domain.byteLength + 12 + tenantBytes + idBytes + payload.byteLength);
  let at = domain.copy(input, 0);
  at = input.writeUInt32BE(tenantBytes, at);
  at += input.write(tenant, at, "utf8");
  at = input.writeUInt32BE(idBytes, at);
  at += input.write(messageId, at, "utf8");
  at = input.writeUInt32BE(payload.byteLength, at);
  input.set(payload, at);
  // One-shot hash (Node >= 20.12; package.json asks for 20.19): no Hash object per send.
  const hex = hash("sha256", input, "hex");
  // Shaped like the UUIDs the contextIds of earlier versions carried.
  return `ctx-${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20, 32)}`;
}
