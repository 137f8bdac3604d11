import * as http from "node:http";
import * as http2 from "node:http2";
import { type AddressInfo, createServer as createNetServer, type Server, type Socket } from "node:net";
import { createServer as createTlsServer, type TLSSocket, type Server as TlsServer } from "node:tls";
import { Code } from "@connectrpc/connect";
import {
  type ConnectionLimits,
  defaultConnectionLimits,
  http1ServerOptions,
  limitConnections,
} from "./connection-limits.js";
import { watchHttp2Session } from "./http2-session-watch.js";
import { createBodyReader } from "./request-body.js";
import { refuseRpc } from "./rpc-refusal.js";
import { reloadTlsOnChange, type TlsFiles, type TlsReloadLog, tlsServerOptions } from "./tls-files.js";

/** What both servers hand each request to: Node's HTTP/1.1 and HTTP/2 compatibility request and response. */
export type DualProtocolHandler = (
  req: http.IncomingMessage | http2.Http2ServerRequest,
  res: http.ServerResponse | http2.Http2ServerResponse,
) => void;

export interface DualProtocolServer {
  /** The listening socket; connections are handed to `http1` or `http2` by their first bytes (by ALPN over TLS). */
  readonly server: Server;
  readonly http1: http.Server;
  readonly http2: http2.Http2Server;
  listen(port: number, host: string): Promise<AddressInfo>;
  /**
   * The start of a drain: no new connection is accepted, HTTP/2 sessions get
   * GOAWAY (their open streams go on) and HTTP/1.1 connections close once
   * idle; requests in flight are answered.
   */
  stopAccepting(): void;
  /**
   * Stops accepting, sends GOAWAY on HTTP/2 sessions and closes idle HTTP/1.1
   * connections; what is still open after `forceAfterMs` is destroyed.
   */
  close(forceAfterMs?: number): Promise<void>;
}

export interface DualProtocolServerOptions {
  /** Timeouts and limits of the port (the `connections` settings). */
  readonly limits?: ConnectionLimits;
  /**
   * The longest request body a handler takes (the largest message plus its
   * framing); a longer one is read on and thrown away, up to
   * `limits.maxDiscardBytes` more, and handed over cut short for the handler
   * to refuse.
   */
  readonly maxBodyBytes: number;
  /**
   * Request paths of client- and bidi-streaming RPCs (server reflection): their
   * requests go on while they answer, so their bodies are not read first (the
   * RPC layer still bounds each message).
   */
  readonly streamingRequestPaths?: ReadonlySet<string>;
  /**
   * Serve TLS instead of cleartext: ALPN picks HTTP/2 (h2) or HTTP/1.1; the files are reloaded on SIGHUP and
   * when they change. Unset: h2c and HTTP/1.1 in cleartext.
   */
  readonly tls?: { readonly files: TlsFiles; readonly log: TlsReloadLog };
}

/** Every HTTP/2 connection without TLS (h2c with prior knowledge) starts with these 24 bytes (RFC 9113 section 3.4). */
const http2Preface = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "latin1");

/**
 * One port for gRPC (which needs HTTP/2) and for browsers (Connect and
 * gRPC-Web over HTTP/1.1 fetch): each new connection's first bytes are read,
 * put back, and the socket goes to the HTTP/2 server when they are the HTTP/2
 * client preface, to the HTTP/1.1 server otherwise. Node's servers both accept
 * sockets that already hold data (http2 reads it from the socket's buffer), so
 * no byte is lost or parsed twice.
 */
export function createDualProtocolServer(
  handler: DualProtocolHandler,
  options: DualProtocolServerOptions,
): DualProtocolServer {
  const limits = options.limits ?? defaultConnectionLimits;
  const streaming = options.streamingRequestPaths ?? new Set<string>();
  // Every request's body is read, within its deadline and size, before any handler runs.
  const guarded = createBodyReader(
    {
      maxBodyBytes: options.maxBodyBytes,
      maxDiscardBytes: limits.maxDiscardBytes,
      bodyTimeoutMs: limits.bodyTimeoutMs,
      refuseSlowBody: (req, res, message) => refuseRpc(req, res, Code.DeadlineExceeded, message, 408),
      passThrough: (req) => streaming.size > 0 && streaming.has((req.url ?? "").split("?", 1)[0]!),
    },
    handler,
  );
  const h1 = http.createServer(http1ServerOptions(limits), guarded as http.RequestListener);
  const h2 = http2.createServer(
    { settings: { maxConcurrentStreams: limits.maxConcurrentStreams } },
    guarded as (req: http2.Http2ServerRequest, res: http2.Http2ServerResponse) => void,
  );
  // Node's HTTP/1.1 server sets up its connection list (closeIdleConnections, and the request and headers
  // timeouts' checks) when it starts listening; this one never listens itself, so it is told it does.
  h1.emit("listening");
  const sessions = new Set<http2.ServerHttp2Session>();
  h2.on("session", (session) => {
    sessions.add(session);
    session.once("close", () => sessions.delete(session));
    watchHttp2Session(session, limits);
  });
  const pending = new Set<Socket>();
  // Every accepted socket: a destroyed HTTP/2 session does not always destroy its socket at once.
  const sockets = new Set<Socket>();

  const route = (socket: Socket) => {
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
    pending.add(socket);
    let seen: Buffer = Buffer.alloc(0);
    // A connection that has not told its protocol (all of the HTTP/2 preface, or one byte that is not) by then is closed.
    const timer = setTimeout(() => socket.destroy(), limits.headersTimeoutMs);
    const done = () => {
      clearTimeout(timer);
      pending.delete(socket);
      socket.off("data", onData);
      socket.off("close", done);
    };
    const onData = (chunk: Buffer) => {
      seen = seen.length === 0 ? chunk : Buffer.concat([seen, chunk]);
      const n = Math.min(seen.length, http2Preface.length);
      const prefaceSoFar = seen.subarray(0, n).equals(http2Preface.subarray(0, n));
      // Only a full preface decides for HTTP/2; the first differing byte decides for HTTP/1.1.
      if (prefaceSoFar && seen.length < http2Preface.length) return;
      done();
      socket.pause();
      socket.unshift(seen);
      if (prefaceSoFar) {
        // http2 reads the buffered bytes itself on its next tick; a flowing socket would drop them before that.
        h2.emit("connection", socket);
      } else {
        h1.emit("connection", socket);
        socket.resume();
      }
    };
    socket.on("data", onData);
    socket.once("close", done);
    socket.on("error", () => socket.destroy());
  };
  // Over TLS, ALPN names the protocol (RFC 9113 section 3.2: h2 over TLS is negotiated, never sniffed); a client
  // that offers no ALPN speaks HTTP/1.1.
  const routeTls = (socket: TLSSocket) => {
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
    socket.on("error", () => socket.destroy());
    if (socket.alpnProtocol === "h2") h2.emit("connection", socket);
    else h1.emit("connection", socket);
  };
  const tls = options.tls;
  const server: Server | TlsServer = tls
    ? createTlsServer(tlsServerOptions(tls.files, ["h2", "http/1.1"], limits.headersTimeoutMs), routeTls)
    : createNetServer(route);
  limitConnections(server, limits);
  let stopReloading = () => {};
  let stopped = false;
  let closed: Promise<void> = Promise.resolve();
  // Draining, a kept-alive HTTP/1.1 connection is not kept: its response says Connection: close.
  h1.on("request", (_req, res: http.ServerResponse) => {
    if (stopped) res.shouldKeepAlive = false;
  });
  const stopAccepting = () => {
    if (stopped) return;
    stopped = true;
    stopReloading();
    closed = new Promise<void>((resolve) => server.close(() => resolve()));
    for (const socket of pending) socket.destroy();
    for (const session of sessions) session.close();
    h1.closeIdleConnections();
  };

  return {
    server,
    http1: h1,
    http2: h2,
    listen(port, host) {
      return new Promise((resolve, reject) => {
        server.once("error", reject);
        server.listen(port, host, () => {
          server.off("error", reject);
          const address = server.address() as AddressInfo;
          if (tls) {
            stopReloading = reloadTlsOnChange(server as TlsServer, tls.files, tls.log, String(address.port));
          }
          resolve(address);
        });
      });
    },
    stopAccepting,
    async close(forceAfterMs = 1_000) {
      stopAccepting();
      const timer = setTimeout(() => {
        for (const session of sessions) session.destroy();
        h1.closeAllConnections();
        for (const socket of sockets) socket.destroy();
      }, forceAfterMs);
      // Keep-alive HTTP/1.1 connections turn idle as their responses end.
      const idle = setInterval(() => h1.closeIdleConnections(), 100);
      await closed;
      clearInterval(idle);
      clearTimeout(timer);
      // Stops the HTTP/1.1 server's timeout checks (the interval its "listening" set up).
      h1.close();
    },
  };
}
