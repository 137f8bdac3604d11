// The identities of threads, tenants, tasks, message ids and push configs, the same in every backend: SHA-256
// over a versioned domain tag and the fields, each length-prefixed, so distinct ids never share a digest.
import { fromHex, lengthPrefixedUtf8, longLivedFromHex, sha256Hex, toHex } from "./bytes.js";
import { checkId } from "./ids.js";
import { RecentMap, RecentPairMap } from "./recent-map.js";

export const HASH_BYTES = 32;

/** A field of fewer UTF-8 bytes than this has a length prefix of ASCII bytes (0, 0, 0, n). */
const ASCII_LENGTHS = 0x80;

/** `field` after its length prefix, or undefined when that prefix is not ASCII (see prefixedText). */
function prefixed(field: string): string | undefined {
  const length = Buffer.byteLength(field, "utf8");
  return length < ASCII_LENGTHS ? `\0\0\0${String.fromCharCode(length)}${field}` : undefined;
}

/**
 * The string whose UTF-8 is lengthPrefixedUtf8([tag, ...fields]), or undefined when a field has 128 UTF-8
 * bytes or more: its length's last byte would not be ASCII, and no string encodes to that byte alone. Hashing
 * this string spares building the bytes in a Buffer first. Its UTF-8
 * is exactly the bytes lengthPrefixedUtf8 writes, a lone surrogate included (U+FFFD in both; ids.spec checks).
 */
function prefixedText(tag: string, fields: readonly string[]): string | undefined {
  let text = prefixed(tag);
  for (const field of fields) {
    const next = prefixed(field);
    if (text === undefined || next === undefined) return undefined;
    text += next;
  }
  return text;
}

/** The lowercase hex of digest(tag, fields). */
function hexDigest(tag: string, fields: readonly string[]): string {
  const text = prefixedText(tag, fields);
  return sha256Hex(text ?? lengthPrefixedUtf8([tag, ...fields]));
}

export function digest(tag: string, fields: readonly string[]): Uint8Array {
  return fromHex(hexDigest(tag, fields));
}

const RECENT_DIGESTS = 4_096;
/**
 * The digests of recently used threads, tenants and tasks, one cache per tag, keyed by the ids themselves: one
 * send hashes the same ids several times (lease, append, indexes, history read), and a key joined from the fields
 * would be a new string to hash on every lookup. The digests are never mutated, and are cut from slabs of their
 * own (longLivedFromHex), not from Node's pool.
 */
const recentThreads = new RecentPairMap<Uint8Array>(RECENT_DIGESTS);
const recentTasks = new RecentPairMap<Uint8Array>(RECENT_DIGESTS);
const recentTenants = new RecentMap<string, Uint8Array>(RECENT_DIGESTS);
/** The hex of the thread and task digests made here: the in-process tables (locks, caches, leases) key by it. */
const hexes = new WeakMap<Uint8Array, string>();

function cachedPair(cache: RecentPairMap<Uint8Array>, tag: string, first: string, second: string): Uint8Array {
  let found = cache.get(first, second);
  if (found === undefined) {
    const hex = hexDigest(tag, [first, second]);
    found = longLivedFromHex(hex);
    hexes.set(found, hex);
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
    found = longLivedFromHex(hexDigest("parley.tenant.v1", [tenant]));
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
