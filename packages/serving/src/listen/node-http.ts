import { randomUUID } from "node:crypto";
import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from "node:http";
import type { Http2ServerRequest, Http2ServerResponse } from "node:http2";
import { headers as wireHeaders } from "@parley/proto";
export type NodeRequest = IncomingMessage | Http2ServerRequest;
export type NodeResponse = ServerResponse | Http2ServerResponse;

/** Starts a response on either port: @types/node's `writeHead` overloads of the two kinds do not unify. */
export function writeHead(res: NodeResponse, status: number, headers: OutgoingHttpHeaders): void {
  if ("stream" in res) res.writeHead(status, headers);
  else res.writeHead(status, headers);
}

/** A request id a caller may choose itself (so it can find its request in the logs); anything else is replaced. */
const acceptableRequestId = /^[A-Za-z0-9._:-]{1,128}$/;

/** The id of this request: the caller's parley-request-id when it is sane, a fresh UUID otherwise. */
export function requestIdOf(req: NodeRequest): string {
  const given = req.headers[wireHeaders.requestId];
  return typeof given === "string" && acceptableRequestId.test(given) ? given : randomUUID();
}
