import type { DescMethod, DescService } from "@bufbuild/protobuf";
import { Code, ConnectError, type ContextValues, type HandlerContext } from "@connectrpc/connect";

export interface InProcessContextInit {
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
export interface InProcessContext extends HandlerContext {
  /** Ends the call: the handler's signal fires with `reason`; listeners on the caller's signals are removed. */
  abort(reason: unknown): void;
}

const timedOut = () => new ConnectError("the operation timed out", Code.DeadlineExceeded);
const noTimeout = () => undefined;

/**
 * The handler context of one in-process call, with only the objects the call
 * uses. connect's createHandlerContext builds a deadline controller and a
 * linked controller with a listener on four signals, and copies the request
 * header into a new Headers, for every call.
 *
 * Here the handler's signal, and the listeners on the caller's and the
 * shutdown signals that feed it, are made the first time the handler reads
 * `signal`: a call that never does (a SendMessage answered with a Message)
 * makes no AbortController, adds no listener and dispatches no abort event
 * (about 5 us of CPU per call, Node 20). The response header and trailer are
 * made when first read too. What a handler can see is the same: its signal
 * fires when the caller aborts (with its reason), when the server shuts down,
 * at the deadline, and when the call ends; read after any of those, it is
 * already aborted with that reason.
 */
export function createInProcessContext(init: InProcessContextInit): InProcessContext {
  const { requestSignal, shutdownSignal } = init;
  let controller: AbortController | undefined;
  /** Why the call ended before anyone read its signal: the reason that signal will carry. */
  let endedWith: { reason: unknown } | undefined;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let responseHeader: Headers | undefined;
  let responseTrailer: Headers | undefined;

  /** The reason of a caller or shutdown abort that happened while nobody listened (the caller's wins, as it is the call's own). */
  const abortedFromOutside = (): { reason: unknown } | undefined => {
    if (requestSignal.aborted) return { reason: requestSignal.reason };
    if (shutdownSignal?.aborted) return { reason: shutdownSignal.reason };
    return undefined;
  };
  const end = (reason: unknown) => {
    if (timer !== undefined) clearTimeout(timer);
    timer = undefined;
    if (controller) {
      requestSignal.removeEventListener("abort", onCallerAbort);
      shutdownSignal?.removeEventListener("abort", onShutdown);
      if (!controller.signal.aborted) controller.abort(reason);
      return;
    }
    endedWith ??= abortedFromOutside() ?? { reason };
  };
  function onCallerAbort() {
    end(requestSignal.reason);
  }
  function onShutdown() {
    end(shutdownSignal?.reason);
  }
  const signalOf = (): AbortSignal => {
    if (controller) return controller.signal;
    controller = new AbortController();
    const early = endedWith ?? abortedFromOutside();
    if (early) {
      if (timer !== undefined) clearTimeout(timer);
      timer = undefined;
      endedWith = early;
      controller.abort(early.reason);
    } else {
      requestSignal.addEventListener("abort", onCallerAbort);
      shutdownSignal?.addEventListener("abort", onShutdown);
    }
    return controller.signal;
  };

  let timeoutMs: () => number | undefined = noTimeout;
  if (init.timeoutMs !== undefined) {
    const deadline = Date.now() + init.timeoutMs;
    timeoutMs = () => deadline - Date.now();
    if (init.timeoutMs <= 0) end(timedOut());
    else timer = setTimeout(() => end(timedOut()), init.timeoutMs);
  }
  return {
    service: init.service,
    method: init.method,
    protocolName: "in-process",
    requestMethod: init.requestMethod,
    url: init.url,
    requestHeader: init.requestHeader,
    get responseHeader() {
      responseHeader ??= new Headers();
      return responseHeader;
    },
    get responseTrailer() {
      responseTrailer ??= new Headers();
      return responseTrailer;
    },
    values: init.contextValues,
    get signal() {
      return signalOf();
    },
    timeoutMs,
    abort: end,
  };
}
