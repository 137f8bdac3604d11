import { type Client, createClient, type Interceptor, type Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { A2AService, SessionService, TargetService, ThreadService, headers as wire } from "@parley/proto";
import { type ChainSource, createChainInterceptor } from "./chain-interceptor.js";
import { SafeHttp2SessionManager } from "./http2-session-manager.js";

/** The wire protocols a Parley server speaks on its h2c port. */
export type ParleyProtocol = "connect" | "grpc" | "grpc-web";

export const parleyProtocols: readonly ParleyProtocol[] = ["connect", "grpc", "grpc-web"];

/** HTTP versions for Connect and gRPC-Web: "2" (h2c on the server's port), "1.1" (also the bridge's port). */
export type HttpVersion = "1.1" | "2";

export const httpVersions: readonly HttpVersion[] = ["1.1", "2"];

/** The A2A protocol version this client speaks (lf.a2a.v1). */
export const a2aVersion = "1.0";

export interface ParleyClientOptions {
  /** The server's base URL, e.g. "http://127.0.0.1:8081". */
  readonly baseUrl: string;
  /** Defaults to "connect". */
  readonly protocol?: ParleyProtocol;
  /** Sent as "authorization: Bearer <token>". */
  readonly token?: string;
  /** One of the server's hosted agents (sent as the parley-agent header); the server's default agent when absent. */
  readonly agent?: string;
  /** connect and grpc-web only; gRPC is always HTTP/2. Defaults to "2". */
  readonly httpVersion?: HttpVersion;
  /** Extra headers on every request. */
  readonly headers?: Readonly<Record<string, string>>;
  readonly interceptors?: readonly Interceptor[];
  /** Bounds every call, streams included; unset leaves calls unbounded. */
  readonly defaultTimeoutMs?: number;
  /**
   * Inside an agent: the turn's chain (`turn.chain`), so what this client sends
   * stays part of that chain, its loop guard and its budget.
   */
  readonly chain?: ChainSource;
}

export interface ParleyClient {
  readonly baseUrl: string;
  readonly protocol: ParleyProtocol;
  readonly agent: string | undefined;
  readonly transport: Transport;
  readonly a2a: Client<typeof A2AService>;
  readonly threads: Client<typeof ThreadService>;
  readonly sessions: Client<typeof SessionService>;
  readonly targets: Client<typeof TargetService>;
  /** Closes the HTTP/2 session so the process (and a server's graceful close) is not held open. */
  close(): void;
}

/** Adds fixed headers (credentials, version, agent) to every request. */
function createHeaderInterceptor(headers: Readonly<Record<string, string>>): Interceptor {
  return (next) => async (req) => {
    for (const [name, value] of Object.entries(headers)) {
      if (!req.header.has(name)) req.header.set(name, value);
    }
    return next(req);
  };
}

/** What is wrong with a base URL, or undefined when it is an http(s) URL. */
export function baseUrlProblem(baseUrl: string): string | undefined {
  if (!URL.canParse(baseUrl)) return "expected e.g. http://127.0.0.1:8081";
  const { protocol } = new URL(baseUrl);
  return protocol === "http:" || protocol === "https:" ? undefined : "the scheme must be http or https";
}

function checkBaseUrl(baseUrl: string): URL {
  const problem = baseUrlProblem(baseUrl);
  if (problem) throw new Error(`invalid Parley server URL ${JSON.stringify(baseUrl)}: ${problem}`);
  return new URL(baseUrl);
}

export function createParleyClient(options: ParleyClientOptions): ParleyClient {
  const protocol = options.protocol ?? "connect";
  if (!parleyProtocols.includes(protocol)) {
    throw new Error(`unknown protocol ${JSON.stringify(protocol)}: expected one of ${parleyProtocols.join(", ")}`);
  }
  const baseUrl = checkBaseUrl(options.baseUrl).toString().replace(/\/$/, "");
  const headers: Record<string, string> = { [wire.a2aVersion]: a2aVersion, ...options.headers };
  if (options.token) headers.authorization = `Bearer ${options.token}`;
  if (options.agent) headers[wire.agent] = options.agent;
  const interceptors = [
    createHeaderInterceptor(headers),
    ...(options.chain ? [createChainInterceptor(options.chain)] : []),
    ...(options.interceptors ?? []),
  ];
  const httpVersion = options.httpVersion ?? "2";
  // An owned session manager is what lets close() end the HTTP/2 session right away
  // instead of waiting for connect-node's 15-minute idle timeout.
  const sessionManager = protocol === "grpc" || httpVersion === "2" ? new SafeHttp2SessionManager(baseUrl) : undefined;
  const common = { baseUrl, interceptors, defaultTimeoutMs: options.defaultTimeoutMs };
  let transport: Transport;
  if (protocol === "grpc") {
    transport = createGrpcTransport({ ...common, sessionManager });
  } else if (httpVersion === "2") {
    const factory = protocol === "grpc-web" ? createGrpcWebTransport : createConnectTransport;
    transport = factory({ ...common, httpVersion: "2", sessionManager });
  } else {
    const factory = protocol === "grpc-web" ? createGrpcWebTransport : createConnectTransport;
    transport = factory({ ...common, httpVersion: "1.1" });
  }
  return {
    baseUrl,
    protocol,
    agent: options.agent,
    transport,
    a2a: createClient(A2AService, transport),
    threads: createClient(ThreadService, transport),
    sessions: createClient(SessionService, transport),
    targets: createClient(TargetService, transport),
    close() {
      sessionManager?.abort();
    },
  };
}
