import { getEventListeners } from "node:events";
import { Code, ConnectError } from "@connectrpc/connect";
import { A2AService } from "@parley/proto";
import { describe, expect, it } from "vitest";
import { createInProcessContext, type InProcessContextInit } from "../src/in-process-context.js";

const init = (over: Partial<InProcessContextInit> = {}): InProcessContextInit => ({
  service: A2AService,
  method: A2AService.method.sendMessage,
  requestMethod: "POST",
  url: "in-process:///lf.a2a.v1.A2AService/SendMessage",
  requestHeader: new Headers(),
  contextValues: new Map() as never,
  requestSignal: new AbortController().signal,
  ...over,
});

const over = new ConnectError("the call is over", Code.Canceled);

describe("the in-process handler context", () => {
  it("listens on nothing until its signal is read, and a signal read after the call is already aborted with the call's end", () => {
    const caller = new AbortController();
    const shutdown = new AbortController();
    const ctx = createInProcessContext(init({ requestSignal: caller.signal, shutdownSignal: shutdown.signal }));
    expect(getEventListeners(caller.signal, "abort")).toHaveLength(0);
    ctx.abort(over);
    expect(ctx.signal.aborted).toBe(true);
    expect(ctx.signal.reason).toBe(over);
    expect(getEventListeners(shutdown.signal, "abort")).toHaveLength(0);
  });

  it("fires on the caller's abort with its reason once read, and removes its listeners when the call ends", () => {
    const caller = new AbortController();
    const shutdown = new AbortController();
    const ctx = createInProcessContext(init({ requestSignal: caller.signal, shutdownSignal: shutdown.signal }));
    const { signal } = ctx;
    expect(signal.aborted).toBe(false);
    expect(getEventListeners(caller.signal, "abort")).toHaveLength(1);
    caller.abort("gone");
    expect(signal.reason).toBe("gone");
    expect(getEventListeners(caller.signal, "abort")).toHaveLength(0);
    expect(getEventListeners(shutdown.signal, "abort")).toHaveLength(0);
    ctx.abort(over);
    expect(signal.reason).toBe("gone");
  });

  it("carries the caller's or the shutdown's reason when they came before the signal was read", () => {
    const caller = new AbortController();
    const ctx = createInProcessContext(init({ requestSignal: caller.signal }));
    caller.abort("gone");
    ctx.abort(over);
    expect(ctx.signal.reason).toBe("gone");

    const shutdown = new AbortController();
    const other = createInProcessContext(init({ shutdownSignal: shutdown.signal }));
    shutdown.abort("stopping");
    expect(other.signal.reason).toBe("stopping");
  });

  it("ends at its deadline, read or not, and reports the time left", async () => {
    const ctx = createInProcessContext(init({ timeoutMs: 20 }));
    expect(ctx.timeoutMs()).toBeGreaterThan(0);
    await new Promise((resolve) => setTimeout(resolve, 40));
    expect(ctx.signal.aborted).toBe(true);
    expect(ConnectError.from(ctx.signal.reason).code).toBe(Code.DeadlineExceeded);

    const read = createInProcessContext(init({ timeoutMs: 20 }));
    const { signal } = read;
    await new Promise((resolve) => setTimeout(resolve, 40));
    expect(ConnectError.from(signal.reason).code).toBe(Code.DeadlineExceeded);
    expect(createInProcessContext(init()).timeoutMs()).toBeUndefined();
  });

  it("makes its response header and trailer once, when first read", () => {
    const ctx = createInProcessContext(init());
    ctx.responseHeader.set("parley-stream-start", "3");
    expect(ctx.responseHeader.get("parley-stream-start")).toBe("3");
    expect(ctx.responseTrailer).toBe(ctx.responseTrailer);
  });
});
