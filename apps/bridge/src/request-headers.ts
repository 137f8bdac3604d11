import type { IncomingMessage } from "node:http";
import { headers as wire } from "@parley/proto";
import { injectTraceHeaders } from "@parley/server";
import type { ProtocolVersion } from "./methods.js";

/** One request header as a string; repeated headers are joined with commas, as HTTP allows. */
export function headerValue(req: IncomingMessage, name: string): string | undefined {
  const value = req.headers[name];
  return Array.isArray(value) ? value.join(",") : value;
}

/** The headers an upstream call carries: the negotiated version, the caller's credentials and extensions, the agent. */
export function upstreamHeaders(req: IncomingMessage, version: ProtocolVersion, agent: string | undefined): Headers {
  const headers = new Headers({ [wire.a2aVersion]: version });
  const authorization = headerValue(req, "authorization");
  if (authorization) headers.set("authorization", authorization);
  const extensions = headerValue(req, wire.a2aExtensions) ?? headerValue(req, wire.a2aExtensionsV03);
  if (extensions) headers.set(wire.a2aExtensions, extensions);
  if (agent !== undefined) headers.set(wire.agent, agent);
  // The request id the HTTP front assigned, so the server's line for the upstream call carries the same one.
  const requestId = headerValue(req, wire.requestId);
  if (requestId) headers.set(wire.requestId, requestId);
  // The current span (the bridge's JSON-RPC span) becomes the parent of the server's RPC span.
  return injectTraceHeaders(headers);
}
