import type { OutgoingHttpHeaders } from "node:http";
import { type Http2ServerRequest, type Http2ServerResponse, constants as h2 } from "node:http2";
import type { Message } from "@bufbuild/protobuf";
import { Code, ConnectError, createContextValues, type StreamResponse } from "@connectrpc/connect";
import {
  type Compression,
  compressionNegotiate,
  createAsyncIterable,
  encodeEnvelope,
  envelopeCompress,
} from "@connectrpc/connect/protocol";
import {
  codeToHttpStatus,
  contentTypeStreamJson,
  contentTypeStreamProto,
  contentTypeUnaryJson,
  contentTypeUnaryProto,
  createEndStreamSerialization,
  endStreamFlag,
  errorToJsonBytes,
  parseContentType,
  parseTimeout,
} from "@connectrpc/connect/protocol-connect";
import { classifyDecodeError } from "../interceptors/decode-errors.js";
import type { CallInit } from "../service-calls.js";
import type { NodeRequest, NodeResponse } from "./http-front.js";
import { type ReadBody, readBodyOf } from "./request-body.js";
import {
  appendHeaders,
  asConnectError,
  createRouteTable,
  envelopedMessage,
  pumpStream,
  type Route,
  type RpcRouteOptions,
  webHeaders,
} from "./route-support.js";

// connect-es's header names, in the lower case HTTP/2 writes.
const headerTimeout = "connect-timeout-ms";
const headerUnaryEncoding = "content-encoding";
const headerUnaryAcceptEncoding = "accept-encoding";
const headerStreamEncoding = "connect-content-encoding";
const headerStreamAcceptEncoding = "connect-accept-encoding";

/** Why a call's handler signal fires when its client resets or closes the stream before the answer's end. */
const clientGone = new ConnectError("the client closed the stream before the answer's end", Code.Canceled);

/**
 * Connect calls over HTTP/2 with one request message (unary and server
 * streaming: every RPC of Parley's own services), answered from the body the
 * body reader has already read (request-body.ts), through the same
 * interceptors and lean handler contexts as the in-process transport
 * (service-calls.ts). Parley's CLI and client library speak Connect over
 * HTTP/2 by default.
 *
 * Why not connect-node's Connect handler: it runs every call through a
 * linked AbortController and a copy of every header set, and a stream
 * through its pipeline of async-generator stages (connect-es ships ES2017,
 * whose downlevelled generators allocate per step); see grpc-route.ts, whose
 * reasons and figures this route shares.
 *
 * What it keeps of connect-es: the content types, `connect-timeout-ms`
 * parsing, compression negotiation and codecs, the method's serialization
 * (readMaxBytes, writeMaxBytes and the router's binary and JSON options), the
 * error JSON with its HTTP status, trailers as `trailer-` headers on a unary
 * answer, and the end-stream message. A unary call that fails answers its
 * error's HTTP status with the error as JSON (its metadata as headers); a
 * stream answers 200 and ends with an end-stream message that carries the
 * error, if any, and the trailers. A request that cannot be decoded answers
 * INVALID_ARGUMENT, as the router's routes do (decode-errors.ts). The response
 * headers go out with the first message, so a handler can still set them when
 * it starts. A stream waits for the client to read (the socket's 'drain')
 * before it takes the next message from its handler, and a client that resets
 * its stream fires the handler's signal. Everything else (other methods,
 * GET requests, a content type that does not fit the method, gRPC-Web, Connect
 * over HTTP/1.1, a request the body reader did not read) goes to `fallback`.
 */
export function createConnectRoute(
  options: RpcRouteOptions,
  fallback: (req: NodeRequest, res: NodeResponse) => void,
): (req: NodeRequest, res: NodeResponse) => void {
  const { calls, handlerOptions } = options;
  const { acceptCompression, readMaxBytes, compressMinBytes, maxTimeoutMs, jsonOptions } = handlerOptions;
  const routes = createRouteTable(options);
  const endStreamSerialization = createEndStreamSerialization(jsonOptions);

  /** The call's init, its request message decoded (a failure to decode classified as the router's routes do). */
  async function callOf(
    route: Route,
    binary: boolean,
    header: Headers,
    data: () => Promise<Uint8Array>,
    timeout: { timeoutMs?: number; error?: ConnectError },
    compressionError: ConnectError | undefined,
    signal: AbortSignal,
  ): Promise<{ call: CallInit; input: unknown }> {
    if (compressionError) throw compressionError;
    if (timeout.error) throw timeout.error;
    let input: unknown;
    try {
      input = route.serialization.getI(binary).parse(await data());
    } catch (error) {
      throw classifyDecodeError(ConnectError.from(error), route.method.input.typeName) ?? error;
    }
    const call: CallInit = {
      method: route.method,
      protocolName: "connect",
      url: route.url,
      header,
      contextValues: createContextValues(),
      signal,
      ...(timeout.timeoutMs !== undefined ? { timeoutMs: timeout.timeoutMs } : {}),
    };
    return { call, input };
  }

  /** A signal that fires when the client goes before the answer's end. */
  function goneSignal(res: Http2ServerResponse): AbortSignal {
    const gone = new AbortController();
    res.once("close", () => {
      if (!res.writableFinished) gone.abort(clientGone);
    });
    return gone.signal;
  }

  async function serveUnary(
    route: Route,
    binary: boolean,
    req: Http2ServerRequest,
    res: Http2ServerResponse,
    body: ReadBody,
  ) {
    const header = webHeaders(req.headers);
    const timeout = parseTimeout(header.get(headerTimeout), maxTimeoutMs);
    const compression = compressionNegotiate(
      acceptCompression,
      header.get(headerUnaryEncoding),
      header.get(headerUnaryAcceptEncoding),
      headerUnaryAcceptEncoding,
    );
    let status = 200;
    let responseHeader: OutgoingHttpHeaders = { "content-type": binary ? contentTypeUnaryProto : contentTypeUnaryJson };
    let bytes: Uint8Array;
    try {
      const { call, input } = await callOf(
        route,
        binary,
        header,
        () => unaryBody(body.bytes, header.get("content-length"), readMaxBytes, compression.request),
        timeout,
        compression.error,
        goneSignal(res),
      );
      const response = await calls.unary(call, input);
      bytes = route.serialization.getO(binary).serialize(response.message as Message);
      appendHeaders(responseHeader, response.header);
      appendHeaders(responseHeader, response.trailer, "trailer-");
    } catch (thrown) {
      const error = asConnectError(thrown);
      status = codeToHttpStatus(error.code);
      responseHeader = { "content-type": contentTypeUnaryJson };
      // As connect-es answers: the error's metadata as headers, each replacing one of the same name.
      error.metadata.forEach((value, name) => {
        responseHeader[name] = value;
      });
      bytes = errorToJsonBytes(error, jsonOptions);
    }
    if (compression.response && bytes.byteLength >= compressMinBytes) {
      bytes = await compression.response.compress(bytes);
      responseHeader[headerUnaryEncoding] = compression.response.name;
    }
    responseHeader["content-length"] = String(bytes.byteLength);
    if (res.destroyed) return;
    res.writeHead(status, responseHeader);
    res.end(bytes);
  }

  async function serveStream(
    route: Route,
    binary: boolean,
    req: Http2ServerRequest,
    res: Http2ServerResponse,
    body: ReadBody,
  ) {
    const header = webHeaders(req.headers);
    const timeout = parseTimeout(header.get(headerTimeout), maxTimeoutMs);
    const compression = compressionNegotiate(
      acceptCompression,
      header.get(headerStreamEncoding),
      header.get(headerStreamAcceptEncoding),
      headerStreamAcceptEncoding,
    );
    const responseHeader: OutgoingHttpHeaders = {
      "content-type": binary ? contentTypeStreamProto : contentTypeStreamJson,
    };
    if (compression.response) responseHeader[headerStreamEncoding] = compression.response.name;
    const serializer = route.serialization.getO(binary);
    /** One envelope, compressed as negotiated. */
    const envelope = async (flags: number, data: Uint8Array) => {
      const compressed = await envelopeCompress({ flags, data }, compression.response, compressMinBytes);
      return encodeEnvelope(compressed.flags, compressed.data);
    };
    const frame = (message: unknown) => envelope(0, serializer.serialize(message as Message));
    /** The end-stream message: the error, if the stream failed, and the trailers. */
    const end = (failure: unknown, trailer: Headers) =>
      envelope(
        endStreamFlag,
        endStreamSerialization.serialize({
          metadata: trailer,
          ...(failure === undefined ? {} : { error: asConnectError(failure) }),
        }),
      );
    let response: StreamResponse;
    try {
      const { call, input } = await callOf(
        route,
        binary,
        header,
        () => envelopedMessage(body.bytes, route, readMaxBytes, compression.request, endStreamFlag),
        timeout,
        compression.error,
        goneSignal(res),
      );
      response = await calls.stream(call, createAsyncIterable([input]));
    } catch (thrown) {
      // A Connect stream answers 200 whatever happens; its end-stream message says how it ended.
      const bytes = await end(thrown, new Headers());
      if (res.destroyed) return;
      res.writeHead(200, responseHeader);
      res.end(bytes);
      return;
    }
    await stream(res, responseHeader, response, frame, end);
  }

  return (req, res) => {
    const route = "stream" in req && req.method === "POST" ? routes.get(req.url) : undefined;
    const type = route && parseContentType(req.headers["content-type"] ?? null);
    // A content type of the other kind is connect-node's to refuse (415), as one it does not know.
    const fits = type !== undefined && type.stream === (route?.method.methodKind === "server_streaming");
    const body = fits ? readBodyOf(req) : undefined;
    if (!route || !type || !body) {
      fallback(req, res);
      return;
    }
    const h2req = req as Http2ServerRequest;
    const serve = type.stream ? serveStream : serveUnary;
    // serve answers every failure itself; this is for a fault in answering one (the stream reset, not the process).
    serve(route, type.binary, h2req, res as Http2ServerResponse, body).catch(() => {
      if (!h2req.stream.destroyed) h2req.stream.close(h2.NGHTTP2_INTERNAL_ERROR);
    });
  };
}

/**
 * Writes a server stream: the headers with its first message (or with its end, when it has none), each message
 * once the socket has taken the last (backpressure reaches the handler, whose follower is cut by
 * limits.subscriberBufferEvents when it falls too far behind), then the end-stream message: the trailers, and the
 * error the stream failed with, if it did.
 */
async function stream(
  res: Http2ServerResponse,
  responseHeader: OutgoingHttpHeaders,
  response: StreamResponse,
  frame: (message: unknown) => Promise<Uint8Array>,
  end: (failure: unknown, trailer: Headers) => Promise<Uint8Array>,
): Promise<void> {
  const messages = response.message[Symbol.asyncIterator]();
  let ended = false;
  try {
    let failure: unknown;
    let first: IteratorResult<unknown> | undefined;
    try {
      first = await messages.next();
      ended = first.done === true;
    } catch (error) {
      // The handler's stream failed before its first message (it is then over).
      ended = true;
      failure = error;
    }
    if (res.destroyed) return;
    appendHeaders(responseHeader, response.header);
    res.writeHead(200, responseHeader);
    if (first !== undefined) {
      try {
        ended = await pumpStream(res, messages, first, frame);
        if (!ended) return;
      } catch (error) {
        // From the handler's stream (which is then over) or from encoding a message (the finally ends the stream).
        failure = error;
      }
    }
    const bytes = await end(failure, response.trailer);
    if (!res.destroyed) res.end(bytes);
  } finally {
    // The client went away (or writing failed) before the handler's stream ended: end it, so it lets go.
    if (!ended) void Promise.resolve(messages.return?.()).catch(() => undefined);
  }
}

/**
 * A unary request's body as connect-es reads it: no more than readMaxBytes (by its Content-Length when it has
 * one), the length it promised, then decompressed with the negotiated encoding. The errors are connect-es's.
 */
async function unaryBody(
  bytes: Buffer,
  contentLength: string | null,
  readMaxBytes: number,
  compression: Compression | null,
): Promise<Uint8Array> {
  const hint = contentLength === null ? Number.NaN : Number.parseInt(contentLength, 10);
  if (Number.isSafeInteger(hint) && hint >= 0) {
    if (hint > readMaxBytes) {
      throw new ConnectError(
        `message size ${hint} is larger than configured readMaxBytes ${readMaxBytes}`,
        Code.ResourceExhausted,
      );
    }
    if (bytes.length !== hint) {
      throw new ConnectError(`protocol error: promised ${hint} bytes, received ${bytes.length}`, Code.InvalidArgument);
    }
  } else if (bytes.length > readMaxBytes) {
    throw new ConnectError(
      `message size is larger than configured readMaxBytes ${readMaxBytes}`,
      Code.ResourceExhausted,
    );
  }
  return compression ? compression.decompress(bytes, readMaxBytes) : bytes;
}
