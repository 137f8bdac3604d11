import { setMaxListeners } from "node:events";
import {
  create,
  type DescMessage,
  type DescMethod,
  type DescMethodStreaming,
  type DescMethodUnary,
  type DescService,
  isMessage,
  type Message,
  type MessageShape,
} from "@bufbuild/protobuf";
import {
  Code,
  ConnectError,
  type ContextValues,
  createContextValues,
  type HandlerContext,
  type Interceptor,
  type StreamRequest,
  type StreamResponse,
  type Transport,
  type UnaryRequest,
  type UnaryResponse,
} from "@connectrpc/connect";
import { createInProcessContext, type InProcessContext } from "./in-process-context.js";
import { isNetworkOnly } from "./interceptors/network-only.js";

type AnyImpl = (request: unknown, context: HandlerContext) => unknown;

/** The service implementations a direct transport calls, by service type name. */
export type DirectServices = ReadonlyMap<string, { readonly service: DescService; readonly impl: object }>;

/**
 * The reason a handler's signal fires with once its call is over. One shared
 * error: aborting without a reason builds a DOMException with a stack trace
 * per call, which showed as 2% of a streamed send's CPU.
 */
const callOver = new ConnectError("the call is over", Code.Canceled);

function asMessage<D extends DescMessage>(desc: D, value: unknown): MessageShape<D> {
  return isMessage(value, desc) ? (value as MessageShape<D>) : create(desc, value as never);
}

const over: IteratorReturnResult<undefined> = Object.freeze({ done: true, value: undefined });

/**
 * A streaming request's messages as the handler reads them, each as a message of the method's input type. A
 * class rather than a `for await` generator, as ResponseStream below: the request lives as long as the stream.
 */
class RequestMessages<D extends DescMessage> implements AsyncIterableIterator<MessageShape<D>> {
  private readonly inner: AsyncIterator<unknown>;

  constructor(
    private readonly desc: D,
    input: AsyncIterable<unknown>,
  ) {
    this.inner = input[Symbol.asyncIterator]();
  }

  [Symbol.asyncIterator](): this {
    return this;
  }

  next(): Promise<IteratorResult<MessageShape<D>>> {
    return this.inner
      .next()
      .then((result) => (result.done ? over : { done: false, value: asMessage(this.desc, result.value) }));
  }

  async return(): Promise<IteratorResult<MessageShape<D>>> {
    await this.inner.return?.();
    return over;
  }

  async throw(error: unknown): Promise<IteratorResult<MessageShape<D>>> {
    await this.return();
    throw error;
  }
}

/**
 * A streaming handler's output as the caller reads it: each value as a message of the method's output type, and
 * the handler's signal fired once the stream ends, fails or the caller stops reading. A class in front of the
 * handler's iterator, not a `for await` generator: an open stream then holds no generator frame and no queued
 * request, and an event costs one promise (the read's `then`), not a generator step's three.
 */
class ResponseStream<D extends DescMessage> implements AsyncIterableIterator<MessageShape<D>> {
  private readonly inner: AsyncIterator<unknown>;
  private ended = false;

  constructor(
    private readonly desc: D,
    produced: AsyncIterable<unknown>,
    private readonly ctx: InProcessContext,
  ) {
    this.inner = produced[Symbol.asyncIterator]();
  }

  [Symbol.asyncIterator](): this {
    return this;
  }

  next(): Promise<IteratorResult<MessageShape<D>>> {
    if (this.ended) return Promise.resolve(over);
    return this.inner.next().then(this.received, this.failed);
  }

  private readonly received = (result: IteratorResult<unknown>): IteratorResult<MessageShape<D>> => {
    if (result.done) {
      this.end();
      return over;
    }
    const value = result.value;
    // The handlers here yield messages; a plain init object (a one-value stream's) is made one.
    return isMessage(value, this.desc)
      ? (result as IteratorResult<MessageShape<D>>)
      : { done: false, value: create(this.desc, value as never) };
  };

  private readonly failed = (error: unknown): never => {
    this.end();
    throw error;
  };

  async return(): Promise<IteratorResult<MessageShape<D>>> {
    if (this.ended) return over;
    try {
      await this.inner.return?.();
    } finally {
      this.end();
    }
    return over;
  }

  async throw(error: unknown): Promise<IteratorResult<MessageShape<D>>> {
    await this.return();
    throw error;
  }

  /** The handler sees its signal fire when the stream is over, however it ended. */
  private end(): void {
    if (this.ended) return;
    this.ended = true;
    this.ctx.abort(callOver);
  }
}

/** Where a request's deadline travels through the interceptors (they copy requests with spreads, which keep it). */
const timeoutOf = Symbol("in-process timeout");
type TimedRequest = (UnaryRequest | StreamRequest) & { [timeoutOf]?: number };

/**
 * The call's own never-aborting signal, shared, for callers that pass none: a
 * handler's context listens on it only while it runs, and removes its listener.
 */
const neverAborted = new AbortController().signal;
setMaxListeners(0, neverAborted);

/**
 * A Connect transport that calls the service implementations of this process
 * directly: the same interceptors and handler contexts as over the network,
 * but no serialisation, no framing and no HTTP. The embedded bridge uses it so
 * a JSON-RPC request is parsed once (JSON to protobuf) and its reply encoded
 * once (protobuf to JSON).
 *
 * The interceptor chain is built once per transport, not per call, and leaves
 * out the interceptors marked network-only (decode-error classification: an
 * in-process request was never decoded from bytes).
 */
export function createDirectTransport(
  services: DirectServices,
  interceptors: readonly Interceptor[],
  shutdownSignal?: AbortSignal,
): Transport {
  const impls = new Map<DescMethod, AnyImpl>();
  function implOf(method: DescMethodUnary | DescMethodStreaming): AnyImpl {
    const known = impls.get(method);
    if (known) return known;
    const service = method.parent;
    const impl = (services.get(service.typeName)?.impl as Record<string, unknown> | undefined)?.[method.localName];
    if (typeof impl !== "function") {
      throw new ConnectError(
        `${service.typeName}.${method.localName} has no implementation on this server`,
        Code.Unimplemented,
      );
    }
    impls.set(method, impl as AnyImpl);
    return impl as AnyImpl;
  }

  function contextFor(req: TimedRequest) {
    const timeoutMs = req[timeoutOf];
    return createInProcessContext({
      service: req.service,
      method: req.method,
      requestMethod: req.requestMethod,
      url: req.url,
      requestSignal: req.signal,
      // The header object of this call: made by this transport below, so the handler needs no copy of it.
      requestHeader: req.header,
      contextValues: req.contextValues,
      ...(shutdownSignal ? { shutdownSignal } : {}),
      ...(timeoutMs !== undefined && timeoutMs > 0 ? { timeoutMs } : {}),
    });
  }

  async function callUnary(req: UnaryRequest): Promise<UnaryResponse> {
    const impl = implOf(req.method as DescMethodUnary);
    const ctx = contextFor(req);
    try {
      const output = await impl(req.message, ctx);
      const method = req.method as DescMethodUnary;
      return new InProcessUnaryResponse(req.service, method, ctx, asMessage(method.output, output));
    } finally {
      // As over the network: the handler's signal fires when the call is over.
      ctx.abort(callOver);
    }
  }

  async function callStream(req: StreamRequest): Promise<StreamResponse> {
    const method = req.method as DescMethodStreaming;
    const impl = implOf(method);
    const ctx = contextFor(req);
    // Server streaming takes exactly one request message; the implementations here are all server-streaming.
    let first: unknown;
    for await (const m of req.message) {
      first = m;
      break;
    }
    if (first === undefined) throw new ConnectError("the stream carried no request message", Code.InvalidArgument);
    const produced = impl(first, ctx) as AsyncIterable<unknown>;
    return {
      stream: true,
      service: req.service,
      method,
      header: ctx.responseHeader,
      trailer: ctx.responseTrailer,
      message: new ResponseStream(method.output, produced, ctx),
    } satisfies StreamResponse;
  }

  const inProcess = interceptors.filter((i) => !isNetworkOnly(i));
  const run = inProcess.reduceRight<(req: UnaryRequest | StreamRequest) => Promise<UnaryResponse | StreamResponse>>(
    (inner, interceptor) => interceptor(inner as never) as never,
    (req) => (req.stream ? callStream(req) : callUnary(req)),
  );

  return {
    async unary(method, signal, timeoutMs, header, input, contextValues) {
      implOf(method);
      const req: UnaryRequest & { [timeoutOf]?: number } = {
        ...requestOf(method, header, contextValues, signal),
        stream: false,
        message: asMessage(method.input, input),
      };
      if (timeoutMs !== undefined) req[timeoutOf] = timeoutMs;
      return (await run(req)) as UnaryResponse<never, never>;
    },

    async stream(method, signal, timeoutMs, header, input, contextValues) {
      implOf(method);
      const req: StreamRequest & { [timeoutOf]?: number } = {
        ...requestOf(method, header, contextValues, signal),
        stream: true,
        message: new RequestMessages(method.input, input),
      };
      if (timeoutMs !== undefined) req[timeoutOf] = timeoutMs;
      return (await run(req)) as StreamResponse<never, never>;
    },
  };
}

/**
 * A unary call's response, whose header and trailer are the context's, made only when read: most callers never
 * look at them. A class, so that its getters live on the prototype (see in-process-context.ts).
 */
class InProcessUnaryResponse implements UnaryResponse {
  readonly stream = false;
  constructor(
    readonly service: DescService,
    readonly method: DescMethodUnary,
    private readonly ctx: InProcessContext,
    readonly message: Message,
  ) {}

  get header(): Headers {
    return this.ctx.responseHeader;
  }

  get trailer(): Headers {
    return this.ctx.responseTrailer;
  }
}

/** What a unary and a streaming in-process request share: the call as the interceptors see it over the network. */
function requestOf<M extends DescMethodUnary | DescMethodStreaming>(
  method: M,
  header: ConstructorParameters<typeof Headers>[0],
  contextValues: ContextValues | undefined,
  signal: AbortSignal | undefined,
) {
  return {
    service: method.parent,
    method,
    requestMethod: "POST",
    url: urlOf(method),
    header: new Headers(header),
    contextValues: contextValues ?? createContextValues(),
    signal: signal ?? neverAborted,
  };
}

const urls = new WeakMap<DescMethod, string>();

/** The call's URL, made once per method. */
function urlOf(method: DescMethodUnary | DescMethodStreaming): string {
  let url = urls.get(method);
  if (url === undefined) {
    url = `in-process:///${method.parent.typeName}/${method.name}`;
    urls.set(method, url);
  }
  return url;
}
