import type * as http from "node:http";
import type { Server } from "node:net";

/**
 * Timeouts and limits of one listening port (the `connections` settings), so
 * that idle, slow or greedy clients cannot hold sockets, memory or file
 * descriptors for longer than these say. Both ports take the same values.
 */
export interface ConnectionLimits {
  /** How long a client may take to send a request's headers (on h2c also the preface and SETTINGS). */
  readonly headersTimeoutMs: number;
  /** How long a request body may take to arrive in full, from the end of its headers. */
  readonly bodyTimeoutMs: number;
  /** An idle HTTP/1.1 keep-alive connection is closed after this long. */
  readonly http1IdleTimeoutMs: number;
  /** An HTTP/2 connection with no open stream is closed (GOAWAY) after this long. */
  readonly http2IdleTimeoutMs: number;
  /** Streams one HTTP/2 connection may have open at once. */
  readonly maxConcurrentStreams: number;
  /** Open connections per port; more are closed as they arrive. */
  readonly maxConnections: number;
  /** Bytes of a too-large body read and dropped so that its refusal reaches the client. */
  readonly maxDiscardBytes: number;
}

/** The defaults; the server's `connections` settings start from these. */
export const defaultConnectionLimits: ConnectionLimits = {
  headersTimeoutMs: 10_000,
  bodyTimeoutMs: 30_000,
  http1IdleTimeoutMs: 5_000,
  http2IdleTimeoutMs: 120_000,
  maxConcurrentStreams: 1_000,
  maxConnections: 4_096,
  maxDiscardBytes: 64 * 1024 * 1024,
};

/**
 * What a request body may hold beyond its one message: the 5-byte envelope of
 * gRPC, gRPC-Web and Connect streaming, with room to spare. The message size
 * itself is the RPC layer's limit (Connect's readMaxBytes), which names it.
 */
export const rpcFramingBytes = 1024;

/**
 * Node's HTTP/1.1 server options for these limits. Node itself closes a
 * connection whose request headers are not complete after `headersTimeout`
 * (counted from the connection's start for its first request, so an idle TCP
 * connection is closed too) and one whose whole request is not in after
 * `requestTimeout`; the body deadline proper is the body reader's (it answers
 * in the request's protocol), Node's is the backstop a little later.
 */
export function http1ServerOptions(limits: ConnectionLimits): http.ServerOptions {
  return {
    headersTimeout: limits.headersTimeoutMs,
    requestTimeout: limits.headersTimeoutMs + limits.bodyTimeoutMs + 1_000,
    keepAliveTimeout: limits.http1IdleTimeoutMs,
    // How often Node checks those two timeouts: often enough that a short one is kept, at most once a second.
    connectionsCheckingInterval: Math.max(
      10,
      Math.min(1_000, Math.floor(Math.min(limits.headersTimeoutMs, limits.bodyTimeoutMs) / 4)),
    ),
  };
}

/** Caps the sockets a listening server holds: past `maxConnections` Node closes new ones as they arrive. */
export function limitConnections(server: Server, limits: ConnectionLimits): void {
  server.maxConnections = limits.maxConnections;
}
