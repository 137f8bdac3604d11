import type { OutgoingHttpHeaders } from "node:http";
import { type Http2ServerRequest, type Http2ServerResponse, constants as h2 } from "node:http2";
import type { Message } from "@bufbuild/protobuf";
import { createAsyncIterable } from "@connectrpc/connect/protocol";
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
} from "@connectrpc/connect/protocol-grpc";
import { setGrpcStatus } from "../grpc-status.js";
import { responseOfFailure } from "../service-calls.js";
import type { NodeRequest, NodeResponse } from "./node-http.js";
import {
  appendHeaders,
  asConnectError,
  createEnveloper,
  createRouteTable,
  decodedCall,
  dispatchCalls,
  envelopedMessage,
  type NegotiationHeaders,
  negotiate,
  type RpcRouteOptions,
  responseGone,
  type ServeCall,
  writeServerStream,
} from "./route-support.js";
import { refuseGrpc } from "./rpc-refusal.js";

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
 * a linked AbortController per call and a copy of every header set, most of
 * it garbage that survives into the old generation. The bench's *-node rows
 * compare the two (docs/benchmarks.md).
 *
 * What it keeps of connect-es: the content types, grpc-timeout parsing,
 * compression negotiation and codecs, the method's serialization (readMaxBytes,
 * writeMaxBytes and the router's binary and JSON options), and the status
 * trailers (setGrpcStatus, with error details). A call that fails before
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
  const { readMaxBytes, compressMinBytes } = handlerOptions;
  const routes = createRouteTable(options);

  const names: NegotiationHeaders = {
    timeout: headerTimeout,
    encoding: headerEncoding,
    acceptEncoding: headerAcceptEncoding,
    parseTimeout,
  };

  const serve: ServeCall = async (route, binary, req, res, body) => {
    const negotiated = negotiate(req, names, handlerOptions);
    const { compression } = negotiated;
    const responseHeader: OutgoingHttpHeaders = { "content-type": binary ? contentTypeProto : contentTypeJson };
    if (compression.response) responseHeader[headerEncoding] = compression.response.name;
    const serializer = route.serialization.getO(binary);
    const envelope = createEnveloper(compression.response, compressMinBytes);
    /** One response message, enveloped and compressed as negotiated. */
    const frame = (message: unknown) => envelope(0, serializer.serialize(message as Message));
    try {
      const { call, input } = await decodedCall(route, binary, "grpc", res, negotiated, () =>
        envelopedMessage(body.bytes, route, readMaxBytes, compression.request),
      );
      if (route.method.methodKind === "unary") {
        const response = await calls.unary(call, input);
        const bytes = await frame(response.message);
        if (responseGone(res)) return;
        appendHeaders(responseHeader, response.header);
        res.writeHead(200, responseHeader);
        res.addTrailers(appendHeaders({ [headerGrpcStatus]: grpcStatusOk }, response.trailer));
        res.end(bytes);
        return;
      }
      const response = await calls.stream(call, createAsyncIterable([input]));
      // The status in the trailers: OK, or the error the stream failed with.
      const finish = (failure: unknown) => {
        const trailer = new Headers(response.trailer);
        setGrpcStatus(trailer, failure === undefined ? undefined : asConnectError(failure));
        res.addTrailers(appendHeaders({}, trailer));
        res.end();
      };
      await writeServerStream(res, responseHeader, response, frame, finish, true);
    } catch (thrown) {
      // A unary handler's own header and trailer go with its error, as connect-es sends them.
      const failed = responseOfFailure(thrown);
      if (failed) appendHeaders(responseHeader, failed.header);
      refuse(req, res, responseHeader, thrown, failed?.trailer);
    }
  };

  return dispatchCalls(
    routes,
    (_route, contentType) => {
      const type = parseContentType(contentType);
      return type && { binary: type.binary, serve };
    },
    fallback,
  );
}

/**
 * A call that failed before its first response message: trailers-only (one HEADERS frame that ends the stream).
 * Past its headers there is no status left to send: the stream is reset, so the client sees a failed call.
 */
function refuse(
  req: Http2ServerRequest,
  res: Http2ServerResponse,
  header: OutgoingHttpHeaders,
  thrown: unknown,
  trailer?: Headers,
) {
  const { stream } = req;
  if (stream.destroyed) return;
  if (stream.headersSent) {
    stream.close(h2.NGHTTP2_INTERNAL_ERROR);
    return;
  }
  if (trailer) appendHeaders(header, trailer);
  refuseGrpc(req, res, header, asConnectError(thrown));
}
