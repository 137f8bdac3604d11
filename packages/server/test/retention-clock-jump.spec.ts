// Retention through a jump of the system clock, on a real server with both clocks injected: the wall clock (stored
// times, retention's "now") jumps two days ahead while the process measures seconds. Threads active seconds
// before the jump stay; once the process itself has measured the idle time, they go.
import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { sendRequest, startTestServer } from "./harness.js";

const day = 86_400_000;

describe("retention when the system clock jumps ahead", () => {
  it("deletes no thread that was active within its retention window by the process's own clock", async () => {
    let wall = Date.now();
    let mono = 0;
    const server = await startTestServer(
      { retention: { threadIdleDays: 1, tenants: {}, intervalMs: 60_000 } },
      { now: () => wall, monotonic: () => mono },
    );
    try {
      const a2a = server.a2a("grpc");
      const suffix = randomBytes(4).toString("hex");
      const contexts = Array.from({ length: 5 }, (_, i) => `jump-${i}-${suffix}`);
      for (const contextId of contexts) await a2a.sendMessage(sendRequest(contextId, "active just now"));
      // Seconds later by the process's clock, the system clock is set two days ahead.
      mono += 5_000;
      wall += 2 * day;
      expect(await server.parley.retention.run()).toMatchObject({ threads: 0 });
      for (const contextId of contexts) {
        const thread = await server.threads().getThreadHistory({ contextId });
        expect(thread.messages.length, contextId).toBeGreaterThan(0);
      }
      // Two days the process measured itself: now they are idle for longer than their window.
      mono += 2 * day;
      wall += 2 * day;
      expect(await server.parley.retention.run()).toMatchObject({ threads: contexts.length });
    } finally {
      await server.close();
    }
  });
});
