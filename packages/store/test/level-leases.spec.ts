import { describe, expect, it } from "vitest";
import { createLevelLeases } from "../src/level/level-leases.js";

describe("LevelDB in-process leases", () => {
  it("forgets old released leases but never hands out a token an earlier holder of that context had", async () => {
    const leases = createLevelLeases();
    const first = { tenant: "t", contextId: "first" };
    const grant = leases.tryAcquireSync(first, "task-1", 60_000)!;
    const staleFence = { key: first, taskId: "task-1", token: grant.token };
    expect(await leases.release(staleFence)).toBe(true);
    // Enough other contexts run and end that the first context's released lease is forgotten (at most 20 000 kept).
    for (let i = 0; i < 25_000; i++) {
      const key = { tenant: "t", contextId: `c${i}` };
      const g = leases.tryAcquireSync(key, `task-${i}`, 60_000)!;
      // Each fresh context starts above every forgotten token.
      expect(g.token).toBeGreaterThan(0);
      expect(await leases.release({ key, taskId: `task-${i}`, token: g.token })).toBe(true);
    }
    const again = leases.tryAcquireSync(first, "task-2", 60_000)!;
    expect(again.token).toBeGreaterThan(grant.token);
    expect(() => leases.check(staleFence)).toThrow(expect.objectContaining({ code: "FENCED" }));
    expect(() => leases.check({ key: first, taskId: "task-2", token: again.token })).not.toThrow();
  });

  it("keeps a lease that was taken again out of the released set, so forgetting it later cannot drop a live lease", async () => {
    const leases = createLevelLeases();
    const key = { tenant: "t", contextId: "busy" };
    const g1 = leases.tryAcquireSync(key, "a", 60_000)!;
    await leases.release({ key, taskId: "a", token: g1.token });
    const g2 = leases.tryAcquireSync(key, "b", 60_000)!;
    for (let i = 0; i < 25_000; i++) {
      const other = { tenant: "t", contextId: `o${i}` };
      const g = leases.tryAcquireSync(other, "x", 60_000)!;
      await leases.release({ key: other, taskId: "x", token: g.token });
    }
    // Still held: a second acquire is refused and the holder's fence is live.
    expect(leases.tryAcquireSync(key, "c", 60_000)).toBeNull();
    expect(() => leases.check({ key, taskId: "b", token: g2.token })).not.toThrow();
    expect(await leases.holder(key)).toEqual({ taskId: "b", token: g2.token });
  });
});
