import type { IncomingHttpHeaders, OutgoingHttpHeaders } from "node:http";
import type { Http2ServerRequest, Http2ServerResponse } from "node:http2";
import type { DescMessage, DescMethod, DescMethodUnary } from "@bufbuild/protobuf";
import { Code, ConnectError, createContextValues } from "@connectrpc/connect";
import {
  type Compression,
  compressionNegotiate,
  createMethodSerializationLookup,
  encodeEnvelope,
  envelopeCompress,
  envelopeDecompress,
  type MethodSerializationLookup,
  type UniversalHandlerOptions,
} from "@connectrpc/connect/protocol";
import {
  contentTypeJson,
  contentTypeProto,
  headerAcceptEncoding,
  headerEncoding,
  headerTimeout,
  parseContentType,
  parseTimeout,
  setTrailerStatus,
} from "@connectrpc/connect/protocol-grpc";
import { classifyDecodeError } from "../interceptors/decode-errors.js";
import type { ServiceCalls } from "../service-calls.js";
import type { NodeRequest, NodeResponse } from "./http-front.js";
import { type ReadBody, readBodyOf } from "./request-body.js";

export interface GrpcUnaryOptions {
  /** Runs each call through the interceptors to its implementation (service-calls.ts). */
  readonly calls: ServiceCalls;
  /** The methods of the services `calls` reaches; this route answers their unary ones, the fallback the rest. */
  readonly methods: readonly DescMethod[];
  /**
   * The router's options as connect-es validates them (validateUniversalHandlerOptions), so that both routes
   * take the same encodings, limits, deadlines and codec options.
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

interface Route {
  readonly method: DescMethodUnary;
  readonly url: string;
  readonly serialization: MethodSerializationLookup<DescMessage, DescMessage>;
}

/** Why a unary call's handler signal fires when its client resets or closes the stream before the answer. */
const clientGone = new ConnectError("the client closed the stream before the answer", Code.Canceled);

/**
 * Unary gRPC calls over HTTP/2, answered from the body the body reader has
 * already read (request-body.ts), through the same interceptors and lean
 * handler contexts as the in-process transport (service-calls.ts).
 *
 * Why not connect-node's gRPC handler: it serves a unary call through its
 * streaming pipeline, about ten async-generator stages (connect-es ships
 * ES2017, whose downlevelled generators allocate per step), a linked
 * AbortController per call and a copy of every header set. Measured on an echo
 * service, that is 0.7-1.0 ms of CPU per call against 0.3-0.4 ms for the same
 * call answered here; most of the difference is garbage that survives into the
 * old generation (24 KB per call against 2 KB).
 *
 * What it keeps of connect-es: the content types, grpc-timeout parsing,
 * compression negotiation and codecs, the method's serialization (readMaxBytes
 * and the router's binary and JSON options), and the status trailers
 * (setTrailerStatus, with error details). Errors are answered trailers-only.
 * A request that cannot be decoded answers INVALID_ARGUMENT, as the router's
 * routes do (decode-errors.ts). Everything else (other methods, streaming,
 * Connect, gRPC-Web, gRPC over HTTP/1.1, a request the body reader did not
 * read) goes to `fallback`, connect-node.
 */
export function createGrpcUnaryRoute(
  options: GrpcUnaryOptions,
  fallback: (req: NodeRequest, res: NodeResponse) => void,
): (req: NodeRequest, res: NodeResponse) => void {
  const { calls, handlerOptions } = options;
  const { acceptCompression, readMaxBytes, compressMinBytes, maxTimeoutMs } = handlerOptions;
  const routes = new Map<string, Route>();
  for (const method of options.methods) {
    if (method.methodKind !== "unary") continue;
    const url = `/${method.parent.typeName}/${method.name}`;
    const serialization = createMethodSerializationLookup(
      method,
      handlerOptions.binaryOptions,
      handlerOptions.jsonOptions,
      handlerOptions,
    );
    routes.set(url, { method: method as DescMethodUnary, url, serialization });
  }

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
    try {
      if (compression.error) throw compression.error;
      if (timeout.error) throw timeout.error;
      let input: unknown;
      try {
        const data = await messageOf(body.bytes, readMaxBytes, compression.request);
        input = route.serialization.getI(binary).parse(data);
      } catch (error) {
        throw classifyDecodeError(ConnectError.from(error), route.method.input.typeName) ?? error;
      }
      const response = await calls.unary(
        {
          method: route.method,
          protocolName: "grpc",
          url: route.url,
          header,
          contextValues: createContextValues(),
          signal: gone.signal,
          ...(timeout.timeoutMs !== undefined ? { timeoutMs: timeout.timeoutMs } : {}),
        },
        input,
      );
      const data = route.serialization.getO(binary).serialize(response.message);
      const envelope = await envelopeCompress({ flags: 0, data }, compression.response, compressMinBytes);
      if (res.destroyed) return;
      appendHeaders(responseHeader, response.header);
      const trailer: OutgoingHttpHeaders = appendHeaders({ "grpc-status": "0" }, response.trailer);
      res.writeHead(200, responseHeader);
      res.addTrailers(trailer);
      res.end(encodeEnvelope(envelope.flags, envelope.data));
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
    void serve(route, type.binary, req as Http2ServerRequest, res as Http2ServerResponse, body);
  };
}

/**
 * The one message of a unary request body: exactly one envelope, no larger than readMaxBytes, decompressed with
 * the negotiated encoding. The errors are connect-es's, word for word, so a client sees the same answer on every
 * route.
 */
async function messageOf(bytes: Buffer, readMaxBytes: number, compression: Compression | null): Promise<Uint8Array> {
  if (bytes.length === 0) {
    throw new ConnectError("protocol error: missing input message for unary method", Code.Unimplemented);
  }
  if (bytes.length < 5) throw new ConnectError("protocol error: incomplete envelope", Code.InvalidArgument);
  const flags = bytes[0]!;
  const length = bytes.readUInt32BE(1);
  if (length > readMaxBytes) {
    throw new ConnectError(
      `message size ${length} is larger than configured readMaxBytes ${readMaxBytes}`,
      Code.ResourceExhausted,
    );
  }
  if (bytes.length < 5 + length) throw new ConnectError("protocol error: incomplete envelope", Code.InvalidArgument);
  if (bytes.length > 5 + length) {
    const rest = bytes.length - 5 - length;
    throw rest < 5 || rest < 5 + bytes.readUInt32BE(5 + length + 1)
      ? new ConnectError("protocol error: incomplete envelope", Code.InvalidArgument)
      : new ConnectError("protocol error: received extra input message for unary method", Code.Unimplemented);
  }
  const envelope = await envelopeDecompress({ flags, data: bytes.subarray(5) }, compression, readMaxBytes);
  return envelope.data;
}

/** A failed call's answer: trailers-only (one HEADERS frame with the status that ends the stream). */
function refuse(req: Http2ServerRequest, res: Http2ServerResponse, header: OutgoingHttpHeaders, thrown: unknown) {
  const error =
    thrown instanceof ConnectError
      ? thrown
      : new ConnectError("internal error", Code.Internal, undefined, undefined, thrown);
  const { stream } = req;
  if (stream.destroyed || stream.headersSent) return;
  const fields: OutgoingHttpHeaders = { ...res.getHeaders(), ...header, ":status": 200 };
  appendHeaders(fields, setTrailerStatus(new Headers(), error));
  stream.respond(fields, { endStream: true });
}

/** Adds a Headers object's fields to Node's header object (a name set twice keeps both values). */
function appendHeaders(target: OutgoingHttpHeaders, headers: Headers): OutgoingHttpHeaders {
  for (const [name, value] of headers) {
    const current = target[name];
    if (current === undefined) target[name] = value;
    else target[name] = Array.isArray(current) ? [...current, value] : [String(current), value];
  }
  return target;
}

/** A request's headers as the interceptors read them: Node's, without HTTP/2's pseudo-headers. */
function webHeaders(headers: IncomingHttpHeaders): Headers {
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
