import type { OutgoingHttpHeaders } from "node:http";
import * as http2 from "node:http2";
import { type Code, ConnectError } from "@connectrpc/connect";
import { endStreamToJson, errorToJson } from "@connectrpc/connect/protocol-connect";
import { setGrpcStatus } from "../grpc-status.js";
import { type NodeRequest, type NodeResponse, writeHead } from "./node-http.js";

/**
 * Answers an RPC that is refused before its handler ran (its body did not
 * arrive in time) in the protocol it came in, so each client reports the code
 * and message rather than a broken stream: gRPC and gRPC-Web get a
 * trailers-only response (grpc-status in the headers), Connect streaming an
 * end-stream message, Connect unary its JSON error with `httpStatus`, anything
 * else plain text.
 */
export function refuseRpc(req: NodeRequest, res: NodeResponse, code: Code, message: string, httpStatus: number): void {
  const contentType = String(req.headers["content-type"] ?? "").toLowerCase();
  const error = new ConnectError(message, code);
  if (contentType.startsWith("application/grpc")) {
    refuseGrpc(req, res, { "content-type": contentType }, error);
    return;
  }
  if (res.headersSent) {
    res.end();
    return;
  }
  if (contentType.startsWith("application/connect+")) {
    const json = new TextEncoder().encode(JSON.stringify(endStreamToJson(new Headers(), error, undefined)));
    const envelope = new Uint8Array(5 + json.length);
    envelope[0] = 0b10; // the end-stream flag
    new DataView(envelope.buffer).setUint32(1, json.length);
    envelope.set(json, 5);
    writeHead(res, 200, { "content-type": contentType });
    res.end(envelope);
    return;
  }
  if (contentType.startsWith("application/json") || contentType.startsWith("application/proto")) {
    writeHead(res, httpStatus, { "content-type": "application/json" });
    res.end(JSON.stringify(errorToJson(error, undefined)));
    return;
  }
  writeHead(res, httpStatus, { "content-type": "text/plain; charset=utf-8" });
  res.end(`${message}\n`);
}

/**
 * Answers a gRPC or gRPC-Web call that failed before its first response message: `headers` (the content type,
 * the negotiated encoding) and `error`'s status in one response without a body. Over HTTP/2 that is trailers-only,
 * one HEADERS frame that ends the stream, as gRPC asks (an empty DATA frame after it would not be).
 */
export function refuseGrpc(
  req: NodeRequest,
  res: NodeResponse,
  headers: OutgoingHttpHeaders,
  error: ConnectError,
): void {
  const fields: OutgoingHttpHeaders = { ...headers };
  setGrpcStatus(new Headers(), error).forEach((value, name) => {
    fields[name] = value;
  });
  // setTrailerStatus keeps protocol headers out of an error's metadata, but gRPC's compression spec answers a
  // refused request encoding with the encodings the server takes.
  const accepted = error.metadata.get("grpc-accept-encoding");
  if (accepted !== null) fields["grpc-accept-encoding"] = accepted;
  if ("stream" in req && !req.stream.headersSent && !req.stream.destroyed) {
    // respond() skips the compatibility response, so the headers already set on it (parley-request-id) go in here.
    req.stream.respond({ ...res.getHeaders(), ...fields, ":status": 200 }, { endStream: true });
    return;
  }
  if (!res.headersSent) writeHead(res, 200, fields);
  res.end();
}

/** Tells an HTTP/2 client to stop sending a request whose response is complete (RFC 9113 section 8.1). */
export function stopRequestStream(req: NodeRequest): void {
  if ("stream" in req && !req.stream.destroyed) req.stream.close(http2.constants.NGHTTP2_NO_ERROR);
}
