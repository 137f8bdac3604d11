import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { createServer as createHttpsServer } from "node:https";
import type { AddressInfo } from "node:net";
import type { Server as TlsServer } from "node:tls";
import type { Transport } from "@connectrpc/connect";
import { Code } from "@connectrpc/connect";
import {
  createHealthMonitor,
  createHttpFront,
  createObservability,
  type HealthMonitor,
  type Observability,
  trackHttpRequests,
} from "@parley/server";
import {
  type ConnectionLimits,
  createBodyReader,
  defaultConnectionLimits,
  http1ServerOptions,
  limitConnections,
  refuseRpc,
  reloadTlsOnChange,
  type TlsFiles,
  type TlsReloadLog,
  tlsServerOptions,
} from "@parley/serving";
import { createCardHandler } from "./agent-card.js";
import { type CardSource, createAgentCheck } from "./card-source.js";
import { sendJson } from "./http-response.js";
import type { HttpRoute } from "./http-route.js";
import { JsonRpcCode, JsonRpcError } from "./json-rpc-error.js";
import { type BridgeLimits, createRpcHandler, defaultLimits } from "./json-rpc-handler.js";
import type { Logger } from "./logger.js";
import { createBridgeLogger } from "./logger.js";
import { sendRestError } from "./rest/rest-error.js";
import { createRestHandler } from "./rest/rest-handler.js";
import { matchRestRoute, restPaths } from "./rest/rest-routes.js";
import { jsonRpcPath, knownPaths, matchRoute } from "./routes.js";
import { createSseWriter, defaultSseLimits, type SseLimits } from "./sse-writer.js";

export interface BridgeOptions {
  /** The Connect transport every A2A call goes through (in-process or remote). */
  readonly upstream: Transport;
  readonly cards: CardSource;
  readonly host?: string;
  /** 0 picks a free port. */
  readonly port?: number;
  /** The gRPC address (host:port) the agent cards advertise next to the JSON-RPC URL. */
  readonly grpcAddress?: string;
  /** The base URL the cards advertise, when clients reach the bridge through a proxy. */
  readonly publicUrl?: string;
  /** Interval of SSE keep-alive comments. */
  readonly keepAliveMs?: number;
  /** How much slow SSE readers may make the bridge hold (bridge.sse* settings). */
  readonly sse?: Partial<SseLimits>;
  readonly limits?: Partial<BridgeLimits>;
  /** Timeouts and limits of the port (the `connections` settings), the same as the h2c port's. */
  readonly connections?: ConnectionLimits;
  readonly logger?: Logger;
  /** Metrics, request log and CORS policy; in embedded mode the server's, so /metrics shows the whole process. */
  readonly observability?: Observability;
  /** What /readyz reports: the server's monitor in embedded mode, the upstream's health in remote mode. */
  readonly health?: HealthMonitor;
  /** Handlers for paths beside JSON-RPC (the Connect RPCs, the console), asked in order before it. */
  readonly routes?: readonly HttpRoute[];
  /**
   * Serve HTTPS (HTTP/1.1, ALPN http/1.1) with these files, reloaded on SIGHUP and when they change; the cards
   * then advertise https URLs. Unset: cleartext HTTP/1.1.
   */
  readonly tls?: { readonly files: TlsFiles; readonly log?: TlsReloadLog };
}

export interface Bridge {
  /** The JSON-RPC URL of the default agent (ends with "/"). */
  readonly url: string;
  readonly port: number;
  readonly server: Server;
  /**
   * The start of a drain: readiness turns false, the listener takes no new
   * connection, a request on a kept-alive one is answered 503, and requests
   * in flight (streams included) go on.
   */
  stopAccepting(): void;
  /**
   * Resolves once every request in flight has been answered, or after
   * `graceMs`; SSE streams count until they end (a stream following a task
   * ends with the task's final event).
   */
  settled(graceMs: number): Promise<void>;
  /** Stops accepting, ends open SSE streams with an error event naming `reason` and closes the listener. */
  close(reason?: string): Promise<void>;
}

/** Parsed targets without a query, by target: clients post to the same few paths over and over. */
const parsedUrls = new Map<string, URL>();
const maxParsedUrls = 256;

/**
 * The request target as a URL. One without a query is parsed once and the URL shared (the handlers only read
 * it): parsing one per request showed in an embedded send's profile.
 */
function requestUrl(target: string): URL {
  const known = parsedUrls.get(target);
  if (known) return known;
  // Joined as text, not resolved against a base: a target such as "//x" would read as a host and throw.
  const url = new URL(`http://bridge.invalid${target.startsWith("/") ? "" : "/"}${target}`);
  if (!target.includes("?") && parsedUrls.size < maxParsedUrls) parsedUrls.set(target, url);
  return url;
}

/** The HTTP server: routes each request to the card or the JSON-RPC handler, and shuts down in order. */
export async function createBridge(options: BridgeOptions): Promise<Bridge> {
  const logger = options.logger ?? createBridgeLogger();
  const host = options.host ?? "127.0.0.1";
  let baseUrl = "";
  let closing = false;

  const checkAgent = createAgentCheck(options.cards, logger);
  const sse = createSseWriter(options.keepAliveMs ?? 15_000, { ...defaultSseLimits, ...options.sse }, logger);
  const serveCard = createCardHandler({
    cards: options.cards,
    checkAgent,
    jsonRpcUrlOf: (agent) => `${baseUrl}${jsonRpcPath(agent)}`,
    grpcAddress: options.grpcAddress,
    logger,
  });
  const limits = { ...defaultLimits, ...options.limits };
  const connections = options.connections ?? defaultConnectionLimits;
  const serveRpc = createRpcHandler({
    upstream: options.upstream,
    limits,
    checkAgent,
    sse,
    logger,
  });
  const serveRest = createRestHandler({ upstream: options.upstream, limits, checkAgent, sse, logger });

  const observability = options.observability ?? createObservability(logger);
  // Without a monitor of its own the bridge is ready while it is not draining.
  const health = options.health ?? createHealthMonitor({ probe: async () => ({}) });
  // Requests being answered, so a drain knows when the last one is out.
  let inFlight = 0;
  let onIdle = () => {};
  /** Counts a request in flight, or refuses it while the bridge shuts down. */
  const admit = (res: ServerResponse): boolean => {
    if (closing) {
      sendJson(res, 503, { error: "the bridge is shutting down" }, { Connection: "close" });
      return false;
    }
    inFlight++;
    res.once("close", () => {
      if (--inFlight === 0) onIdle();
    });
    return true;
  };
  const handle = (req: IncomingMessage, res: ServerResponse) => {
    const url = requestUrl(req.url ?? "/");
    const route = matchRoute(url.pathname);
    if (!admit(res)) return;
    const extra = options.routes?.find((r) => r.matches(url.pathname));
    if (extra) {
      extra.handle(req, res);
      return;
    }
    if (!route) {
      sendJson(res, 404, { error: `no route for ${url.pathname}; ${knownPaths}; ${restPaths}` });
      return;
    }
    const work = route.kind === "card" ? serveCard(req, res, url, route.agent) : serveRpc(req, res, url, route.agent);
    lastLineOfDefence(work, req, res, url);
  };
  // The HTTP+JSON binding: the paths that are neither another route's nor JSON-RPC's or a card's.
  const isRestRequest = (req: IncomingMessage): boolean => {
    const pathname = requestUrl(req.url ?? "/").pathname;
    if (matchRoute(pathname) || options.routes?.some((r) => r.matches(pathname))) return false;
    return matchRestRoute(pathname, req.method ?? "GET") !== undefined;
  };
  const handleRest = (req: IncomingMessage, res: ServerResponse) => {
    const url = requestUrl(req.url ?? "/");
    // isRestRequest matched it before the request was tracked.
    const route = matchRestRoute(url.pathname, req.method ?? "GET")!;
    if (!admit(res)) return;
    lastLineOfDefence(serveRest(req, res, url, route), req, res, url);
  };
  const lastLineOfDefence = (work: Promise<void>, req: IncomingMessage, res: ServerResponse, url: URL) => {
    work.catch((error: unknown) => {
      // Last line of defence: whatever escaped the handlers becomes a 500, never a crash.
      logger.error({ err: error, path: url.pathname }, "unhandled failure in the bridge");
      if (!res.headersSent && isRestRequest(req)) {
        sendRestError(res, new JsonRpcError(JsonRpcCode.InternalError, `internal error: ${(error as Error).message}`));
      } else if (!res.headersSent) {
        sendJson(res, 500, {
          jsonrpc: "2.0",
          id: null,
          error: { code: JsonRpcCode.InternalError, message: `internal error: ${(error as Error).message}` },
        });
      } else {
        res.destroy();
      }
    });
  };
  // A body that does not arrive in time is answered in its route's protocol: Connect's for the Connect routes.
  const refuseSlowBody = (req: IncomingMessage, res: ServerResponse, message: string) => {
    const pathname = requestUrl(req.url ?? "/").pathname;
    if (options.routes?.some((r) => r.matches(pathname))) {
      refuseRpc(req, res, Code.DeadlineExceeded, message, 408);
      return;
    }
    if (isRestRequest(req)) {
      sendRestError(res, new JsonRpcError(JsonRpcCode.InvalidRequest, message, { httpStatus: 408 }));
      return;
    }
    sendJson(res, 408, { jsonrpc: "2.0", id: null, error: { code: JsonRpcCode.InvalidRequest, message } });
  };
  // Every body is read (within connections.bodyTimeoutMs, and the largest any route takes) before routing, so an
  // oversize one is answered 413 only after its rest was read and thrown away: the client gets the 413, not a reset.
  // Then the front (request id, CORS, /healthz, /readyz, /metrics), then the tracked JSON-RPC and card routes.
  const trackedRpc = trackHttpRequests(observability, "jsonrpc", handle);
  const trackedRest = trackHttpRequests(observability, "rest", handleRest);
  const maxBodyBytes = Math.max(limits.maxBodyBytes, ...(options.routes ?? []).map((r) => r.maxBodyBytes ?? 0));
  const tls = options.tls;
  const serverOptions = tls
    ? {
        ...http1ServerOptions(connections),
        // HTTP/1.1 only: the JSON-RPC and SSE handlers are written for it (the h2c port offers h2).
        ...tlsServerOptions(tls.files, ["http/1.1"], connections.headersTimeoutMs),
      }
    : http1ServerOptions(connections);
  const requests = createBodyReader(
    {
      maxBodyBytes,
      maxDiscardBytes: connections.maxDiscardBytes,
      bodyTimeoutMs: connections.bodyTimeoutMs,
      refuseSlowBody,
    },
    createHttpFront({ observability, health }, (req, res) =>
      isRestRequest(req) ? trackedRest(req, res) : trackedRpc(req, res),
    ),
  );
  const server: Server = tls ? createHttpsServer(serverOptions, requests) : createServer(serverOptions, requests);
  limitConnections(server, connections);
  server.on("clientError", (error, socket) => {
    logger.debug({ err: error }, "malformed HTTP request");
    // Headers (or a whole request) that did not arrive within connections.headersTimeoutMs: Node's own 408.
    const timedOut = (error as NodeJS.ErrnoException).code === "ERR_HTTP_REQUEST_TIMEOUT";
    const status = timedOut ? "408 Request Timeout" : "400 Bad Request";
    if (socket.writable) socket.end(`HTTP/1.1 ${status}\r\nConnection: close\r\n\r\n`);
    else socket.destroy();
  });

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  const hostForUrl = host.includes(":") ? `[${host}]` : host;
  baseUrl = (options.publicUrl ?? `${tls ? "https" : "http"}://${hostForUrl}:${port}`).replace(/\/+$/, "");
  const stopReloading = tls
    ? reloadTlsOnChange(server as unknown as TlsServer, tls.files, tls.log ?? logger, String(port))
    : () => {};
  logger.info({ url: `${baseUrl}/` }, "bridge serving A2A JSON-RPC");

  let closed: Promise<void> | undefined;
  let stopped: Promise<void> | undefined;
  const stopAccepting = () => {
    if (stopped) return;
    stopReloading();
    health.drain();
    closing = true;
    stopped = new Promise<void>((resolve) => server.close(() => resolve()));
    server.closeIdleConnections();
  };
  return {
    url: `${baseUrl}/`,
    port,
    server,
    stopAccepting,
    async settled(graceMs) {
      if (inFlight === 0) return;
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        new Promise<void>((resolve) => {
          onIdle = resolve;
        }),
        new Promise<void>((resolve) => {
          timer = setTimeout(resolve, graceMs);
        }),
      ]);
      clearTimeout(timer);
      onIdle = () => {};
    },
    close(reason = "the bridge is shutting down; resubscribe to the task to follow it") {
      closed ??= (async () => {
        stopAccepting();
        for (const route of options.routes ?? []) route.close?.();
        const streamsEnded = sse.closeAll(reason);
        server.closeIdleConnections();
        // A client that reads nothing would hold its stream's last bytes (and the shutdown) for ever.
        const force = setTimeout(() => server.closeAllConnections(), 2_000);
        // Connections that carried a stream turn idle only once its last bytes are out.
        await streamsEnded;
        server.closeIdleConnections();
        await stopped;
        clearTimeout(force);
        logger.info("bridge stopped");
      })();
      return closed;
    },
  };
}
