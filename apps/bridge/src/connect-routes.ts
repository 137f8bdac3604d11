import { setMaxListeners } from "node:events";
import type { DescMethodServerStreaming, DescMethodUnary, DescService } from "@bufbuild/protobuf";
import {
  ConnectError,
  type ConnectRouter,
  createContextKey,
  createContextValues,
  type HandlerContext,
  type Interceptor,
  type Transport,
} from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import {
  A2AService,
  AccessService,
  parleyRequestHeaders,
  SessionService,
  TargetService,
  ThreadService,
  headers as wireHeaders,
} from "@parley/proto";
import { codeName, noteRequest } from "@parley/server";
import {
  classifyDecodeErrors,
  createDecodeErrorInterceptor,
  createStrictTextDecoder,
  rpcFramingBytes,
} from "@parley/serving";
import type { HttpRoute } from "./http-route.js";

/** The services the bridge's HTTP/1.1 port answers over Connect and gRPC-Web (what the console uses). */
export const connectServices: readonly DescService[] = [
  A2AService,
  ThreadService,
  SessionService,
  TargetService,
  AccessService,
];

/** Request headers Parley's interceptors and handlers read (and the trace context); nothing else is passed on. */
const forwardedRequestHeaders = [...parleyRequestHeaders, "traceparent", "tracestate"];
/** Response headers a client of these services reads. */
const forwardedResponseHeaders = [wireHeaders.streamStart, wireHeaders.requestId];

function pick(from: Headers, names: readonly string[], into: Headers): Headers {
  for (const name of names) {
    const value = from.get(name);
    if (value !== null) into.set(name, value);
  }
  return into;
}

async function* once<T>(value: T): AsyncIterable<T> {
  yield value;
}

function callOptions(ctx: HandlerContext) {
  const timeoutMs = ctx.timeoutMs();
  return { signal: ctx.signal, timeoutMs, header: pick(ctx.requestHeader, forwardedRequestHeaders, new Headers()) };
}

/**
 * The implementation of one service that hands every call to the bridge's
 * upstream transport: in embedded mode the server's in-process transport (the
 * same handlers and interceptors as its gRPC port: authentication, tenants,
 * rate and size limits), in remote mode the upstream server over HTTP/2. So
 * one code path serves both modes, and the console works behind either.
 */
function forwardingService(service: DescService, upstream: Transport): Record<string, unknown> {
  const impl: Record<string, unknown> = {};
  for (const method of service.methods) {
    if (method.methodKind === "unary") {
      const m = method as DescMethodUnary;
      impl[method.localName] = async (req: unknown, ctx: HandlerContext) => {
        const { signal, timeoutMs, header } = callOptions(ctx);
        const res = await upstream.unary(m, signal, timeoutMs, header, req as never);
        pick(res.header, forwardedResponseHeaders, ctx.responseHeader);
        return res.message;
      };
    } else if (method.methodKind === "server_streaming") {
      const m = method as DescMethodServerStreaming;
      impl[method.localName] = async function* (req: unknown, ctx: HandlerContext) {
        const { signal, timeoutMs, header } = callOptions(ctx);
        const res = await upstream.stream(m, signal, timeoutMs, header, once(req as never));
        // An in-process stream sets its headers when it produces its first message, and the response
        // headers leave with the first message here: copy them in between.
        let copied = false;
        for await (const message of res.message) {
          if (!copied) {
            pick(res.header, forwardedResponseHeaders, ctx.responseHeader);
            copied = true;
          }
          yield message;
        }
        if (!copied) pick(res.header, forwardedResponseHeaders, ctx.responseHeader);
      };
    }
    // Parley has no client- or bidi-streaming RPCs; a method of that kind would answer Unimplemented.
  }
  return impl;
}

/** The Node response of a call, so the interceptor below can name the call in the port's request log and metrics. */
const responseKey = createContextKey<object | undefined>(undefined);

/**
 * Notes each Connect or gRPC-Web call's outcome on the bridge's port (Connect's code name, and the error's text), as
 * the server's port logs them; the route names its protocol and RPC ("parley.v1.ThreadService/ListThreads").
 */
const noteCalls: Interceptor = (next) => async (req) => {
  const res = req.contextValues.get(responseKey);
  const note = (update: Parameters<typeof noteRequest>[1]) => {
    if (res) noteRequest(res, update);
  };
  const failed = (error: unknown) => {
    const connectError = ConnectError.from(error);
    note({ code: codeName(connectError.code), error: connectError.rawMessage });
  };
  try {
    const response = await next(req);
    if (!response.stream) {
      note({ code: "ok" });
      return response;
    }
    const messages = response.message;
    return {
      ...response,
      message: (async function* () {
        try {
          yield* messages;
          note({ code: "ok" });
        } catch (error) {
          failed(error);
          throw error;
        }
      })(),
    };
  } catch (error) {
    failed(error);
    throw error;
  }
};

export interface ConnectRoutesOptions {
  readonly upstream: Transport;
  /** Largest request message accepted. */
  readonly maxBodyBytes: number;
}

/**
 * Serves Parley's services over Connect and gRPC-Web on the bridge's HTTP/1.1
 * port under their standard paths (/lf.a2a.v1.A2AService/SendMessage, ...),
 * which never collide with JSON-RPC at / and /agents/<name>/. Browsers reach
 * them same-origin, so the console needs no CORS.
 */
export function createConnectRoutes(options: ConnectRoutesOptions): HttpRoute {
  const prefixes = connectServices.map((s) => `/${s.typeName}/`);
  const methodNames = new Set(connectServices.flatMap((s) => s.methods.map((m) => `${s.typeName}/${m.name}`)));
  const shutdown = new AbortController();
  setMaxListeners(0, shutdown.signal);
  // Invalid UTF-8 is refused as over JSON-RPC (-32700), not passed on as U+FFFD. connect-es's JSON codec
  // reads textDecoder (its JsonSerializationOptions) although the router's option type does not name it.
  const jsonOptions = { ignoreUnknownFields: true, textDecoder: createStrictTextDecoder() };
  // Undecodable requests answer INVALID_ARGUMENT here as on the server port (see decode-errors.ts there).
  const routes = classifyDecodeErrors((router: ConnectRouter) => {
    for (const service of connectServices)
      router.service(service, forwardingService(service, options.upstream) as never);
  });
  const handler = connectNodeAdapter({
    routes,
    readMaxBytes: options.maxBodyBytes,
    shutdownSignal: shutdown.signal,
    interceptors: [noteCalls, createDecodeErrorInterceptor()],
    jsonOptions,
    contextValues: (req) => createContextValues().set(responseKey, responses.get(req)),
  });
  const responses = new WeakMap<object, object>();
  return {
    matches: (pathname) => prefixes.some((p) => pathname.startsWith(p)),
    handle: (req, res) => {
      responses.set(req, res);
      // Named before the call is decoded, so a request refused before any interceptor runs is named too.
      // Only known RPC names become a method label (labels come from fixed sets), others stay "http".
      const contentType = String(req.headers["content-type"] ?? "");
      const method = new URL(req.url ?? "/", "http://bridge").pathname.slice(1);
      noteRequest(res, {
        protocol: contentType.startsWith("application/grpc-web") ? "grpc-web" : "connect",
        ...(methodNames.has(method) ? { method } : {}),
      });
      handler(req, res);
    },
    maxBodyBytes: options.maxBodyBytes + rpcFramingBytes,
    close: () => shutdown.abort(),
  };
}
