import { create } from "@bufbuild/protobuf";
import type { Agent } from "@parley/domain";
import { type AgentCard, AgentCardSchema, extensionUris } from "@parley/proto";
import type { ParleyConfig } from "./config.js";

export interface AdvertisedEndpoints {
  /** The bridge's JSON-RPC URL for this agent, when a bridge serves it. */
  readonly jsonRpcUrl?: string;
  /** The h2c listener as host:port (the form A2A's gRPC binding uses: no scheme). */
  readonly grpcAddress?: string;
}

/**
 * The agent card of one hosted agent. The JSON-RPC interface is listed for
 * A2A 1.0 and 0.3 (the bridge speaks both), HTTP+JSON and gRPC for 1.0. Over gRPC an agent
 * other than the default is picked with the `parley-agent` request header.
 */
export function buildAgentCard(
  config: ParleyConfig,
  agent: Agent,
  endpoints: AdvertisedEndpoints,
  options: { readonly isDefault: boolean; readonly extended?: boolean },
): AgentCard {
  const secured = Object.keys(config.apiKeys).length > 0;
  const interfaces = [
    ...(endpoints.jsonRpcUrl
      ? [
          { url: endpoints.jsonRpcUrl, protocolBinding: "JSONRPC", protocolVersion: "1.0" },
          { url: endpoints.jsonRpcUrl, protocolBinding: "JSONRPC", protocolVersion: "0.3" },
          // The bridge serves the HTTP+JSON paths (/message:send, /tasks/...) below the same URL, named without
          // its final "/" as REST base URLs are, so that clients joining it to "/message:send" get one slash.
          { url: endpoints.jsonRpcUrl.replace(/\/+$/, ""), protocolBinding: "HTTP+JSON", protocolVersion: "1.0" },
        ]
      : []),
    ...(endpoints.grpcAddress ? [{ url: endpoints.grpcAddress, protocolBinding: "GRPC", protocolVersion: "1.0" }] : []),
  ];
  return create(AgentCardSchema, {
    name: options.isDefault ? config.card.name : `${config.card.name}/${agent.name}`,
    description: `${config.card.description}. Agent "${agent.name}": ${agent.description}.`,
    supportedInterfaces: interfaces,
    version: config.card.version,
    capabilities: {
      streaming: config.capabilities.streaming,
      pushNotifications: config.capabilities.pushNotifications,
      extendedAgentCard: config.capabilities.extendedAgentCard,
      extensions: [
        ...config.capabilities.requiredExtensions.map((uri) => ({
          uri,
          required: true,
          description: "Required by this server's configuration",
        })),
        {
          uri: extensionUris.chain,
          required: false,
          description: `Agent-to-agent chain context in message metadata under this URI (chain id, hop trace, budget); loops, more than ${config.sessions.maxHops} hops or an exhausted budget are refused with LOOP_DETECTED, HOP_LIMIT or BUDGET_EXHAUSTED`,
        },
      ],
    },
    securitySchemes: secured
      ? {
          bearer: {
            scheme: {
              case: "httpAuthSecurityScheme",
              value: {
                scheme: "Bearer",
                description: "A Parley API key; it selects the tenant",
                bearerFormat: "opaque",
              },
            },
          },
        }
      : {},
    securityRequirements: secured ? [{ schemes: { bearer: { list: [] } } }] : [],
    defaultInputModes: [...config.card.inputModes],
    defaultOutputModes: ["text/plain"],
    skills: [
      {
        id: agent.name,
        name: agent.name,
        description: agent.description,
        tags: ["conversation", "multi-turn"],
        examples: ["Reuse a contextId to continue a conversation"],
        ...(options.extended
          ? {
              inputModes: [...config.card.inputModes],
              outputModes: ["text/plain"],
            }
          : {}),
      },
    ],
  });
}
