import type { IncomingMessage } from "node:http";
import { headers as wire } from "@parley/proto";
import { injectTraceHeaders } from "@parley/server";

/** The A2A version of every upstream call (the server's gRPC/Connect interface speaks 1.0 only). */
const upstreamVersion = "1.0";

/** One request header as a string; repeated headers are joined with commas, as HTTP allows. */
export function headerValue(req: IncomingMessage, name: string): string | undefined {
  const value = req.headers[name];
  return Array.isArray(value) ? value.join(",") : value;
}

/**
 * The headers an upstream call carries: A2A 1.0, the caller's credentials and extensions, the agent.
 * A plain record, not a Headers: the transport builds the call's own Headers from it (in process as over the
 * network), so a second one per call would only be copied and dropped.
 */
export function upstreamHeaders(req: IncomingMessage, agent: string | undefined): Record<string, string> {
  // The bridge has translated a 0.3 request into 1.0 already: the upstream call is always 1.0.
  const headers: Record<string, string> = { [wire.a2aVersion]: upstreamVersion };
  const authorization = headerValue(req, "authorization");
  if (authorization) headers.authorization = authorization;
  const extensions = headerValue(req, wire.a2aExtensions) ?? headerValue(req, wire.a2aExtensionsV03);
  if (extensions) headers[wire.a2aExtensions] = extensions;
  if (agent !== undefined) headers[wire.agent] = agent;
  // The request id the HTTP front assigned, so the server's line for the upstream call carries the same one.
  const requestId = headerValue(req, wire.requestId);
  if (requestId) headers[wire.requestId] = requestId;
  // The current span (the bridge's JSON-RPC span) becomes the parent of the server's RPC span.
  return injectTraceHeaders(headers);
}
