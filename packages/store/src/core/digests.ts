// The identities of threads, tenants, tasks, message ids and push configs, the same in every backend: SHA-256
// over a versioned domain tag and the fields, each length-prefixed, so distinct ids never share a digest.
import { lengthPrefixedUtf8, sha256, toHex } from "./bytes.js";
import { checkId } from "./ids.js";
import { RecentMap } from "./recent-map.js";

export const HASH_BYTES = 32;

export function digest(tag: string, fields: readonly string[]): Uint8Array {
  return sha256(lengthPrefixedUtf8([tag, ...fields]));
}

const RECENT_DIGESTS = 4_096;
/**
 * The digests of recently used threads, tenants and tasks: one send hashes the
 * same ids several times (append, indexes, history read). The cache key
 * length-prefixes every field, so it is unambiguous; the digests are never mutated.
 */
const recentDigests = new RecentMap<string, Uint8Array>(RECENT_DIGESTS);
function cachedDigest(tag: string, fields: readonly string[]): Uint8Array {
  let cacheKey = tag;
  for (const field of fields) cacheKey += `\u0000${field.length}:${field}`;
  let found = recentDigests.get(cacheKey);
  if (!found) {
    found = digest(tag, fields);
    recentDigests.set(cacheKey, found);
  }
  return found;
}

export const threadHash = (tenant: string, contextId: string) => cachedDigest("parley.thread.v1", [tenant, contextId]);
export const tenantHash = (tenant: string) => cachedDigest("parley.tenant.v1", [tenant]);
export const taskHash = (tenant: string, taskId: string) => cachedDigest("parley.task.v1", [tenant, taskId]);
export const messageIdHash = (messageId: string) => digest("parley.message-id.v1", [messageId]);
export const configHash = (configId: string) => digest("parley.push-config.v1", [configId]);

/** The hex thread digest under which a (tenant, contextId) conversation is stored. */
export function threadDigest(tenant: string, contextId: string): string {
  return toHex(threadHash(checkId("tenant", tenant), checkId("contextId", contextId)));
}
