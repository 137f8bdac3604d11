import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as sdk from "@a2a-js/sdk";
import { ClientFactory, ClientFactoryOptions, type Client as SdkClient } from "@a2a-js/sdk/client";
import { GrpcTransportFactory } from "@a2a-js/sdk/client/grpc";
import { toJson } from "@bufbuild/protobuf";
import { type Client, ConnectError, createClient, type Transport } from "@connectrpc/connect";
import {
  createConnectTransport,
  createGrpcTransport,
  createGrpcWebTransport,
  Http2SessionManager,
} from "@connectrpc/connect-node";
import { messageText } from "@parley/domain";
import { A2AService, AgentCardSchema, type StreamResponse, TargetService, ThreadService } from "@parley/proto";
import { loadConfig } from "../src/config/load-config.js";
import type { ParleyConfig } from "../src/config/schema.js";
import { type CreateParleyOptions, createParley, type Parley } from "../src/parley.js";

export interface TestServer {
  readonly parley: Parley;
  readonly baseUrl: string;
  readonly address: string;
  readonly dataDir: string;
  transport(protocol?: "grpc" | "connect" | "grpc-web", headers?: Record<string, string>): Transport;
  a2a(protocol?: "grpc" | "connect" | "grpc-web", headers?: Record<string, string>): Client<typeof A2AService>;
  threads(headers?: Record<string, string>): Client<typeof ThreadService>;
  targets(headers?: Record<string, string>): Client<typeof TargetService>;
  close(): Promise<void>;
}

/**
 * The echo agent that repeats its whole input (guard block, then the new message), for tests that read the framed
 * history back from the reply; the default echo replies with a summary instead.
 */
export const framedEcho = { name: "echo", type: "echo", options: { input: "framed" } } as const;

type Overrides = {
  [K in keyof ParleyConfig]?: ParleyConfig[K] extends object ? Partial<ParleyConfig[K]> : ParleyConfig[K];
};

/** A real Parley on a loopback h2c port with its own LevelDB directory. */
export async function startTestServer(
  overrides: Overrides = {},
  options: CreateParleyOptions & { dataDir?: string; keepData?: boolean } = {},
): Promise<TestServer> {
  const dataDir = options.dataDir ?? mkdtempSync(join(tmpdir(), "parley-server-"));
  const base = loadConfig({ argv: ["--port", "0", "--data-dir", dataDir, "--log-level", "silent"], env: {} });
  const config = { ...base } as Record<string, unknown>;
  for (const [k, v] of Object.entries(overrides)) {
    const current = config[k];
    config[k] =
      current &&
      typeof current === "object" &&
      !Array.isArray(current) &&
      v &&
      typeof v === "object" &&
      !Array.isArray(v)
        ? { ...current, ...v }
        : v;
  }
  const parley = await createParley(config as unknown as ParleyConfig, options);
  const { address } = await parley.listen();
  const baseUrl = `http://${address}`;
  const managers: Http2SessionManager[] = [];
  const transport = (protocol: "grpc" | "connect" | "grpc-web" = "grpc", headers: Record<string, string> = {}) => {
    const sessionManager = new Http2SessionManager(baseUrl);
    managers.push(sessionManager);
    const interceptors = [
      (next: Parameters<import("@connectrpc/connect").Interceptor>[0]) => async (req: Parameters<typeof next>[0]) => {
        // Parley's own clients speak A2A 1.0, which the gRPC interface requires (no header means 0.3).
        if (!("a2a-version" in headers)) req.header.set("a2a-version", "1.0");
        for (const [k, v] of Object.entries(headers)) req.header.set(k, v);
        return next(req);
      },
    ];
    const common = { baseUrl, sessionManager, interceptors };
    if (protocol === "grpc") return createGrpcTransport(common);
    if (protocol === "grpc-web") return createGrpcWebTransport({ ...common, httpVersion: "2" });
    return createConnectTransport({ ...common, httpVersion: "2" });
  };
  return {
    parley,
    baseUrl,
    address,
    dataDir,
    transport,
    a2a: (protocol, headers) => createClient(A2AService, transport(protocol, headers)),
    threads: (headers) => createClient(ThreadService, transport("connect", headers)),
    targets: (headers) => createClient(TargetService, transport("connect", headers)),
    async close() {
      for (const m of managers) m.abort();
      await parley.close();
      if (!options.keepData) rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

export function userMessage(text: string, extra: { contextId?: string; taskId?: string; messageId?: string } = {}) {
  return {
    messageId: extra.messageId ?? crypto.randomUUID(),
    role: 1,
    parts: [{ content: { case: "text" as const, value: text } }],
    ...(extra.contextId ? { contextId: extra.contextId } : {}),
    ...(extra.taskId ? { taskId: extra.taskId } : {}),
  };
}

/** The official @a2a-js/sdk client, over gRPC, built from the server's own agent card. */
export async function sdkGrpcClient(target: TestServer): Promise<SdkClient> {
  const card = sdk.AgentCard.fromJSON(
    toJson(AgentCardSchema, target.parley.agentCard({ grpcAddress: target.address })),
  );
  const factory = new ClientFactory(
    ClientFactoryOptions.createFrom(ClientFactoryOptions.default, { transports: [new GrpcTransportFactory()] }),
  );
  return factory.createFromAgentCard(card);
}

/** A SendMessageRequest carrying one user text in `contextId`. */
export function sendRequest(contextId: string, text: string) {
  return { message: userMessage(text, { contextId }) };
}

/** Every event of a stream, in order. */
export async function collect(stream: AsyncIterable<StreamResponse>): Promise<StreamResponse[]> {
  const events: StreamResponse[] = [];
  for await (const e of stream) events.push(e);
  return events;
}

/** The reply text a stream delivered: its artifact chunks, concatenated in order. */
export function streamedText(events: readonly StreamResponse[]): string {
  return events
    .map((e) => (e.payload.case === "artifactUpdate" ? messageText(e.payload.value.artifact ?? { parts: [] }) : ""))
    .join("");
}

/** The error a call fails with, as a ConnectError; fails the test when the call succeeds. */
export async function failure(call: Promise<unknown> | (() => Promise<unknown>)): Promise<ConnectError> {
  try {
    await (typeof call === "function" ? call() : call);
  } catch (error) {
    return ConnectError.from(error);
  }
  throw new Error("expected the call to fail, but it succeeded");
}
