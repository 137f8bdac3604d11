// The identities of threads, tenants, tasks, message ids and push configs, the same in every backend: SHA-256
// over a versioned domain tag and the fields, each length-prefixed, so distinct ids never share a digest.
import { lengthPrefixedUtf8, sha256, toHex } from "./bytes.js";
import { checkId } from "./ids.js";
import { RecentMap, RecentPairMap } from "./recent-map.js";

export const HASH_BYTES = 32;

export function digest(tag: string, fields: readonly string[]): Uint8Array {
  return sha256(lengthPrefixedUtf8([tag, ...fields]));
}

const RECENT_DIGESTS = 4_096;
/**
 * The digests of recently used threads, tenants and tasks, one cache per tag, keyed by the ids themselves: one
 * send hashes the same ids several times (lease, append, indexes, history read), and a key joined from the fields
 * would be a new string to hash on every lookup. The digests are never mutated.
 */
const recentThreads = new RecentPairMap<Uint8Array>(RECENT_DIGESTS);
const recentTasks = new RecentPairMap<Uint8Array>(RECENT_DIGESTS);
const recentTenants = new RecentMap<string, Uint8Array>(RECENT_DIGESTS);
/** The hex of the thread and task digests made here: the in-process tables (locks, caches, leases) key by it. */
const hexes = new WeakMap<Uint8Array, string>();

function cachedPair(cache: RecentPairMap<Uint8Array>, tag: string, first: string, second: string): Uint8Array {
  let found = cache.get(first, second);
  if (found === undefined) {
    found = digest(tag, [first, second]);
    hexes.set(found, toHex(found));
    cache.set(first, second, found);
  }
  return found;
}

export const threadHash = (tenant: string, contextId: string) =>
  cachedPair(recentThreads, "parley.thread.v1", tenant, contextId);
export const taskHash = (tenant: string, taskId: string) => cachedPair(recentTasks, "parley.task.v1", tenant, taskId);
export function tenantHash(tenant: string): Uint8Array {
  let found = recentTenants.get(tenant);
  if (found === undefined) {
    found = digest("parley.tenant.v1", [tenant]);
    recentTenants.set(tenant, found);
  }
  return found;
}
export const messageIdHash = (messageId: string) => digest("parley.message-id.v1", [messageId]);
export const configHash = (configId: string) => digest("parley.push-config.v1", [configId]);

/**
 * The lowercase hex of a digest, made once for the thread and task digests above (every other array is
 * converted on each call). Two digests of different tags have distinct hex (a SHA-256 collision aside), so
 * tables may share one key space across tags.
 */
export const digestHex = (digestBytes: Uint8Array): string => hexes.get(digestBytes) ?? toHex(digestBytes);

/** The hex thread digest under which a (tenant, contextId) conversation is stored. */
export function threadDigest(tenant: string, contextId: string): string {
  return digestHex(threadHash(checkId("tenant", tenant), checkId("contextId", contextId)));
}
