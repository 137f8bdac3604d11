// Parley's RPC handler (its own gRPC and Connect routes over HTTP/2, connect-node behind them) against plain
// connect-node, serving the same service implementation with the same routes and router options, called by
// connect-es's clients over every protocol and HTTP version: what each client observes must be the same, but
// where Parley's routes answer otherwise on purpose, which is then asserted as such.

import { createClient } from "@connectrpc/connect";
import { grpcHealthV1 } from "@parley/proto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type CallView, callStream, callUnary, errorView, servedBy } from "./fixtures/call-views.js";
import { errorInfo, errorText } from "./fixtures/probe-service.js";
import { startTwins, type Twins, type Wire, wires } from "./fixtures/twin-servers.js";

let twins: Twins;
beforeAll(async () => {
  twins = await startTwins();
  // GetTask "forward:ID" on either server asks connect-node for task ID over gRPC.
  twins.service.forward.to = twins.connectNode.transport(wires[0]!);
});
afterAll(async () => {
  await twins.close();
});

/** Both answers without the field that names the handler context, once it names the one each server made. */
function comparable(wire: Wire, [parley, reference]: [CallView, CallView]): [CallView, CallView] {
  return [servedBy(parley, wire.ownRoute ? "parley" : "connect"), servedBy(reference, "connect")];
}

const statusUpdate = (i: number) => ({ statusUpdate: { taskId: `u${i}`, status: { state: "TASK_STATE_WORKING" } } });

describe.each(wires)("$name", (wire) => {
  it("answers a unary call the same: the message, a header set twice, a trailer", async () => {
    const answers = await twins.both((s) => callUnary(s, wire, "ok"));
    // The call reached the handler through the route this wire is meant to take.
    expect(answers.map((a) => a.header["x-context"])).toEqual([wire.ownRoute ? "parley" : "connect", "connect"]);
    const [parley, reference] = comparable(wire, answers);
    expect(parley).toEqual(reference);
    expect(parley.messages).toEqual([{ id: "ok", contextId: "c1", status: { state: "TASK_STATE_COMPLETED" } }]);
    expect(parley.header["x-impl-multi"]).toBe("a, b");
    expect(parley.trailer["x-impl-trailer"]).toBe("t1");
  });

  it("streams the same messages between the same header and trailer", async () => {
    const [parley, reference] = comparable(wire, await twins.both((s) => callStream(s, wire, "count:3")));
    expect(parley).toEqual(reference);
    expect(parley.messages).toEqual([statusUpdate(0), statusUpdate(1), statusUpdate(2)]);
    expect(parley.header["x-stream-header"]).toBe("s1");
    expect(parley.trailer["x-stream-trailer"]).toBe("s2");
  });

  it("answers a stream of no messages the same", async () => {
    const [parley, reference] = comparable(wire, await twins.both((s) => callStream(s, wire, "count:0")));
    expect(parley).toEqual(reference);
    expect(parley).toMatchObject({ messages: [], header: { "x-stream-header": "s1" } });
    expect(parley.error).toBeUndefined();
  });

  it("fails a unary call the same: code, message, ErrorInfo detail and the error's metadata", async () => {
    const [parley, reference] = comparable(wire, await twins.both((s) => callUnary(s, wire, "not-found")));
    expect(parley.error).toEqual({
      code: "NotFound",
      message: errorText,
      details: [errorInfo],
      metadata: { "x-error-meta": "m1", "x-request-encoding": "identity" },
    });
    expect(parley).toEqual(reference);
  });

  it("passes on an error from a call of the handler's own as connect-node does, without that call's headers", async () => {
    const [parley, reference] = comparable(wire, await twins.both((s) => callUnary(s, wire, "forward:not-found")));
    // An error read off the wire carries the other answer's headers as metadata (its content type among them):
    // connect-es relays its code, message and details only.
    expect(parley.error).toEqual({
      code: "NotFound",
      message: errorText,
      details: [errorInfo],
      metadata: { "x-request-encoding": "identity" },
    });
    expect(parley).toEqual(reference);
  });

  it("hides the text of an error that is not a ConnectError the same: internal error", async () => {
    const [parley, reference] = comparable(wire, await twins.both((s) => callUnary(s, wire, "throw")));
    expect(parley.error).toMatchObject({ code: "Internal", message: "internal error", details: [] });
    expect(parley.error?.metadata).toEqual({ "x-request-encoding": "identity" });
    expect(parley).toEqual(reference);
  });

  it("fails a stream after its messages the same: the messages, then the error", async () => {
    const [parley, reference] = comparable(wire, await twins.both((s) => callStream(s, wire, "fail-after:2")));
    expect(parley).toEqual(reference);
    expect(parley.messages).toEqual([statusUpdate(0), statusUpdate(1)]);
    expect(parley.error).toEqual({
      code: "NotFound",
      message: errorText,
      details: [errorInfo],
      metadata: { "x-error-meta": "m1", "x-stream-header": "s1" },
    });
  });

  it("fails a stream before its first message with the same error", async () => {
    const [parley, reference] = comparable(wire, await twins.both((s) => callStream(s, wire, "fail-after:0")));
    expect(parley.error).toMatchObject({ code: "NotFound", message: errorText, details: [errorInfo] });
    if (wire.protocol === "grpc") {
      // Deliberate (grpc-route.ts): a call that fails before its first message is answered trailers-only, one
      // HEADERS frame with the status, where connect-node sends its headers first; the handler's go unsent.
      expect(parley.header).toEqual({});
      expect(reference.header).toMatchObject({ "content-type": "application/grpc+proto", "x-stream-header": "s1" });
      expect(parley.error?.metadata).toEqual({ "x-error-meta": "m1" });
      expect(reference.error?.metadata).toEqual({ "x-error-meta": "m1", "x-stream-header": "s1" });
    } else {
      expect(parley).toEqual(reference);
    }
  });

  it("answers a service it does not serve as connect-node does: UNIMPLEMENTED, from HTTP 404", async () => {
    const [parley, reference] = await twins.both(async (s) => {
      const health = createClient(grpcHealthV1.Health, s.transport(wire));
      return health.check({}).then(
        () => undefined,
        (e: unknown) => errorView(e),
      );
    });
    expect(parley).toEqual(reference);
    expect(parley).toEqual({ code: "Unimplemented", message: "HTTP 404", details: [], metadata: {} });
  });
});
