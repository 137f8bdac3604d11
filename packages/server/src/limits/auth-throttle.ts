export interface AuthThrottle {
  /** Milliseconds until `address` may try to authenticate again; 0 when it may now. */
  blockedFor(address: string): number;
  /** Counts a failed authentication of `address`. */
  failed(address: string): void;
}

/**
 * Failed authentications per client address, as a token bucket of `perMinute` (refilled at that rate): once it is
 * empty the address is refused before its key is looked at, until a token is back. 0 switches it off. At most
 * `maxAddresses` are held (full buckets go first, then the oldest), so a spread of addresses cannot grow memory.
 */
export function createAuthThrottle(
  perMinute: number,
  now: () => number = () => performance.now(),
  maxAddresses = 10_000,
): AuthThrottle {
  if (perMinute <= 0) return { blockedFor: () => 0, failed: () => {} };
  const perMs = perMinute / 60_000;
  const buckets = new Map<string, { tokens: number; at: number }>();
  const refill = (bucket: { tokens: number; at: number }, t: number) => {
    bucket.tokens = Math.min(perMinute, bucket.tokens + (t - bucket.at) * perMs);
    bucket.at = t;
  };
  return {
    blockedFor(address) {
      const bucket = buckets.get(address);
      if (!bucket) return 0;
      refill(bucket, now());
      return bucket.tokens >= 1 ? 0 : Math.ceil((1 - bucket.tokens) / perMs);
    },
    failed(address) {
      const t = now();
      let bucket = buckets.get(address);
      if (!bucket) {
        if (buckets.size >= maxAddresses) {
          for (const [key, b] of buckets) {
            refill(b, t);
            if (b.tokens >= perMinute) buckets.delete(key);
          }
          if (buckets.size >= maxAddresses) buckets.delete(buckets.keys().next().value!);
        }
        bucket = { tokens: perMinute, at: t };
        buckets.set(address, bucket);
      } else {
        refill(bucket, t);
      }
      bucket.tokens = Math.max(0, bucket.tokens - 1);
    },
  };
}
