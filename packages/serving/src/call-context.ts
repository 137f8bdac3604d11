import type { DescMethod, DescService } from "@bufbuild/protobuf";
import { Code, ConnectError, type ContextValues, createContextKey, type HandlerContext } from "@connectrpc/connect";

export interface CallContextInit {
  /** "in-process" for the direct transport; the wire protocol ("grpc") for a call that came over the network. */
  readonly protocolName: string;
  readonly service: DescService;
  readonly method: DescMethod;
  readonly requestMethod: string;
  readonly url: string;
  /** The call's own header object (the transport copied the caller's); the context takes it as is. */
  readonly requestHeader: Headers;
  readonly contextValues: ContextValues;
  readonly requestSignal: AbortSignal;
  readonly shutdownSignal?: AbortSignal;
  readonly timeoutMs?: number;
}

/** A handler context whose call can be ended, as the network handlers end theirs. */
export interface CallContext extends HandlerContext {
  /** Ends the call: the handler's signal fires with `reason`; listeners on the caller's signals are removed. */
  abort(reason: unknown): void;
}

const timedOut = () => new ConnectError("the operation timed out", Code.DeadlineExceeded);
const noTimeout = () => undefined;

/**
 * The handler context of one call that Parley runs itself (an in-process call,
 * or a gRPC or Connect call on Parley's own routes: see service-calls.ts), with only the objects the call
 * uses. connect's createHandlerContext builds a deadline controller and a
 * linked controller with a listener on four signals, and copies the request
 * header into a new Headers, for every call.
 *
 * Here the handler's signal, and the listeners on the caller's and the
 * shutdown signals that feed it, are made the first time the handler reads
 * `signal`: a call that never does (GetTask) makes no AbortController, adds
 * no listener and dispatches no abort event; one that only needs to hear of
 * the abort (a blocking SendMessage,
 * through onAbort below) gets the listeners on the caller's and the shutdown
 * signals, and no signal of its own. The response header and trailer are
 * made when first read too. What a handler can see is the same: its signal
 * fires when the caller aborts (with its reason), when the server shuts down,
 * at the deadline, and when the call ends; read after any of those, it is
 * already aborted with that reason.
 */
export function createCallContext(init: CallContextInit): CallContext {
  return new LeanCallContext(init);
}

const noop = () => {};

/**
 * Calls `listener` once when the handler's signal fires (the caller went away, shutdown, the deadline, the call's
 * end), or at once when it already has; returns the function that stops listening. The same as a listener on
 * `ctx.signal`, but an in-process context then makes no signal: a SendMessage that waits for its run this way
 * builds no AbortController and dispatches no abort event.
 */
export function onAbort(ctx: HandlerContext, listener: () => void): () => void {
  if (ctx instanceof LeanCallContext) return ctx.watch(listener);
  const { signal } = ctx;
  if (signal.aborted) {
    listener();
    return noop;
  }
  signal.addEventListener("abort", listener, { once: true });
  return () => signal.removeEventListener("abort", listener);
}

/**
 * A class rather than an object literal with getters: V8 builds a literal with accessors in its runtime, a call
 * out of JavaScript per context, while instances of a class share their getters on the prototype.
 */
class LeanCallContext implements CallContext {
  readonly service: DescService;
  readonly method: DescMethod;
  readonly protocolName: string;
  readonly requestMethod: string;
  readonly url: string;
  readonly requestHeader: Headers;
  readonly values: ContextValues;
  readonly timeoutMs: () => number | undefined = noTimeout;
  private readonly requestSignal: AbortSignal;
  private readonly shutdownSignal: AbortSignal | undefined;
  private controller: AbortController | undefined;
  /** Why the call ended before anyone read its signal: the reason that signal will carry. */
  private endedWith: { reason: unknown } | undefined;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private listeners: { caller: () => void; shutdown: () => void } | undefined;
  /** What onAbort registered: called when the call ends, whether or not the signal was made. */
  private watchers: (() => void)[] | undefined;
  private header: Headers | undefined;
  private trailer: Headers | undefined;

  constructor(init: CallContextInit) {
    this.protocolName = init.protocolName;
    this.service = init.service;
    this.method = init.method;
    this.requestMethod = init.requestMethod;
    this.url = init.url;
    this.requestHeader = init.requestHeader;
    this.values = init.contextValues;
    this.requestSignal = init.requestSignal;
    this.shutdownSignal = init.shutdownSignal;
    if (init.timeoutMs !== undefined) {
      const deadline = Date.now() + init.timeoutMs;
      this.timeoutMs = () => deadline - Date.now();
      if (init.timeoutMs <= 0) this.abort(timedOut());
      else this.timer = setTimeout(() => this.abort(timedOut()), init.timeoutMs);
    }
  }

  get responseHeader(): Headers {
    this.header ??= new Headers();
    return this.header;
  }

  get responseTrailer(): Headers {
    this.trailer ??= new Headers();
    return this.trailer;
  }

  get signal(): AbortSignal {
    if (this.controller) return this.controller.signal;
    const controller = new AbortController();
    this.controller = controller;
    const early = this.endedWith ?? this.abortedFromOutside();
    if (early) {
      this.stopTimer();
      this.endedWith = early;
      controller.abort(early.reason);
    } else {
      this.listen();
    }
    return controller.signal;
  }

  /** onAbort's listener; called at once when the call has already ended. */
  watch(listener: () => void): () => void {
    if (this.controller?.signal.aborted || this.endedWith || this.abortedFromOutside()) {
      listener();
      return noop;
    }
    this.listen();
    this.watchers ??= [];
    const { watchers } = this;
    watchers.push(listener);
    return () => {
      const i = watchers.indexOf(listener);
      if (i >= 0) watchers.splice(i, 1);
    };
  }

  abort(reason: unknown): void {
    this.stopTimer();
    const { controller, listeners, watchers } = this;
    if (listeners) {
      this.listeners = undefined;
      this.requestSignal.removeEventListener("abort", listeners.caller);
      this.shutdownSignal?.removeEventListener("abort", listeners.shutdown);
    }
    if (!controller) this.endedWith ??= this.abortedFromOutside() ?? { reason };
    else if (!controller.signal.aborted) controller.abort(reason);
    if (watchers) {
      this.watchers = undefined;
      for (const watcher of watchers) watcher();
    }
  }

  /** Listens on the caller's and the shutdown signals, once, for the signal or a watcher. */
  private listen(): void {
    if (this.listeners) return;
    const listeners = {
      caller: () => this.abort(this.requestSignal.reason),
      shutdown: () => this.abort(this.shutdownSignal?.reason),
    };
    this.listeners = listeners;
    this.requestSignal.addEventListener("abort", listeners.caller);
    this.shutdownSignal?.addEventListener("abort", listeners.shutdown);
  }

  private stopTimer(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
  }

  /** A caller or shutdown abort that happened while nobody listened (the caller's wins: it is the call's own). */
  private abortedFromOutside(): { reason: unknown } | undefined {
    if (this.requestSignal.aborted) return { reason: this.requestSignal.reason };
    if (this.shutdownSignal?.aborted) return { reason: this.shutdownSignal.reason };
    return undefined;
  }
}

/** The network address a call came from (its TCP peer); unset for in-process calls. */
export const clientAddressKey = createContextKey<string | undefined>(undefined, { description: "client address" });
