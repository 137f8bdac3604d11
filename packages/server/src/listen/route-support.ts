// What Parley's own RPC routes (the `*-route.ts` files here) share: their options and method table, the
// request's one message out of its envelopes, and the header and backpressure helpers of a node:http2 answer.
import type { IncomingHttpHeaders, OutgoingHttpHeaders } from "node:http";
import type { Http2ServerResponse } from "node:http2";
import type { DescMessage, DescMethod, DescMethodServerStreaming, DescMethodUnary } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import {
  type Compression,
  createMethodSerializationLookup,
  envelopeDecompress,
  type MethodSerializationLookup,
  type UniversalHandlerOptions,
} from "@connectrpc/connect/protocol";
import type { ServiceCalls } from "../service-calls.js";

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
    const url = `/${method.parent.typeName}/${method.name}`;
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

/** Resolves when the response may take more ('drain'), or when it is gone. */
export function drained(res: Http2ServerResponse): Promise<void> {
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
 * Calls `each` with every message of a handler's stream, after the first (which the caller already read), waiting
 * for the socket to take each one; stops when the response is gone. Rejects with the stream's failure, or with a
 * failure of `each` (encoding); the caller then ends the stream.
 */
export async function pumpStream(
  res: Http2ServerResponse,
  messages: AsyncIterator<unknown>,
  first: IteratorResult<unknown>,
  frame: (message: unknown) => Promise<Uint8Array>,
): Promise<boolean> {
  let next = first;
  while (!next.done) {
    const bytes = await frame(next.value);
    if (res.destroyed) return false;
    if (!res.write(bytes)) await drained(res);
    if (res.destroyed) return false;
    next = await messages.next();
  }
  return true;
}
