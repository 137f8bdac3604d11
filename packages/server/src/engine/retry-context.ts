import { createHash } from "node:crypto";

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
  const hash = createHash("sha256");
  // Length-prefixed fields under a domain tag: no two different triples hash the same input.
  for (const field of [Buffer.from("parley.new-context.v1"), Buffer.from(tenant), Buffer.from(messageId), payload]) {
    const length = Buffer.alloc(4);
    length.writeUInt32BE(field.byteLength);
    hash.update(length).update(field);
  }
  const hex = hash.digest("hex");
  // Shaped like the UUIDs the contextIds of earlier versions carried.
  return `ctx-${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20, 32)}`;
}
