import { getEventListeners } from "node:events";
import { Code, ConnectError, createHandlerContext } from "@connectrpc/connect";
import { A2AService } from "@parley/proto";
import { describe, expect, it } from "vitest";
import { type CallContextInit, createCallContext, onAbort } from "../src/call-context.js";

const init = (over: Partial<CallContextInit> = {}): CallContextInit => ({
  protocolName: "in-process",
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

describe("the lean handler context", () => {
  it("listens on nothing until its signal is read, and a signal read after the call is already aborted with the call's end", () => {
    const caller = new AbortController();
    const shutdown = new AbortController();
    const ctx = createCallContext(init({ requestSignal: caller.signal, shutdownSignal: shutdown.signal }));
    expect(getEventListeners(caller.signal, "abort")).toHaveLength(0);
    ctx.abort(over);
    expect(ctx.signal.aborted).toBe(true);
    expect(ctx.signal.reason).toBe(over);
    expect(getEventListeners(shutdown.signal, "abort")).toHaveLength(0);
  });

  it("fires on the caller's abort with its reason once read, and removes its listeners when the call ends", () => {
    const caller = new AbortController();
    const shutdown = new AbortController();
    const ctx = createCallContext(init({ requestSignal: caller.signal, shutdownSignal: shutdown.signal }));
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
    const ctx = createCallContext(init({ requestSignal: caller.signal }));
    caller.abort("gone");
    ctx.abort(over);
    expect(ctx.signal.reason).toBe("gone");

    const shutdown = new AbortController();
    const other = createCallContext(init({ shutdownSignal: shutdown.signal }));
    shutdown.abort("stopping");
    expect(other.signal.reason).toBe("stopping");
  });

  it("ends at its deadline, read or not, and reports the time left", async () => {
    const ctx = createCallContext(init({ timeoutMs: 20 }));
    expect(ctx.timeoutMs()).toBeGreaterThan(0);
    await new Promise((resolve) => setTimeout(resolve, 40));
    expect(ctx.signal.aborted).toBe(true);
    expect(ConnectError.from(ctx.signal.reason).code).toBe(Code.DeadlineExceeded);

    const read = createCallContext(init({ timeoutMs: 20 }));
    const { signal } = read;
    await new Promise((resolve) => setTimeout(resolve, 40));
    expect(ConnectError.from(signal.reason).code).toBe(Code.DeadlineExceeded);
    expect(createCallContext(init()).timeoutMs()).toBeUndefined();
  });

  it("makes its response header and trailer once, when first read", () => {
    const ctx = createCallContext(init());
    ctx.responseHeader.set("parley-stream-start", "3");
    expect(ctx.responseHeader.get("parley-stream-start")).toBe("3");
    expect(ctx.responseTrailer).toBe(ctx.responseTrailer);
  });

  it("tells onAbort of the caller's abort, the deadline and the call's end, with only the caller's listeners", async () => {
    const caller = new AbortController();
    const shutdown = new AbortController();
    const ctx = createCallContext(init({ requestSignal: caller.signal, shutdownSignal: shutdown.signal }));
    const heard: string[] = [];
    const stop = onAbort(ctx, () => heard.push("first"));
    onAbort(ctx, () => heard.push("second"));
    expect(getEventListeners(caller.signal, "abort")).toHaveLength(1);
    expect(getEventListeners(shutdown.signal, "abort")).toHaveLength(1);
    stop();
    caller.abort("gone");
    expect(heard).toEqual(["second"]);
    expect(getEventListeners(caller.signal, "abort")).toHaveLength(0);
    expect(getEventListeners(shutdown.signal, "abort")).toHaveLength(0);
    // The signal, read afterwards, carries the caller's reason; a listener added now hears at once.
    expect(ctx.signal.reason).toBe("gone");
    onAbort(ctx, () => heard.push("late"));
    ctx.abort(over);
    expect(heard).toEqual(["second", "late"]);

    const ended = createCallContext(init());
    const onEnd: string[] = [];
    onAbort(ended, () => onEnd.push("ended"));
    ended.abort(over);
    ended.abort(over);
    expect(onEnd).toEqual(["ended"]);
    expect(ended.signal.reason).toBe(over);

    const timed = createCallContext(init({ timeoutMs: 10 }));
    const reasons: unknown[] = [];
    onAbort(timed, () => reasons.push(timed.signal.reason));
    await new Promise((resolve) => setTimeout(resolve, 30));
    expect(reasons.map((r) => ConnectError.from(r).code)).toEqual([Code.DeadlineExceeded]);
  });

  it("listens on the signal of any other handler context", () => {
    const caller = new AbortController();
    const ctx = createHandlerContext({
      service: A2AService,
      method: A2AService.method.sendMessage,
      protocolName: "connect",
      requestMethod: "POST",
      url: "http://localhost/",
      requestSignal: caller.signal,
    });
    const heard: string[] = [];
    const stop = onAbort(ctx, () => heard.push("stopped"));
    stop();
    onAbort(ctx, () => heard.push("gone"));
    caller.abort("gone");
    onAbort(ctx, () => heard.push("already"));
    expect(heard).toEqual(["gone", "already"]);
  });
});
