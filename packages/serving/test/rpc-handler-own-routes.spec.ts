// The RPC handler with its own routes off (ownRoutes: false, as the benchmark's connect-node rows run it): every
// call on Parley's port, gRPC and Connect over HTTP/2 too, is connect-node's, and answers as plain connect-node does.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { callStream, callUnary } from "./fixtures/call-views.js";
import { startTwins, type Twins, wires } from "./fixtures/twin-servers.js";

let twins: Twins;
beforeAll(async () => {
  twins = await startTwins(false);
});
afterAll(async () => {
  await twins.close();
});

describe("the RPC handler without its own routes", () => {
  it.each(wires.filter((w) => w.ownRoute))("leaves $name to connect-node, unary and streaming", async (wire) => {
    const [unary, reference] = await twins.both((s) => callUnary(s, wire, "ok"));
    expect(unary.header["x-context"]).toBe("connect");
    expect(unary).toEqual(reference);
    const [stream, streamReference] = await twins.both((s) => callStream(s, wire, "count:2"));
    expect(stream.header["x-context"]).toBe("connect");
    expect(stream).toEqual(streamReference);
  });
});
