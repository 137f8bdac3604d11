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
 * uses: one AbortController, a listener on the caller's signal and on the
 * shutdown signal, and a timer only when there is a deadline. connect's
 * createHandlerContext builds a deadline controller and a linked controller
 * with a listener on four signals, and copies the request header into a new
 * Headers, for every call: about 4% of an embedded bridge send's CPU (profile).
 * The behaviour is the same: the signal fires when the caller aborts (with its
 * reason), when the server shuts down, at the deadline, and when the call ends.
 */
export function createInProcessContext(init: InProcessContextInit): InProcessContext {
  const controller = new AbortController();
  const { requestSignal, shutdownSignal } = init;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const end = (reason: unknown) => {
    if (timer !== undefined) clearTimeout(timer);
    requestSignal.removeEventListener("abort", onCallerAbort);
    shutdownSignal?.removeEventListener("abort", onShutdown);
    if (!controller.signal.aborted) controller.abort(reason);
  };
  function onCallerAbort() {
    end(requestSignal.reason);
  }
  function onShutdown() {
    end(shutdownSignal?.reason);
  }
  let timeoutMs: () => number | undefined = noTimeout;
  if (requestSignal.aborted) end(requestSignal.reason);
  else if (shutdownSignal?.aborted) end(shutdownSignal.reason);
  else {
    requestSignal.addEventListener("abort", onCallerAbort);
    shutdownSignal?.addEventListener("abort", onShutdown);
    if (init.timeoutMs !== undefined) {
      const deadline = Date.now() + init.timeoutMs;
      timeoutMs = () => deadline - Date.now();
      if (init.timeoutMs <= 0) end(timedOut());
      else timer = setTimeout(() => end(timedOut()), init.timeoutMs);
    }
  }
  return {
    service: init.service,
    method: init.method,
    protocolName: "in-process",
    requestMethod: init.requestMethod,
    url: init.url,
    requestHeader: init.requestHeader,
    responseHeader: new Headers(),
    responseTrailer: new Headers(),
    values: init.contextValues,
    signal: controller.signal,
    timeoutMs,
    abort: end,
  };
}
