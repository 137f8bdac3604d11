// Parley's RPC handler against plain connect-node (see rpc-handler.spec.ts) while a stream runs: a deadline that
// passes mid-stream, and a client that cancels mid-stream. What the handler saw (how its signal fired) counts as
// much as what the client saw: a handler that never hears of the end streams on for no one.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { callStream, servedBy } from "./fixtures/call-views.js";
import type { AbortSeen } from "./fixtures/probe-service.js";
import { type Served, startTwins, type Twins, type Wire, wires } from "./fixtures/twin-servers.js";

let twins: Twins;
beforeAll(async () => {
  twins = await startTwins();
});
afterAll(async () => {
  await twins.close();
});

/** How long a handler may take to hear that its call ended, before the test calls it lost. */
const hearWithinMs = 2_000;

/** How the probed handler's signal fired, or "still running" when it did not within hearWithinMs. */
function heard(probe: string): Promise<AbortSeen | "still running"> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<"still running">((resolve) => {
    timer = setTimeout(() => resolve("still running"), hearWithinMs);
  });
  return Promise.race([twins.service.abortSeen(probe), late]).finally(() => clearTimeout(timer));
}

/** A deadline the server alone knows of: the header without the client's own timer, so the server's end shows. */
function deadlineHeader(wire: Wire, ms: number): Record<string, string> {
  return wire.protocol === "connect" ? { "connect-timeout-ms": String(ms) } : { "grpc-timeout": `${ms}m` };
}

let probes = 0;

describe.each(wires)("$name", (wire) => {
  const kind = wire.ownRoute ? "parley" : "connect";
  const by = (s: Served) => (s.name === "parley" ? kind : "connect");

  it("ends a stream at its deadline the same: DEADLINE_EXCEEDED after some messages, the handler told", async () => {
    const [parley, reference] = await twins.both(async (s) => {
      const probe = `deadline-${++probes}`;
      const view = await callStream(s, wire, "tick", { headers: { ...deadlineHeader(wire, 150), "x-probe": probe } });
      return { view: servedBy(view, by(s)), handler: await heard(probe) };
    });
    // How many messages fit in the deadline is the machine's business; how the stream ends is not.
    expect(parley.view.messages.length).toBeGreaterThan(0);
    expect(reference.view.messages.length).toBeGreaterThan(0);
    expect(parley.view.error).toEqual(reference.view.error);
    expect(parley.view.error).toMatchObject({ code: "DeadlineExceeded", message: "the operation timed out" });
    expect(parley.view.header).toEqual(reference.view.header);
    expect([parley.handler, reference.handler]).toEqual([4, 4]); // Code.DeadlineExceeded
  });

  it("tells the handler when its client cancels mid-stream, as connect-node does", async () => {
    const [parley, reference] = await twins.both(async (s) => {
      const probe = `cancel-${++probes}`;
      const stop = new AbortController();
      const view = await callStream(s, wire, "tick", {
        signal: stop.signal,
        headers: { "x-probe": probe },
        onMessage: (n) => {
          if (n === 3) stop.abort();
        },
      });
      return { view: servedBy(view, by(s)), handler: await heard(probe) };
    });
    expect(parley.view).toEqual(reference.view);
    expect(parley.view.messages.length).toBe(3);
    expect(parley.view.error?.code).toBe("Canceled");
    // The handler's signal fired, CANCELED, and its stream was let go of.
    expect([parley.handler, reference.handler]).toEqual([1, 1]); // Code.Canceled
  });
});
