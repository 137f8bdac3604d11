import {
  Code,
  ConnectError,
  type ConnectRouter,
  createContextKey,
  createContextValues,
  type Interceptor,
} from "@connectrpc/connect";
import {
  createAsyncIterable,
  encodeEnvelope,
  type UniversalHandler,
  type UniversalServerResponse,
} from "@connectrpc/connect/protocol";
import { codeToHttpStatus, errorFromJsonBytes, errorToJsonBytes } from "@connectrpc/connect/protocol-connect";
import { trailerFlag, trailerParse, trailerSerialize } from "@connectrpc/connect/protocol-grpc-web";
import { setGrpcStatus } from "../grpc-status.js";
import { networkOnlyInterceptor } from "./network-only.js";

/**
 * Requests connect-es cannot decode are the caller's mistake, but connect-es
 * files them under INTERNAL (HTTP 500): malformed protobuf, a Struct nested
 * past protobuf-es's recursion limit of 100, invalid UTF-8 in a string field,
 * an envelope flagged compressed without an encoding, a body that does not
 * decompress. Its router has no hook for this: a unary request is decoded
 * before any interceptor runs, and the error is written straight to the
 * protocol's wire form (gRPC trailers, the gRPC-Web trailer frame, a Connect
 * JSON error body). So two pieces: an interceptor that marks "the request got
 * as far as Parley" and maps errors of a streaming request's input (decoded
 * inside the interceptor chain), and a wrapper around each route that, for a
 * call that never got that far, rewrites such an error to INVALID_ARGUMENT in
 * its protocol's wire form. Errors raised after the interceptors ran (an
 * upstream's bad response the bridge forwards, say) are never touched.
 */

/** connect-es's messages for a request it could not decode, all filed under INTERNAL. */
const decoderFailure =
  /^(parse binary: |received compressed envelope, but do not know how to decompress|decompression failed)/;

const reachedKey = createContextKey(false, { description: "the request was decoded and reached the interceptors" });

/** The INVALID_ARGUMENT a decoder failure of a `typeName` request stands for, or undefined for any other error. */
export function classifyDecodeError(error: ConnectError, typeName: string): ConnectError | undefined {
  if (error.code !== Code.Internal || !decoderFailure.test(error.rawMessage)) return undefined;
  return requestNotDecodable(typeName, error.rawMessage.replace(/^parse binary: /, ""));
}

/**
 * Marks the request as decoded; maps decoder failures of a streaming request's input. Put it first. Network-only:
 * an in-process request is a message already, and only the network routes read the mark.
 */
export function createDecodeErrorInterceptor(): Interceptor {
  return networkOnlyInterceptor((next) => async (req) => {
    req.contextValues.set(reachedKey, true);
    if (!req.stream) return next(req);
    const typeName = req.method.input.typeName;
    const input = req.message;
    async function* mapped() {
      try {
        yield* input;
      } catch (error) {
        const connectError = ConnectError.from(error);
        throw classifyDecodeError(connectError, typeName) ?? error;
      }
    }
    return next({ ...req, message: mapped() } as typeof req);
  });
}

/**
 * A UTF-8 decoder for connect-es's JSON codec (router option
 * `jsonOptions.textDecoder`): its default replaces invalid bytes with U+FFFD,
 * so a Connect JSON text part would be stored altered where gRPC (strict
 * protobuf strings) and JSON-RPC refuse it.
 */
export function createStrictTextDecoder(): { decode(input?: Uint8Array): string } {
  const decoder = new TextDecoder("utf-8", { fatal: true });
  return {
    decode(input) {
      try {
        return decoder.decode(input);
      } catch {
        throw new ConnectError(
          "the request body is not valid UTF-8 (JSON must be UTF-8; send binary data as base64 in a bytes field)",
          Code.InvalidArgument,
        );
      }
    },
  };
}

/** Wraps `routes` so each route's undecodable requests answer INVALID_ARGUMENT (see the top of this file). */
export function classifyDecodeErrors(routes: (router: ConnectRouter) => void): (router: ConnectRouter) => void {
  return (router) => {
    const from = router.handlers.length;
    routes(router);
    for (let i = from; i < router.handlers.length; i++) router.handlers[i] = wrapHandler(router.handlers[i]!);
  };
}

function wrapHandler(handler: UniversalHandler): UniversalHandler {
  const typeName = handler.method.input.typeName;
  const wrapped = async (req: Parameters<UniversalHandler>[0]) => {
    const contextValues = req.contextValues ?? createContextValues();
    const res = await handler({ ...req, contextValues });
    if (contextValues.get(reachedKey)) return res;
    return rewrite(res, typeName);
  };
  return Object.assign(wrapped, {
    protocolNames: handler.protocolNames,
    allowedMethods: handler.allowedMethods,
    supportedContentType: handler.supportedContentType,
    requestPath: handler.requestPath,
    service: handler.service,
    method: handler.method,
  });
}

async function readAll(body: AsyncIterable<Uint8Array>): Promise<Uint8Array> {
  const chunks: Uint8Array[] = [];
  for await (const chunk of body) chunks.push(chunk);
  return Buffer.concat(chunks);
}

/** The response of a call that failed before the interceptors: only an error, so it is small. */
async function rewrite(res: UniversalServerResponse, typeName: string): Promise<UniversalServerResponse> {
  const contentType = res.header?.get("content-type") ?? "";
  if (/^application\/grpc-web\+|^application\/grpc-web$/.test(contentType)) {
    if (!res.body) return res;
    return {
      ...res,
      body: createAsyncIterable([rewriteGrpcWebBody(await readAll(res.body as AsyncIterable<Uint8Array>), typeName)]),
    };
  }
  if (/^application\/grpc(\+|$)/.test(contentType)) {
    const trailer = res.trailer;
    if (!trailer) return res;
    const fix = () => rewriteGrpcTrailer(trailer, typeName);
    fix();
    if (!res.body) return res;
    const body = res.body as AsyncIterable<Uint8Array>;
    // connect-node writes the trailer after the body: a status set while the body drains is still sent.
    return {
      ...res,
      body: (async function* () {
        yield* body;
        fix();
      })(),
    };
  }
  // Connect unary: an error is a JSON body with the code's HTTP status (left alone if it was compressed).
  const encoded = (res.header?.get("content-encoding") ?? "identity") !== "identity";
  if (res.status !== 200 && contentType.startsWith("application/json") && res.body && !encoded) {
    const bytes = await readAll(res.body as AsyncIterable<Uint8Array>);
    const error = errorFromJsonBytes(bytes, undefined, new ConnectError("unparseable error", Code.Internal));
    const classified = classifyDecodeError(error, typeName);
    if (!classified) return { ...res, body: createAsyncIterable([bytes]) };
    const body = errorToJsonBytes(classified, {});
    res.header?.set("content-length", String(body.byteLength));
    return { ...res, status: codeToHttpStatus(classified.code), body: createAsyncIterable([body]) };
  }
  return res;
}

function grpcStatusError(trailer: Headers): ConnectError | undefined {
  const status = trailer.get("grpc-status");
  if (status === null || Number(status) !== Code.Internal) return undefined;
  let message = trailer.get("grpc-message") ?? "";
  try {
    message = decodeURIComponent(message);
  } catch {
    // A broken escape stays as it is.
  }
  return new ConnectError(message, Code.Internal);
}

function rewriteGrpcTrailer(trailer: Headers, typeName: string): void {
  const error = grpcStatusError(trailer);
  const classified = error && classifyDecodeError(error, typeName);
  if (classified) setGrpcStatus(trailer, classified);
}

/** gRPC-Web carries the status in a trailer frame at the end of the body. */
function rewriteGrpcWebBody(bytes: Uint8Array, typeName: string): Uint8Array {
  const out: Uint8Array[] = [];
  for (let at = 0; at + 5 <= bytes.byteLength; ) {
    const flags = bytes[at]!;
    const length = new DataView(bytes.buffer, bytes.byteOffset + at + 1, 4).getUint32(0);
    const data = bytes.subarray(at + 5, at + 5 + length);
    at += 5 + length;
    // An uncompressed trailer frame (a compressed one, 0x81, is passed on as it is).
    if (flags === trailerFlag) {
      const trailer = trailerParse(data);
      rewriteGrpcTrailer(trailer, typeName);
      out.push(encodeEnvelope(flags, trailerSerialize(trailer)));
    } else out.push(encodeEnvelope(flags, data));
  }
  return Buffer.concat(out);
}

/**
 * A request message that could not be decoded: malformed protobuf, a string
 * field that is not UTF-8, a Struct nested past the recursion limit, an
 * envelope that does not decompress. The caller's mistake, so INVALID_ARGUMENT.
 */
export function requestNotDecodable(typeName: string, detail: string): ConnectError {
  const why = /not valid for encoding utf-8/i.test(detail) ? `a string field is not valid UTF-8 (${detail})` : detail;
  return new ConnectError(`the request is not a valid ${typeName}: ${why}`, Code.InvalidArgument);
}
