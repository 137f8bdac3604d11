import { create } from "@bufbuild/protobuf";
import { createClient, type Transport } from "@connectrpc/connect";
import { createConnectTransport, Http2SessionManager } from "@connectrpc/connect-node";
import { resumableStreamsExtension } from "@parley/domain";
import {
  A2AService,
  type AgentCard,
  AgentCardSchema,
  AgentInterfaceSchema,
  extensionUris,
  grpcHealthV1,
  TargetKind,
  TargetService,
  headers as wire,
} from "@parley/proto";
import type { CardSource } from "./card-source.js";

export interface RemoteUpstream {
  readonly transport: Transport;
  /** Agent names and cards, read from the remote server. */
  readonly cards: CardSource;
  /** The readiness of the remote server, read from its grpc.health.v1.Health/Check ("ok" when SERVING). */
  readiness(signal: AbortSignal): Promise<Record<string, string>>;
  /** Drops the HTTP/2 connection, so the remote server's graceful close does not wait on it. */
  close(): void;
}

/**
 * A Parley server in another process. HTTP/2 keeps one connection for every
 * call; pings keep long SSE-backed streams alive through idle-timeout proxies.
 */
export function createRemoteUpstream(baseUrl: string, options: { pingIntervalMs?: number } = {}): RemoteUpstream {
  let parsed: URL;
  try {
    parsed = new URL(baseUrl);
  } catch {
    throw new Error(`--upstream must be a URL such as http://127.0.0.1:8081, got ${JSON.stringify(baseUrl)}`);
  }
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:") {
    throw new Error(`--upstream must use http or https, got ${JSON.stringify(parsed.protocol)}`);
  }
  const sessionManager = new Http2SessionManager(baseUrl, { pingIntervalMs: options.pingIntervalMs ?? 30_000 });
  const transport = createConnectTransport({ httpVersion: "2", baseUrl, useBinaryFormat: true, sessionManager });
  const a2a = createClient(A2AService, transport);
  const targets = createClient(TargetService, transport);
  const health = createClient(grpcHealthV1.Health, transport);
  let names: Promise<string[]> | undefined;

  const agentNames = () => {
    names ??= targets.listTargets({}).then(
      (r) => r.targets.filter((t) => t.kind === TargetKind.AGENT).map((t) => t.ref),
      (error: unknown) => {
        names = undefined;
        throw error;
      },
    );
    return names;
  };

  return {
    transport,
    close: () => sessionManager.abort(),
    async readiness(signal) {
      try {
        const { status } = await health.check({ service: "" }, { signal });
        const name = grpcHealthV1.HealthCheckResponse_ServingStatus[status];
        return {
          upstream: status === grpcHealthV1.HealthCheckResponse_ServingStatus.SERVING ? "ok" : `upstream is ${name}`,
        };
      } catch (error) {
        return { upstream: `upstream health check failed: ${(error as Error).message}` };
      }
    },
    cards: {
      agentNames,
      async agentCard({ jsonRpcUrl, grpcAddress, agent }): Promise<AgentCard> {
        const headers: Record<string, string> = { [wire.a2aVersion]: "1.0" };
        if (agent !== undefined) headers[wire.agent] = agent;
        let card: AgentCard;
        try {
          card = await a2a.getExtendedAgentCard({}, { headers });
        } catch {
          // Servers without an extended card still deserve a usable public card: name and interfaces.
          // Listing agents may need credentials the card request does not carry; the card stays public regardless.
          const listed = agent === undefined ? await agentNames().catch(() => [] as string[]) : [];
          const name = agent ?? listed[0] ?? "default";
          card = create(AgentCardSchema, {
            name: `Parley/${name}`,
            description: `Agent "${name}" behind a Parley bridge`,
            version: "0.1.0",
            // What every Parley server declares: the chain context, and (with streaming) resumable streams,
            // since every backend keeps a task event log, so an upstream bridge's card says what an embedded one says.
            capabilities: {
              streaming: true,
              pushNotifications: false,
              extensions: [
                {
                  uri: extensionUris.chain,
                  required: false,
                  description:
                    "Agent-to-agent chain context in message metadata under this URI (chain id, hop trace, budget); loops, too many hops or an exhausted budget are refused with LOOP_DETECTED, HOP_LIMIT or BUDGET_EXHAUSTED",
                },
                resumableStreamsExtension(),
              ],
            },
            defaultInputModes: ["text/plain"],
            defaultOutputModes: ["text/plain"],
            skills: [{ id: name, name, description: `Converse with ${name}`, tags: ["conversation"] }],
          });
        }
        card.supportedInterfaces = [
          { url: jsonRpcUrl, protocolBinding: "JSONRPC", protocolVersion: "1.0", tenant: "" },
          { url: jsonRpcUrl, protocolBinding: "JSONRPC", protocolVersion: "0.3", tenant: "" },
          { url: jsonRpcUrl.replace(/\/+$/, ""), protocolBinding: "HTTP+JSON", protocolVersion: "1.0", tenant: "" },
          ...(grpcAddress ? [{ url: grpcAddress, protocolBinding: "GRPC", protocolVersion: "1.0", tenant: "" }] : []),
        ].map((i) => create(AgentInterfaceSchema, i));
        return card;
      },
    },
  };
}
