// What Parley's own RPC routes (the `*-route.ts` files here) share: their options and method table, the
// request's one message out of its envelopes, and the header and backpressure helpers of a node:http2 answer.
import type { IncomingHttpHeaders, OutgoingHttpHeaders } from "node:http";
import { type Http2ServerRequest, type Http2ServerResponse, constants as h2 } from "node:http2";
import type { DescMessage, DescMethod, DescMethodServerStreaming, DescMethodUnary } from "@bufbuild/protobuf";
import { Code, ConnectError, createContextValues, type StreamResponse } from "@connectrpc/connect";
import {
  type Compression,
  compressionNegotiate,
  createMethodSerializationLookup,
  createMethodUrl,
  encodeEnvelope,
  envelopeCompress,
  envelopeDecompress,
  type MethodSerializationLookup,
  type UniversalHandlerOptions,
} from "@connectrpc/connect/protocol";
import { clientAddressKey } from "../call-context.js";
import { classifyDecodeError } from "../interceptors/decode-errors.js";
import type { CallInit, ServiceCalls } from "../service-calls.js";
import type { NodeRequest, NodeResponse } from "./node-http.js";
import { type ReadBody, readBodyOf } from "./request-body.js";

export interface RpcRouteOptions {
  /** Runs each call through the interceptors to its implementation (service-calls.ts). */
  readonly calls: ServiceCalls;
  /**
   * The methods of the services `calls` reaches; a route answers their unary and server-streaming ones, the
   * fallback everything else.
   */
  readonly methods: readonly DescMethod[];
  /**
   * The router's options as connect-es validates them (validateUniversalHandlerOptions), so that every route
   * takes the same encodings, limits, deadlines and codec options.
   */
  readonly handlerOptions: Pick<
    UniversalHandlerOptions,
    | "acceptCompression"
    | "readMaxBytes"
    | "writeMaxBytes"
    | "compressMinBytes"
    | "maxTimeoutMs"
    | "binaryOptions"
    | "jsonOptions"
  >;
}

export interface Route {
  readonly method: DescMethodUnary | DescMethodServerStreaming;
  readonly url: string;
  readonly serialization: MethodSerializationLookup<DescMessage, DescMessage>;
}

/** The unary and server-streaming methods of `options.methods` by request path, with connect-es's serialization. */
export function createRouteTable(options: RpcRouteOptions): ReadonlyMap<string, Route> {
  const { handlerOptions } = options;
  const routes = new Map<string, Route>();
  for (const method of options.methods) {
    if (method.methodKind !== "unary" && method.methodKind !== "server_streaming") continue;
    const url = createMethodUrl("/", method);
    const serialization = createMethodSerializationLookup(
      method,
      handlerOptions.binaryOptions,
      handlerOptions.jsonOptions,
      handlerOptions,
    );
    routes.set(url, { method: method as DescMethodUnary | DescMethodServerStreaming, url, serialization });
  }
  return routes;
}

/** Answers one call a route took: its whole answer, every failure included. */
export type ServeCall = (
  route: Route,
  binary: boolean,
  req: Http2ServerRequest,
  res: Http2ServerResponse,
  body: ReadBody,
) => Promise<void>;

/**
 * A route's request handler: a POST over HTTP/2 to one of `routes`, whose body the body reader read and whose
 * content type `pick` takes, goes to the `serve` that `pick` names; every other request to `fallback`.
 */
export function dispatchCalls(
  routes: ReadonlyMap<string, Route>,
  pick: (
    route: Route,
    contentType: string | null,
  ) => { readonly binary: boolean; readonly serve: ServeCall } | undefined,
  fallback: (req: NodeRequest, res: NodeResponse) => void,
): (req: NodeRequest, res: NodeResponse) => void {
  return (req, res) => {
    const route = "stream" in req && req.method === "POST" ? routes.get(req.url) : undefined;
    const picked = route && pick(route, req.headers["content-type"] ?? null);
    const body = picked && readBodyOf(req);
    if (!route || !picked || !body) {
      fallback(req, res);
      return;
    }
    const h2req = req as Http2ServerRequest;
    // serve answers every failure itself; this is for a fault in answering one (the stream reset, not the process).
    picked.serve(route, picked.binary, h2req, res as Http2ServerResponse, body).catch(() => {
      if (!h2req.stream.destroyed) h2req.stream.close(h2.NGHTTP2_INTERNAL_ERROR);
    });
  };
}

/** A protocol's header names for a call's deadline and compression, and its deadline's parser (connect-es's). */
export interface NegotiationHeaders {
  readonly timeout: string;
  readonly encoding: string;
  readonly acceptEncoding: string;
  readonly parseTimeout: (value: string | null, maxTimeoutMs: number) => { timeoutMs?: number; error?: ConnectError };
}

/** What a call's request headers ask for: the headers as the interceptors read them, its deadline, its encodings. */
export function negotiate(
  req: Http2ServerRequest,
  names: NegotiationHeaders,
  options: Pick<RpcRouteOptions["handlerOptions"], "acceptCompression" | "maxTimeoutMs">,
) {
  const header = webHeaders(req.headers);
  const timeout = names.parseTimeout(header.get(names.timeout), options.maxTimeoutMs);
  const compression = compressionNegotiate(
    options.acceptCompression,
    header.get(names.encoding),
    header.get(names.acceptEncoding),
    names.acceptEncoding,
  );
  return { header, timeout, compression };
}

/** Envelopes a response's payloads, each compressed as negotiated once it is `compressMinBytes` or more. */
export function createEnveloper(compression: Compression | null, compressMinBytes: number) {
  return async (flags: number, data: Uint8Array): Promise<Uint8Array> => {
    const envelope = await envelopeCompress({ flags, data }, compression, compressMinBytes);
    return encodeEnvelope(envelope.flags, envelope.data);
  };
}

/** Why a call's handler signal fires when its client resets or closes the stream before the answer's end. */
const clientGone = new ConnectError("the client closed the stream before the answer's end", Code.Canceled);

/**
 * A call's init and its request message, decoded by the route's serialization from the bytes `read` gives (a
 * failure to decode answered INVALID_ARGUMENT, as the router's routes answer it: decode-errors.ts), after the
 * negotiation's own failures. The call's signal fires when the client goes before the answer's end.
 */
export async function decodedCall(
  route: Route,
  binary: boolean,
  protocolName: string,
  res: Http2ServerResponse,
  negotiated: ReturnType<typeof negotiate>,
  read: () => Promise<Uint8Array>,
): Promise<{ call: CallInit; input: unknown }> {
  const gone = new AbortController();
  // Not writableFinished: Node sets it on a reset stream too (it emits 'finish' then 'close' either way).
  res.once("close", () => {
    if (!res.writableEnded) gone.abort(clientGone);
  });
  const { header, timeout, compression } = negotiated;
  if (compression.error) throw compression.error;
  if (timeout.error) throw timeout.error;
  let input: unknown;
  try {
    input = route.serialization.getI(binary).parse(await read());
  } catch (error) {
    throw classifyDecodeError(ConnectError.from(error), route.method.input.typeName) ?? error;
  }
  const call: CallInit = {
    method: route.method,
    protocolName,
    url: route.url,
    header,
    contextValues: createContextValues().set(clientAddressKey, res.req?.socket?.remoteAddress),
    signal: gone.signal,
    ...(timeout.timeoutMs !== undefined ? { timeoutMs: timeout.timeoutMs } : {}),
  };
  return { call, input };
}

/** What connect-es calls the method kinds in its "missing input message for ... method" errors. */
const kindText = { unary: "unary", server_streaming: "server-streaming" } as const;

/**
 * The one message of an enveloped request body (gRPC, Connect streaming): no envelope larger than readMaxBytes,
 * decompressed with the negotiated encoding; with `endStreamFlag` (Connect), envelopes flagged end-of-stream are
 * skipped as connect-es skips them. The errors are connect-es's, word for word, so a client sees the same answer on
 * every route.
 */
export async function envelopedMessage(
  bytes: Buffer,
  route: Route,
  readMaxBytes: number,
  compression: Compression | null,
  endStreamFlag?: number,
): Promise<Uint8Array> {
  const kind = kindText[route.method.methodKind];
  let offset = 0;
  /** The next message's bytes, decompressed, or undefined at the body's end. */
  const next = async (): Promise<Uint8Array | undefined> => {
    while (offset < bytes.length) {
      const rest = bytes.length - offset;
      if (rest < 5) throw new ConnectError("protocol error: incomplete envelope", Code.InvalidArgument);
      const flags = bytes[offset]!;
      const length = bytes.readUInt32BE(offset + 1);
      if (length > readMaxBytes) {
        throw new ConnectError(
          `message size ${length} is larger than configured readMaxBytes ${readMaxBytes}`,
          Code.ResourceExhausted,
        );
      }
      if (rest < 5 + length) throw new ConnectError("protocol error: incomplete envelope", Code.InvalidArgument);
      const data = bytes.subarray(offset + 5, offset + 5 + length);
      offset += 5 + length;
      const envelope = await envelopeDecompress({ flags, data }, compression, readMaxBytes);
      if (endStreamFlag !== undefined && (envelope.flags & endStreamFlag) === endStreamFlag) continue;
      return envelope.data;
    }
    return undefined;
  };
  const first = await next();
  if (first === undefined) {
    throw new ConnectError(`protocol error: missing input message for ${kind} method`, Code.Unimplemented);
  }
  if ((await next()) !== undefined) {
    throw new ConnectError(`protocol error: received extra input message for ${kind} method`, Code.Unimplemented);
  }
  return first;
}

/** What a thrown value is answered as: itself when a ConnectError, an INTERNAL without its text otherwise. */
export function asConnectError(thrown: unknown): ConnectError {
  return thrown instanceof ConnectError
    ? thrown
    : new ConnectError("internal error", Code.Internal, undefined, undefined, thrown);
}

/** Adds a Headers object's fields to Node's header object (a name set twice keeps both values). */
export function appendHeaders(target: OutgoingHttpHeaders, headers: Headers, prefix = ""): OutgoingHttpHeaders {
  for (const [field, value] of headers) {
    const name = prefix + field;
    const current = target[name];
    if (current === undefined) target[name] = value;
    else target[name] = Array.isArray(current) ? [...current, value] : [String(current), value];
  }
  return target;
}

/** A request's headers as the interceptors read them: Node's, without HTTP/2's pseudo-headers. */
export function webHeaders(headers: IncomingHttpHeaders): Headers {
  const header = new Headers();
  for (const name in headers) {
    if (name.charCodeAt(0) === 58 /* ":" */) continue;
    const value = headers[name];
    if (value === undefined) continue;
    if (typeof value === "string") header.append(name, value);
    else for (const v of value) header.append(name, v);
  }
  return header;
}

/**
 * The response's stream is closed or reset: nothing more can be written. Not `res.destroyed`: Node's
 * Http2ServerResponse has none (its typings inherit one from Writable), so that reads undefined, always.
 */
export function responseGone(res: Http2ServerResponse): boolean {
  return res.stream.destroyed;
}

/** Resolves when the response may take more ('drain'), or when it is gone (its 'close' may have gone by). */
function drained(res: Http2ServerResponse): Promise<void> {
  if (responseGone(res)) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      res.off("drain", done);
      res.off("close", done);
      resolve();
    };
    res.once("drain", done);
    res.once("close", done);
  });
}

/**
 * Writes a handler's server stream: the headers with its first message (or with its end, when it has none), each
 * message once the socket has taken the last (backpressure reaches the handler, whose follower is cut by
 * limits.subscriberBufferEvents when it falls too far behind), then `finish` with the failure, if the stream failed
 * (the protocol's status trailers or end-stream message). A failure before the first message is thrown instead when
 * `throwBeforeFirst` (gRPC answers it trailers-only). Stops when the response is gone, and then ends the handler's
 * stream, so it lets go.
 */
export async function writeServerStream(
  res: Http2ServerResponse,
  responseHeader: OutgoingHttpHeaders,
  response: StreamResponse,
  frame: (message: unknown) => Promise<Uint8Array>,
  finish: (failure: unknown) => void | Promise<void>,
  throwBeforeFirst: boolean,
): Promise<void> {
  const messages = response.message[Symbol.asyncIterator]();
  let ended = false;
  try {
    let failure: unknown;
    let next: IteratorResult<unknown> | undefined;
    try {
      next = await messages.next();
      ended = next.done === true;
    } catch (error) {
      // The handler's stream failed before its first message (it is then over).
      ended = true;
      if (throwBeforeFirst) throw error;
      failure = error;
    }
    if (responseGone(res)) return;
    appendHeaders(responseHeader, response.header);
    res.writeHead(200, responseHeader);
    try {
      while (next !== undefined && !next.done) {
        const bytes = await frame(next.value);
        if (responseGone(res)) return;
        if (!res.write(bytes)) await drained(res);
        if (responseGone(res)) return;
        next = await messages.next();
        ended = next.done === true;
      }
    } catch (error) {
      // From the handler's stream (which is then over) or from encoding a message (the finally ends the stream).
      failure = error;
    }
    await finish(failure);
  } finally {
    // The client went away (or writing failed) before the handler's stream ended: end it, so it lets go.
    if (!ended) void Promise.resolve(messages.return?.()).catch(() => undefined);
  }
}
