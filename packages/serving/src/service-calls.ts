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
  type HandlerContext,
  type Interceptor,
  type StreamRequest,
  type StreamResponse,
  type UnaryRequest,
  type UnaryResponse,
} from "@connectrpc/connect";
import { type CallContext, createCallContext } from "./call-context.js";
import { isNetworkOnly } from "./interceptors/network-only.js";

type AnyImpl = (request: unknown, context: HandlerContext) => unknown;

/** The service implementations the calls reach, by service type name. */
export type CallableServices = ReadonlyMap<string, { readonly service: DescService; readonly impl: object }>;

/** One call as Parley runs it itself: what the interceptors see of it, and what its handler context is made of. */
export interface CallInit {
  readonly method: DescMethodUnary | DescMethodStreaming;
  /** "in-process", or the wire protocol the call came in on ("grpc", "connect"). */
  readonly protocolName: string;
  readonly url: string;
  /** The call's own header object: the interceptors and the handler read it, nobody copies it. */
  readonly header: Headers;
  readonly contextValues: ContextValues;
  /** Fires when the caller goes away. */
  readonly signal: AbortSignal;
  readonly timeoutMs?: number;
}

/**
 * Calls into this process's service implementations through the interceptors, with the lean handler contexts of
 * call-context.ts: the one mechanism behind the in-process transport (direct-transport.ts) and the gRPC and Connect
 * routes (listen/grpc-route.ts, listen/connect-route.ts).
 */
export interface ServiceCalls {
  /** Both throw Unimplemented, before any interceptor runs, when this server has no implementation of the method. */
  unary(call: CallInit, input: unknown): Promise<UnaryResponse>;
  /** A server-streaming call: its one request message is the first of `input`. */
  stream(call: CallInit, input: AsyncIterable<unknown>): Promise<StreamResponse>;
}

/**
 * The reason a handler's signal fires with once its call is over. One shared
 * error: aborting without a reason builds a DOMException with a stack trace
 * per call.
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
    private readonly ctx: CallContext,
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

/**
 * What the handler context needs of a call beyond what the interceptors see; it travels on the request under a
 * symbol, which survives the spreads interceptors copy requests with.
 */
const callOf = Symbol("parley.call");

/** What a route's call carries through the interceptors; `context` is set once the handler's context is made. */
interface CarriedCall {
  readonly protocolName: string;
  readonly timeoutMs: number | undefined;
  context?: HandlerContext;
}

/** The header and trailer a unary handler had set when its call failed, by the error the call threw. */
const failedResponses = new WeakMap<object, { readonly header: Headers; readonly trailer: Headers }>();

/**
 * The header and trailer set by the handler of a unary call that threw `thrown`: a route sends them with the error,
 * as connect-es does. Undefined when the call failed before its handler ran.
 */
export function responseOfFailure(
  thrown: unknown,
): { readonly header: Headers; readonly trailer: Headers } | undefined {
  return typeof thrown === "object" && thrown !== null ? failedResponses.get(thrown) : undefined;
}
type CarriedRequest = (UnaryRequest | StreamRequest) & {
  [callOf]?: CarriedCall;
};

/**
 * A unary call's response, whose header and trailer are the context's, made only when read: most callers never
 * look at them. A class, so that its getters live on the prototype (see call-context.ts).
 */
class LeanUnaryResponse implements UnaryResponse {
  readonly stream = false;
  constructor(
    readonly service: DescService,
    readonly method: DescMethodUnary,
    private readonly ctx: CallContext,
    readonly message: Message,
  ) {}

  get header(): Headers {
    return this.ctx.responseHeader;
  }

  get trailer(): Headers {
    return this.ctx.responseTrailer;
  }
}

/**
 * Calls the service implementations of this process through `interceptors`, built into one chain here (not per
 * call), leaving out those marked network-only: the calls made here never were bytes for them to decode (the
 * in-process transport's are messages, and the gRPC and Connect routes decode and classify their own).
 */
export function createServiceCalls(
  services: CallableServices,
  interceptors: readonly Interceptor[],
  shutdownSignal?: AbortSignal,
): ServiceCalls {
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

  function contextFor(req: CarriedRequest) {
    const call = req[callOf];
    const timeoutMs = call?.timeoutMs;
    const context = createCallContext({
      protocolName: call?.protocolName ?? "in-process",
      service: req.service,
      method: req.method,
      requestMethod: req.requestMethod,
      url: req.url,
      requestSignal: req.signal,
      // The header object of this call: made by its caller for it, so the handler needs no copy of it.
      requestHeader: req.header,
      contextValues: req.contextValues,
      ...(shutdownSignal ? { shutdownSignal } : {}),
      ...(timeoutMs !== undefined && timeoutMs > 0 ? { timeoutMs } : {}),
    });
    if (call) call.context = context;
    return context;
  }

  async function callUnary(req: UnaryRequest): Promise<UnaryResponse> {
    const impl = implOf(req.method as DescMethodUnary);
    const ctx = contextFor(req);
    try {
      const output = await impl(req.message, ctx);
      const method = req.method as DescMethodUnary;
      return new LeanUnaryResponse(req.service, method, ctx, asMessage(method.output, output));
    } finally {
      // As connect-es does: the handler's signal fires when the call is over.
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

  const chain = interceptors.filter((i) => !isNetworkOnly(i));
  const run = chain.reduceRight<(req: UnaryRequest | StreamRequest) => Promise<UnaryResponse | StreamResponse>>(
    (inner, interceptor) => interceptor(inner as never) as never,
    (req) => (req.stream ? callStream(req) : callUnary(req)),
  );

  const requestOf = (call: CallInit) => ({
    service: call.method.parent,
    requestMethod: "POST",
    url: call.url,
    header: call.header,
    contextValues: call.contextValues,
    signal: call.signal,
    [callOf]: { protocolName: call.protocolName, timeoutMs: call.timeoutMs } as CarriedCall,
  });

  return {
    async unary(call, input) {
      const method = call.method as DescMethodUnary;
      implOf(method);
      const req: CarriedRequest = {
        ...requestOf(call),
        method,
        stream: false,
        message: asMessage(method.input, input),
      };
      try {
        return (await run(req)) as UnaryResponse;
      } catch (thrown) {
        const context = req[callOf]?.context;
        if (context && typeof thrown === "object" && thrown !== null) {
          failedResponses.set(thrown, { header: context.responseHeader, trailer: context.responseTrailer });
        }
        throw thrown;
      }
    },
    async stream(call, input) {
      const method = call.method as DescMethodStreaming;
      implOf(method);
      const req: CarriedRequest = {
        ...requestOf(call),
        method,
        stream: true,
        message: new RequestMessages(method.input, input),
      };
      return (await run(req)) as StreamResponse;
    },
  };
}

/**
 * The call's own never-aborting signal, shared, for callers that pass none: a
 * handler's context listens on it only while it runs, and removes its listener.
 */
export const neverAborted: AbortSignal = new AbortController().signal;
setMaxListeners(0, neverAborted);
