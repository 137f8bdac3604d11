/** Lease times are whole milliseconds; a lease shorter than this cannot be renewed in time by any real holder. */
export const minLeaseTtlMs = 10;

export function checkTtl(ttlMs: unknown): number {
  if (typeof ttlMs !== "number" || !Number.isSafeInteger(ttlMs) || ttlMs < minLeaseTtlMs) {
    throw new RangeError(`ttlMs must be an integer of milliseconds >= ${minLeaseTtlMs}, got ${String(ttlMs)}`);
  }
  return ttlMs;
}
