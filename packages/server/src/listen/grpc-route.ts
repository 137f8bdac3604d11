import type { OutgoingHttpHeaders } from "node:http";
import { type Http2ServerRequest, type Http2ServerResponse, constants as h2 } from "node:http2";
import type { Message } from "@bufbuild/protobuf";
import { Code, ConnectError, createContextValues, type StreamResponse } from "@connectrpc/connect";
import {
  compressionNegotiate,
  createAsyncIterable,
  encodeEnvelope,
  envelopeCompress,
} from "@connectrpc/connect/protocol";
import {
  contentTypeJson,
  contentTypeProto,
  grpcStatusOk,
  headerAcceptEncoding,
  headerEncoding,
  headerGrpcStatus,
  headerTimeout,
  parseContentType,
  parseTimeout,
  setTrailerStatus,
} from "@connectrpc/connect/protocol-grpc";
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
import { refuseGrpc } from "./rpc-refusal.js";

/** Why a call's handler signal fires when its client resets or closes the stream before the answer's end. */
const clientGone = new ConnectError("the client closed the stream before the answer's end", Code.Canceled);

/**
 * gRPC calls over HTTP/2 with one request message (unary and server
 * streaming: every RPC of Parley's own services), answered from the body the
 * body reader has already read (request-body.ts), through the same
 * interceptors and lean handler contexts as the in-process transport
 * (service-calls.ts).
 *
 * Why not connect-node's gRPC handler: it serves every call, unary ones too,
 * through its streaming pipeline, about ten async-generator stages
 * (connect-es ships ES2017, whose downlevelled generators allocate per step),
 * a linked AbortController per call and a copy of every header set. Measured
 * on an echo service, that is 0.7-1.0 ms of CPU per unary call against
 * 0.3-0.4 ms for the same call answered here; most of the difference is
 * garbage that survives into the old generation (24 KB per call against 2 KB).
 *
 * What it keeps of connect-es: the content types, grpc-timeout parsing,
 * compression negotiation and codecs, the method's serialization (readMaxBytes,
 * writeMaxBytes and the router's binary and JSON options), and the status
 * trailers (setTrailerStatus, with error details). A call that fails before
 * its first response message is answered trailers-only; a stream that fails
 * later ends with the error in its trailers. A request that cannot be decoded
 * answers INVALID_ARGUMENT, as the router's routes do (decode-errors.ts). The
 * response headers go out with the first message, so a handler can still set
 * them when it starts. A stream waits for the client to read (the socket's
 * 'drain') before it takes the next message from its handler, and a client
 * that resets its stream fires the handler's signal. Everything else (other
 * methods, Connect, gRPC-Web, gRPC over HTTP/1.1, health, reflection, a
 * request the body reader did not read) goes to `fallback`: in the server,
 * the Connect route (connect-route.ts), then connect-node.
 */
export function createGrpcRoute(
  options: RpcRouteOptions,
  fallback: (req: NodeRequest, res: NodeResponse) => void,
): (req: NodeRequest, res: NodeResponse) => void {
  const { calls, handlerOptions } = options;
  const { acceptCompression, readMaxBytes, compressMinBytes, maxTimeoutMs } = handlerOptions;
  const routes = createRouteTable(options);

  async function serve(
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
      header.get(headerEncoding),
      header.get(headerAcceptEncoding),
      headerAcceptEncoding,
    );
    const responseHeader: OutgoingHttpHeaders = { "content-type": binary ? contentTypeProto : contentTypeJson };
    if (compression.response) responseHeader[headerEncoding] = compression.response.name;
    const gone = new AbortController();
    res.once("close", () => {
      if (!res.writableFinished) gone.abort(clientGone);
    });
    const serializer = route.serialization.getO(binary);
    /** One response message, enveloped and compressed as negotiated. */
    const frame = async (message: unknown) => {
      const envelope = await envelopeCompress(
        { flags: 0, data: serializer.serialize(message as Message) },
        compression.response,
        compressMinBytes,
      );
      return encodeEnvelope(envelope.flags, envelope.data);
    };
    try {
      if (compression.error) throw compression.error;
      if (timeout.error) throw timeout.error;
      let input: unknown;
      try {
        const data = await envelopedMessage(body.bytes, route, readMaxBytes, compression.request);
        input = route.serialization.getI(binary).parse(data);
      } catch (error) {
        throw classifyDecodeError(ConnectError.from(error), route.method.input.typeName) ?? error;
      }
      const call: CallInit = {
        method: route.method,
        protocolName: "grpc",
        url: route.url,
        header,
        contextValues: createContextValues(),
        signal: gone.signal,
        ...(timeout.timeoutMs !== undefined ? { timeoutMs: timeout.timeoutMs } : {}),
      };
      if (route.method.methodKind === "unary") {
        const response = await calls.unary(call, input);
        const bytes = await frame(response.message);
        if (res.destroyed) return;
        appendHeaders(responseHeader, response.header);
        res.writeHead(200, responseHeader);
        res.addTrailers(appendHeaders({ [headerGrpcStatus]: grpcStatusOk }, response.trailer));
        res.end(bytes);
        return;
      }
      const response = await calls.stream(call, createAsyncIterable([input]));
      await stream(res, responseHeader, response, frame);
    } catch (thrown) {
      refuse(req, res, responseHeader, thrown);
    }
  }

  return (req, res) => {
    const route = "stream" in req && req.method === "POST" ? routes.get(req.url) : undefined;
    const type = route && parseContentType(req.headers["content-type"] ?? null);
    const body = type && readBodyOf(req);
    if (!route || !type || !body) {
      fallback(req, res);
      return;
    }
    const h2req = req as Http2ServerRequest;
    // serve answers every failure itself; this is for a fault in answering one (the stream reset, not the process).
    serve(route, type.binary, h2req, res as Http2ServerResponse, body).catch(() => {
      if (!h2req.stream.destroyed) h2req.stream.close(h2.NGHTTP2_INTERNAL_ERROR);
    });
  };
}

/**
 * Writes a server stream: the headers with its first message (a failure before it throws, to be answered
 * trailers-only), each message once the socket has taken the last (backpressure reaches the handler, whose
 * follower is cut by limits.subscriberBufferEvents when it falls too far behind), then the status in the
 * trailers: OK, or the error the stream failed with.
 */
async function stream(
  res: Http2ServerResponse,
  responseHeader: OutgoingHttpHeaders,
  response: StreamResponse,
  frame: (message: unknown) => Promise<Uint8Array>,
): Promise<void> {
  const messages = response.message[Symbol.asyncIterator]();
  const first = await messages.next();
  let ended = first.done === true;
  try {
    if (res.destroyed) return;
    appendHeaders(responseHeader, response.header);
    res.writeHead(200, responseHeader);
    let failure: unknown;
    try {
      ended = await pumpStream(res, messages, first, frame);
      if (!ended) return;
    } catch (error) {
      // From the handler's stream (which is then over) or from encoding a message (the finally ends the stream).
      failure = error;
    }
    const trailer = new Headers(response.trailer);
    setTrailerStatus(trailer, failure === undefined ? undefined : asConnectError(failure));
    res.addTrailers(appendHeaders({}, trailer));
    res.end();
  } finally {
    // The client went away (or writing failed) before the handler's stream ended: end it, so it lets go.
    if (!ended) void Promise.resolve(messages.return?.()).catch(() => undefined);
  }
}

/**
 * A call that failed before its first response message: trailers-only (one HEADERS frame that ends the stream).
 * Past its headers there is no status left to send: the stream is reset, so the client sees a failed call.
 */
function refuse(req: Http2ServerRequest, res: Http2ServerResponse, header: OutgoingHttpHeaders, thrown: unknown) {
  const { stream } = req;
  if (stream.destroyed) return;
  if (stream.headersSent) {
    stream.close(h2.NGHTTP2_INTERNAL_ERROR);
    return;
  }
  refuseGrpc(req, res, header, asConnectError(thrown));
}
