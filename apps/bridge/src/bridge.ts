import { createHash } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { isMessage, type JsonValue, type Message, toJsonString } from "@bufbuild/protobuf";
import { ConnectError, type Transport } from "@connectrpc/connect";
import { type AgentCard, AgentCardSchema, SendMessageRequestSchema } from "@parley/proto";
import {
  a2aErrorDomain,
  errorInfoData,
  isInternal,
  JsonRpcCode,
  JsonRpcError,
  parleyErrorDomain,
  toJsonRpcError,
} from "./json-rpc-error.js";
import { type JsonRpcId, parseEnvelope, parseJsonBody, readBody, salvageId } from "./json-rpc-request.js";
import type { Logger } from "./logger.js";
import { createBridgeLogger } from "./logger.js";
import {
  findMethod,
  type MethodSpec,
  type ProtocolVersion,
  supportedVersions,
  type UpstreamStream,
} from "./methods.js";
import { type ResumePoint, resumeAfterHeader, resumePointOf, streamStartOf, taskIdOfEvent } from "./sse-resume.js";
import { agentCardToV03 } from "./v03-mapping.js";

/** Where agent cards and agent names come from: a Parley instance in embedded mode, the upstream otherwise. */
export interface CardSource {
  agentNames(): readonly string[] | Promise<readonly string[]>;
  agentCard(options: { jsonRpcUrl: string; grpcAddress?: string; agent?: string }): AgentCard | Promise<AgentCard>;
}

export interface BridgeLimits {
  /** Largest request body. */
  readonly maxBodyBytes: number;
  /** Deepest JSON nesting accepted. */
  readonly maxJsonDepth: number;
  /** Most parts one message may carry. */
  readonly maxPartsPerMessage: number;
}

export const defaultLimits: BridgeLimits = { maxBodyBytes: 1024 * 1024, maxJsonDepth: 64, maxPartsPerMessage: 64 };

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
  readonly limits?: Partial<BridgeLimits>;
  readonly logger?: Logger;
}

export interface Bridge {
  /** The JSON-RPC URL of the default agent (ends with "/"). */
  readonly url: string;
  readonly port: number;
  readonly server: Server;
  /** Stops accepting, ends open SSE streams (their upstream calls are aborted) and closes the listener. */
  close(): Promise<void>;
}

const agentCardPath = "/.well-known/agent-card.json";
const agentPathPattern = /^\/agents\/([^/]+)(\/.*)?$/;

interface Route {
  readonly kind: "rpc" | "card" | "health";
  readonly agent?: string;
}

function matchRoute(pathname: string): Route | undefined {
  if (pathname === "/") return { kind: "rpc" };
  if (pathname === agentCardPath) return { kind: "card" };
  if (pathname === "/healthz") return { kind: "health" };
  const match = agentPathPattern.exec(pathname);
  if (!match) return undefined;
  let agent: string;
  try {
    agent = decodeURIComponent(match[1]!);
  } catch {
    return undefined;
  }
  const rest = match[2] ?? "/";
  if (rest === "/") return { kind: "rpc", agent };
  if (rest === agentCardPath) return { kind: "card", agent };
  return undefined;
}

const sseHeaders = {
  "Content-Type": "text/event-stream",
  "Cache-Control": "no-cache",
  Connection: "keep-alive",
  "X-Accel-Buffering": "no",
};

function sendJson(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Readonly<Record<string, string>> = {},
): void {
  if (res.headersSent) return;
  const text = JSON.stringify(body);
  res.writeHead(status, {
    "Content-Type": "application/json",
    "Content-Length": Buffer.byteLength(text),
    ...headers,
  });
  res.end(text);
}

/**
 * Picks the A2A version of a request. The query parameter wins over the
 * header because it is the explicit choice written into the URL a client was
 * configured with; nothing at all means 0.3, as the specification says.
 */
function negotiateVersion(req: IncomingMessage, url: URL): string {
  const fromQuery = url.searchParams.get("A2A-Version")?.trim();
  if (fromQuery) return fromQuery;
  const fromHeader = headerValue(req, "a2a-version")?.trim();
  return fromHeader || "0.3";
}

function checkVersion(version: string): ProtocolVersion {
  if ((supportedVersions as readonly string[]).includes(version)) return version as ProtocolVersion;
  throw new JsonRpcError(
    JsonRpcCode.VersionNotSupported,
    `A2A protocol version ${JSON.stringify(version)} is not supported; supported versions: ${supportedVersions.join(", ")}`,
    {
      data: errorInfoData("VERSION_NOT_SUPPORTED", a2aErrorDomain, {
        requested: version,
        supported: supportedVersions.join(","),
      }),
    },
  );
}

function headerValue(req: IncomingMessage, name: string): string | undefined {
  const value = req.headers[name];
  return Array.isArray(value) ? value.join(",") : value;
}

function upstreamHeaders(req: IncomingMessage, version: ProtocolVersion, agent: string | undefined): Headers {
  const headers = new Headers({ "a2a-version": version });
  const authorization = headerValue(req, "authorization");
  if (authorization) headers.set("authorization", authorization);
  // 0.3 clients still send the X- prefixed name.
  const extensions = headerValue(req, "a2a-extensions") ?? headerValue(req, "x-a2a-extensions");
  if (extensions) headers.set("a2a-extensions", extensions);
  if (agent !== undefined) headers.set("parley-agent", agent);
  return headers;
}

function checkParts(input: Message, max: number): void {
  if (!isMessage(input, SendMessageRequestSchema)) return;
  const count = input.message?.parts.length ?? 0;
  if (count > max) {
    throw new JsonRpcError(
      JsonRpcCode.LimitExceeded,
      `message.parts has ${count} parts; at most ${max} are accepted per message`,
      { data: errorInfoData("LIMIT_EXCEEDED", parleyErrorDomain, { limit: "maxPartsPerMessage", max: String(max) }) },
    );
  }
}

function etagOf(body: string): string {
  return `"${createHash("sha256").update(body).digest("base64url").slice(0, 27)}"`;
}

function etagMatches(ifNoneMatch: string | undefined, etag: string): boolean {
  if (!ifNoneMatch) return false;
  return ifNoneMatch
    .split(",")
    .map((t) => t.trim().replace(/^W\//, ""))
    .some((t) => t === etag || t === "*");
}

export async function createBridge(options: BridgeOptions): Promise<Bridge> {
  const logger = options.logger ?? createBridgeLogger();
  const limits: BridgeLimits = { ...defaultLimits, ...options.limits };
  const keepAliveMs = options.keepAliveMs ?? 15_000;
  const host = options.host ?? "127.0.0.1";
  const openStreams = new Set<{ readonly abort: (reason: string) => void; readonly ended: Promise<void> }>();
  let baseUrl = "";
  let closing = false;

  const jsonRpcUrlOf = (agent: string | undefined) =>
    agent === undefined ? `${baseUrl}/` : `${baseUrl}/agents/${encodeURIComponent(agent)}/`;

  async function resolveAgent(route: Route, res: ServerResponse): Promise<boolean> {
    if (route.agent === undefined) return true;
    let names: readonly string[];
    try {
      names = await options.cards.agentNames();
    } catch (error) {
      // Without the list the upstream still knows: it answers an unknown parley-agent with an error of its own.
      logger.warn({ err: error }, "could not list the upstream's agents");
      return true;
    }
    if (names.includes(route.agent)) return true;
    sendJson(res, 404, {
      error: `no agent named ${JSON.stringify(route.agent)}; known agents: ${names.join(", ")}`,
      agents: names,
    });
    return false;
  }

  async function serveCard(req: IncomingMessage, res: ServerResponse, url: URL, route: Route): Promise<void> {
    if (req.method !== "GET" && req.method !== "HEAD") {
      sendJson(
        res,
        405,
        { error: `method ${req.method} is not allowed on ${url.pathname}; use GET` },
        { Allow: "GET, HEAD" },
      );
      return;
    }
    if (!(await resolveAgent(route, res))) return;
    let card: AgentCard;
    try {
      card = await options.cards.agentCard({
        jsonRpcUrl: jsonRpcUrlOf(route.agent),
        grpcAddress: options.grpcAddress,
        agent: route.agent,
      });
    } catch (error) {
      logger.error({ err: error, agent: route.agent }, "agent card unavailable");
      sendJson(res, 502, { error: `the agent card could not be built: ${(error as Error).message}` });
      return;
    }
    // A client that asks for 0.3 explicitly gets the card shape 0.3 clients parse; everyone else the 1.0 card.
    const version = url.searchParams.get("A2A-Version")?.trim() || headerValue(req, "a2a-version")?.trim();
    const body = version === "0.3" ? JSON.stringify(agentCardToV03(card)) : toJsonString(AgentCardSchema, card);
    const etag = etagOf(body);
    const headers = { ETag: etag, "Cache-Control": "public, max-age=60", Vary: "A2A-Version" };
    if (etagMatches(headerValue(req, "if-none-match"), etag)) {
      res.writeHead(304, headers);
      res.end();
      return;
    }
    res.writeHead(200, {
      ...headers,
      "Content-Type": "application/json",
      "Content-Length": Buffer.byteLength(body),
    });
    res.end(req.method === "HEAD" ? undefined : body);
  }

  async function serveRpc(req: IncomingMessage, res: ServerResponse, url: URL, route: Route): Promise<void> {
    if (req.method !== "POST") {
      sendJson(
        res,
        405,
        {
          jsonrpc: "2.0",
          id: null,
          error: {
            code: JsonRpcCode.InvalidRequest,
            message: `HTTP method ${req.method} is not allowed on ${url.pathname}; JSON-RPC requests are POSTed`,
          },
        },
        { Allow: "POST" },
      );
      return;
    }
    if (!(await resolveAgent(route, res))) return;
    const upstreamAbort = new AbortController();
    res.on("close", () => {
      // A response closed before it finished means the client went away: stop the upstream work now.
      if (!res.writableFinished) upstreamAbort.abort();
    });
    let id: JsonRpcId = null;
    let method = "";
    try {
      const body = await readBody(req, limits.maxBodyBytes);
      const parsed = parseJsonBody(body, limits.maxJsonDepth);
      id = salvageId(parsed);
      const envelope = parseEnvelope(parsed);
      method = envelope.method;
      const version = checkVersion(negotiateVersion(req, url));
      const spec = findMethod(version, envelope.method);
      const input = spec.parse(envelope.params);
      checkParts(input, limits.maxPartsPerMessage);
      const headers = upstreamHeaders(req, version, route.agent);
      if (spec.streaming) {
        const resume = resumePointOf(input, headerValue(req, "last-event-id"));
        if (resume) headers.set(resumeAfterHeader, String(resume.afterSeq));
        await streamEvents(res, spec, input, id, headers, upstreamAbort, resume);
      } else {
        const output = await (spec.call(options.upstream, input, upstreamAbort.signal, headers) as Promise<Message>);
        sendJson(res, 200, { jsonrpc: "2.0", id, result: spec.render(output) });
      }
    } catch (error) {
      if (upstreamAbort.signal.aborted && res.destroyed) return;
      const rpcError = asRpcError(error);
      logFailure(rpcError, error, method);
      sendJson(res, rpcError.httpStatus, { jsonrpc: "2.0", id, error: rpcError.toObject() }, rpcError.options.headers);
      if (rpcError.httpStatus === 413) req.destroy();
    }
  }

  function asRpcError(error: unknown): JsonRpcError {
    if (error instanceof JsonRpcError || error instanceof ConnectError) return toJsonRpcError(error);
    return new JsonRpcError(JsonRpcCode.InternalError, `internal error in the bridge: ${(error as Error).message}`);
  }

  function logFailure(rpcError: JsonRpcError, cause: unknown, method: string): void {
    if (isInternal(rpcError)) logger.error({ err: cause, method }, "request failed");
    else logger.debug({ code: rpcError.code, message: rpcError.message, method }, "request refused");
  }

  async function streamEvents(
    res: ServerResponse,
    spec: MethodSpec,
    input: Message,
    id: JsonRpcId,
    headers: Headers,
    upstreamAbort: AbortController,
    resume: ResumePoint | undefined,
  ): Promise<void> {
    const upstream = await (spec.call(
      options.upstream,
      input,
      upstreamAbort.signal,
      headers,
    ) as Promise<UpstreamStream>);
    const iterator = upstream.events[Symbol.asyncIterator]();
    // The n-th event of the stream has seq start + n, the number the shared event log gave it.
    const start = streamStartOf(upstream.header);
    let index = 0;
    let taskId = resume?.taskId;
    const next = async (): Promise<IteratorResult<Message> & { seq?: number }> => {
      for (;;) {
        const result = await iterator.next();
        if (result.done) return result;
        const seq = start + ++index;
        // An upstream that ignored parley-resume-after replays from its start: drop what the client already has.
        if (resume && seq <= resume.afterSeq) continue;
        return { ...result, seq };
      }
    };
    // The first event is awaited before any byte is written, so an early failure is still a plain JSON-RPC error.
    const first = await next();
    // The headers go out with the first event (written right below), in one packet.
    res.writeHead(200, sseHeaders);
    let corked = false;
    const write = (payload: unknown, event?: string, eventId?: string) => {
      if (res.destroyed) return;
      // Events that arrive in one tick (a fast agent's chunks) leave in one socket write, not one each.
      if (!corked) {
        corked = true;
        res.cork();
        process.nextTick(() => {
          corked = false;
          res.uncork();
        });
      }
      res.write(
        `${event ? `event: ${event}\n` : ""}${eventId ? `id: ${eventId}\n` : ""}data: ${JSON.stringify(payload)}\n\n`,
      );
    };
    const writeEvent = (output: Message, seq: number | undefined) => {
      taskId ??= taskIdOfEvent(output);
      const eventId = taskId !== undefined && seq !== undefined ? `${taskId}:${seq}` : undefined;
      write({ jsonrpc: "2.0", id, result: spec.render(output) as JsonValue }, undefined, eventId);
    };
    let shutdownReason: string | undefined;
    let markEnded = () => {};
    const handle = {
      abort(reason: string) {
        shutdownReason = reason;
        upstreamAbort.abort();
      },
      ended: new Promise<void>((resolve) => {
        markEnded = resolve;
      }),
    };
    openStreams.add(handle);
    const keepAlive = setInterval(() => {
      if (!res.destroyed) res.write(": keep-alive\n\n");
    }, keepAliveMs);
    try {
      if (!first.done) writeEvent(first.value, first.seq);
      for (;;) {
        const event = await next();
        if (event.done) break;
        writeEvent(event.value, event.seq);
      }
    } catch (error) {
      if (shutdownReason !== undefined) {
        write({ jsonrpc: "2.0", id, error: { code: JsonRpcCode.InternalError, message: shutdownReason } }, "error");
      } else if (!upstreamAbort.signal.aborted) {
        const rpcError = asRpcError(error);
        logFailure(rpcError, error, spec.name);
        write({ jsonrpc: "2.0", id, error: rpcError.toObject() }, "error");
      }
    } finally {
      clearInterval(keepAlive);
      openStreams.delete(handle);
      if (!upstreamAbort.signal.aborted) await iterator.return?.();
      if (res.destroyed) markEnded();
      else res.end(markEnded);
    }
  }

  const server = createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://bridge.invalid");
    const route = matchRoute(url.pathname);
    let work: Promise<void>;
    if (closing) {
      sendJson(res, 503, { error: "the bridge is shutting down" }, { Connection: "close" });
      return;
    }
    if (!route) {
      sendJson(res, 404, {
        error: `no route for ${url.pathname}; JSON-RPC is served at / and /agents/<name>/, agent cards at ${agentCardPath}`,
      });
      return;
    }
    if (route.kind === "health") {
      res.writeHead(200, { "Content-Type": "text/plain" });
      res.end("ok\n");
      return;
    }
    if (route.kind === "card") work = serveCard(req, res, url, route);
    else work = serveRpc(req, res, url, route);
    work.catch((error: unknown) => {
      // Last line of defence: whatever escaped the handlers becomes a 500, never a crash.
      logger.error({ err: error, path: url.pathname }, "unhandled failure in the bridge");
      if (!res.headersSent) {
        sendJson(res, 500, {
          jsonrpc: "2.0",
          id: null,
          error: { code: JsonRpcCode.InternalError, message: `internal error: ${(error as Error).message}` },
        });
      } else {
        res.destroy();
      }
    });
  });
  server.on("clientError", (error, socket) => {
    logger.debug({ err: error }, "malformed HTTP request");
    if (socket.writable) socket.end("HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n");
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
  baseUrl = (options.publicUrl ?? `http://${hostForUrl}:${port}`).replace(/\/+$/, "");
  logger.info({ url: `${baseUrl}/` }, "bridge serving A2A JSON-RPC");

  let closed: Promise<void> | undefined;
  return {
    url: `${baseUrl}/`,
    port,
    server,
    close() {
      closed ??= (async () => {
        closing = true;
        const stopped = new Promise<void>((resolve) => server.close(() => resolve()));
        const streams = [...openStreams];
        for (const stream of streams) {
          stream.abort("the bridge is shutting down; resubscribe to the task to follow it");
        }
        server.closeIdleConnections();
        // Connections that carried a stream turn idle only once its last bytes are out.
        await Promise.all(streams.map((s) => s.ended));
        server.closeIdleConnections();
        const force = setTimeout(() => server.closeAllConnections(), 2_000);
        await stopped;
        clearTimeout(force);
        logger.info("bridge stopped");
      })();
      return closed;
    },
  };
}
