import type { OutgoingHttpHeaders } from "node:http";
import type { Message } from "@bufbuild/protobuf";
import { Code, ConnectError, type StreamResponse } from "@connectrpc/connect";
import { type Compression, createAsyncIterable, mergeNonProtocolHeaders } from "@connectrpc/connect/protocol";
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

// connect-es's header names, in the lower case HTTP/2 writes.
const unaryNames: NegotiationHeaders = {
  timeout: "connect-timeout-ms",
  encoding: "content-encoding",
  acceptEncoding: "accept-encoding",
  parseTimeout,
};
const streamNames: NegotiationHeaders = {
  timeout: "connect-timeout-ms",
  encoding: "connect-content-encoding",
  acceptEncoding: "connect-accept-encoding",
  parseTimeout,
};

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
  const { readMaxBytes, compressMinBytes, jsonOptions } = handlerOptions;
  const routes = createRouteTable(options);
  const endStreamSerialization = createEndStreamSerialization(jsonOptions);

  const serveUnary: ServeCall = async (route, binary, req, res, body) => {
    const negotiated = negotiate(req, unaryNames, handlerOptions);
    const { compression, header } = negotiated;
    let status = 200;
    let responseHeader: OutgoingHttpHeaders = { "content-type": binary ? contentTypeUnaryProto : contentTypeUnaryJson };
    let bytes: Uint8Array;
    try {
      const { call, input } = await decodedCall(route, binary, "connect", res, negotiated, () =>
        unaryBody(body.bytes, header.get("content-length"), readMaxBytes, compression.request),
      );
      const response = await calls.unary(call, input);
      bytes = route.serialization.getO(binary).serialize(response.message as Message);
      appendHeaders(responseHeader, response.header);
      appendHeaders(responseHeader, response.trailer, "trailer-");
    } catch (thrown) {
      const error = asConnectError(thrown);
      status = codeToHttpStatus(error.code);
      // As connect-es answers: the error's metadata as headers, but neither protocol headers nor the metadata of an
      // error read off the wire (passed on from a call of the handler's own), which holds that answer's headers.
      // The handler's own header and trailer go too, as connect-es sends them with an error.
      const failed = responseOfFailure(thrown);
      const metadata = new Headers(failed?.header);
      if (!error.isWireError) mergeNonProtocolHeaders(metadata, error.metadata);
      responseHeader = appendHeaders({ "content-type": contentTypeUnaryJson }, metadata);
      if (failed) appendHeaders(responseHeader, failed.trailer, "trailer-");
      bytes = errorToJsonBytes(error, jsonOptions);
    }
    if (compression.response && bytes.byteLength >= compressMinBytes) {
      bytes = await compression.response.compress(bytes);
      responseHeader[unaryNames.encoding] = compression.response.name;
    }
    responseHeader["content-length"] = String(bytes.byteLength);
    if (responseGone(res)) return;
    res.writeHead(status, responseHeader);
    res.end(bytes);
  };

  const serveStream: ServeCall = async (route, binary, req, res, body) => {
    const negotiated = negotiate(req, streamNames, handlerOptions);
    const { compression } = negotiated;
    const responseHeader: OutgoingHttpHeaders = {
      "content-type": binary ? contentTypeStreamProto : contentTypeStreamJson,
    };
    if (compression.response) responseHeader[streamNames.encoding] = compression.response.name;
    const serializer = route.serialization.getO(binary);
    const envelope = createEnveloper(compression.response, compressMinBytes);
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
      const { call, input } = await decodedCall(route, binary, "connect", res, negotiated, () =>
        envelopedMessage(body.bytes, route, readMaxBytes, compression.request, endStreamFlag),
      );
      response = await calls.stream(call, createAsyncIterable([input]));
    } catch (thrown) {
      // A Connect stream answers 200 whatever happens; its end-stream message says how it ended.
      const bytes = await end(thrown, new Headers());
      if (responseGone(res)) return;
      res.writeHead(200, responseHeader);
      res.end(bytes);
      return;
    }
    const finish = async (failure: unknown) => {
      const bytes = await end(failure, response.trailer);
      if (!responseGone(res)) res.end(bytes);
    };
    await writeServerStream(res, responseHeader, response, frame, finish, false);
  };

  return dispatchCalls(
    routes,
    (route, contentType) => {
      const type = parseContentType(contentType);
      // A content type of the other kind is connect-node's to refuse (415), as one it does not know.
      if (!type || type.stream !== (route.method.methodKind === "server_streaming")) return undefined;
      return { binary: type.binary, serve: type.stream ? serveStream : serveUnary };
    },
    fallback,
  );
}

/**
 * A unary request's body as connect-es reads it: no more than readMaxBytes (by its Content-Length when it has
 * one), the length it promised, then decompressed with the negotiated encoding. The errors are connect-es's.
 * Not its readAllBytes over a one-chunk iterable: that copies the body and steps a downlevelled async generator
 * per call.
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
