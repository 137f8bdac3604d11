import { describe, expect, it } from "vitest";
import { createRateLimiter } from "../src/limits/rate-limiter.js";

// The bucket arithmetic on an injected clock; the interceptor wiring is proved
// over the network in reliability-limits.spec.ts.
describe("createRateLimiter", () => {
  it("lets a full burst through, then refills at the rate and names when to retry", () => {
    let t = 0;
    const limiter = createRateLimiter({ ratePerSecond: 10, burst: 3, now: () => t });
    expect([1, 2, 3].map(() => limiter.take("a").allowed)).toEqual([true, true, true]);
    expect(limiter.take("a")).toEqual({ allowed: false, retryAfterMs: 100 });
    t = 50;
    expect(limiter.take("a")).toEqual({ allowed: false, retryAfterMs: 50 });
    t = 100;
    expect(limiter.take("a").allowed).toBe(true);
    expect(limiter.take("a").allowed).toBe(false);
    t = 10_000;
    expect([1, 2, 3, 4].map(() => limiter.take("a").allowed)).toEqual([true, true, true, false]);
  });

  it("keeps one bucket per key", () => {
    const t = 0;
    const limiter = createRateLimiter({ ratePerSecond: 1, burst: 1, now: () => t });
    expect(limiter.take("alice").allowed).toBe(true);
    expect(limiter.take("alice").allowed).toBe(false);
    expect(limiter.take("bob").allowed).toBe(true);
  });

  it("is off at rate 0", () => {
    const limiter = createRateLimiter({ ratePerSecond: 0, burst: 0 });
    for (let i = 0; i < 10_000; i++) expect(limiter.take("a").allowed).toBe(true);
  });

  it("forgets idle full buckets instead of growing without bound, without changing any decision", () => {
    let t = 0;
    const limiter = createRateLimiter({ ratePerSecond: 1, burst: 1, now: () => t, maxKeys: 2 });
    expect(limiter.take("a").allowed).toBe(true);
    expect(limiter.take("b").allowed).toBe(true);
    // "a" is still empty: it must survive the sweep that makes room for "c".
    expect(limiter.take("c").allowed).toBe(true);
    expect(limiter.take("a").allowed).toBe(false);
    t = 1_000;
    expect(limiter.take("a").allowed).toBe(true);
  });
});
