import {
  create,
  type DescMessage,
  type DescMethodStreaming,
  type DescMethodUnary,
  type DescService,
  isMessage,
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

// The stream adapters are module-level generator functions on purpose: a
// generator function declared inside a call is a new function with its own
// prototype each time, which gave every open stream extra hidden classes.

async function* messagesOf<D extends DescMessage>(desc: D, input: AsyncIterable<unknown>) {
  for await (const m of input) yield asMessage(desc, m);
}

async function* responsesOf<D extends DescMessage>(desc: D, produced: AsyncIterable<unknown>, ctx: InProcessContext) {
  try {
    for await (const out of produced) yield asMessage(desc, out);
  } finally {
    // Runs when the stream ends and when the caller stops reading: the handler sees its signal fire either way.
    ctx.abort(callOver);
  }
}

/**
 * A Connect transport that calls the service implementations of this process
 * directly: the same interceptors and handler contexts as over the network,
 * but no serialisation, no framing and no HTTP. The embedded bridge uses it so
 * a JSON-RPC request is parsed once (JSON to protobuf) and its reply encoded
 * once (protobuf to JSON).
 */
export function createDirectTransport(
  services: DirectServices,
  interceptors: readonly Interceptor[],
  shutdownSignal?: AbortSignal,
): Transport {
  const chain = (next: (req: UnaryRequest | StreamRequest) => Promise<UnaryResponse | StreamResponse>) =>
    interceptors.reduceRight((inner, interceptor) => interceptor(inner), next);

  function implOf(service: DescService, localName: string): AnyImpl {
    const impl = (services.get(service.typeName)?.impl as Record<string, unknown> | undefined)?.[localName];
    if (typeof impl !== "function") {
      throw new ConnectError(
        `${service.typeName}.${localName} has no implementation on this server`,
        Code.Unimplemented,
      );
    }
    return impl as AnyImpl;
  }

  function contextFor(req: UnaryRequest | StreamRequest, timeoutMs: number | undefined) {
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

  return {
    async unary(method, signal, timeoutMs, header, input, contextValues) {
      const impl = implOf(method.parent, method.localName);
      const run = chain(async (req) => {
        const ctx = contextFor(req, timeoutMs);
        try {
          const output = await impl((req as UnaryRequest).message, ctx);
          return {
            stream: false,
            service: method.parent,
            method,
            header: ctx.responseHeader,
            trailer: ctx.responseTrailer,
            message: asMessage(method.output, output),
          } satisfies UnaryResponse;
        } finally {
          // As over the network: the handler's signal fires when the call is over.
          ctx.abort(callOver);
        }
      });
      return (await run({
        ...requestOf(method, header, contextValues, signal),
        stream: false,
        message: asMessage(method.input, input),
      })) as UnaryResponse<never, never>;
    },

    async stream(method, signal, timeoutMs, header, input, contextValues) {
      const impl = implOf(method.parent, method.localName);
      const run = chain(async (req) => {
        const ctx = contextFor(req, timeoutMs);
        const request = req as StreamRequest;
        // Server streaming takes exactly one request message; the implementations here are all server-streaming.
        let first: unknown;
        for await (const m of request.message) {
          first = m;
          break;
        }
        if (first === undefined) throw new ConnectError("the stream carried no request message", Code.InvalidArgument);
        const produced = impl(first, ctx) as AsyncIterable<unknown>;
        return {
          stream: true,
          service: method.parent,
          method,
          header: ctx.responseHeader,
          trailer: ctx.responseTrailer,
          message: responsesOf(method.output, produced, ctx),
        } satisfies StreamResponse;
      });
      return (await run({
        ...requestOf(method, header, contextValues, signal),
        stream: true,
        message: messagesOf(method.input, input),
      })) as StreamResponse<never, never>;
    },
  };
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
    url: `in-process:///${method.parent.typeName}/${method.name}`,
    header: new Headers(header),
    contextValues: contextValues ?? createContextValues(),
    signal: signal ?? new AbortController().signal,
  };
}
