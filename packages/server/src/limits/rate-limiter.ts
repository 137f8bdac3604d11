/** What a rate limiter decided about one request. */
export type RateDecision =
  | { readonly allowed: true }
  /** retryAfterMs: when the next request of this key would be allowed. */
  | { readonly allowed: false; readonly retryAfterMs: number };

export interface RateLimiter {
  /** Takes one token from `key`'s bucket, if it has one. */
  take(key: string): RateDecision;
}

export interface RateLimiterOptions {
  /** Tokens added per second; 0 switches the limiter off. */
  readonly ratePerSecond: number;
  /** Bucket size: how many requests may arrive at once after a quiet spell. */
  readonly burst: number;
  /** Milliseconds clock; injectable so the bucket arithmetic can be checked exactly. */
  readonly now?: () => number;
  /** Buckets kept before idle full ones are dropped, so unknown keys cannot grow memory without bound. */
  readonly maxKeys?: number;
}

interface Bucket {
  tokens: number;
  at: number;
}

/**
 * A token bucket per key (per tenant). A token bucket rather than a fixed
 * window so a tenant that paces itself at the rate never sees a rejection at
 * a window edge, while a burst after a quiet spell is still absorbed.
 */
export function createRateLimiter(options: RateLimiterOptions): RateLimiter {
  const rate = options.ratePerSecond;
  if (rate <= 0) return { take: () => ({ allowed: true }) };
  const burst = Math.max(1, options.burst);
  const now = options.now ?? (() => performance.now());
  const maxKeys = options.maxKeys ?? 10_000;
  const buckets = new Map<string, Bucket>();

  const refill = (bucket: Bucket, t: number) => {
    bucket.tokens = Math.min(burst, bucket.tokens + ((t - bucket.at) * rate) / 1000);
    bucket.at = t;
  };

  return {
    take(key) {
      const t = now();
      let bucket = buckets.get(key);
      if (!bucket) {
        if (buckets.size >= maxKeys) {
          // A full bucket holds no state worth keeping: forgetting it changes no decision.
          for (const [k, b] of buckets) {
            refill(b, t);
            if (b.tokens >= burst) buckets.delete(k);
          }
        }
        bucket = { tokens: burst, at: t };
        buckets.set(key, bucket);
      } else {
        refill(bucket, t);
      }
      if (bucket.tokens >= 1) {
        bucket.tokens -= 1;
        return { allowed: true };
      }
      return { allowed: false, retryAfterMs: Math.max(1, Math.ceil(((1 - bucket.tokens) * 1000) / rate)) };
    },
  };
}
