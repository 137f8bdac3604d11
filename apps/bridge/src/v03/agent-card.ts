/** The 1.0 agent card in the shape A2A 0.3 clients parse. */
import { type JsonObject, type JsonValue, toJson } from "@bufbuild/protobuf";
import {
  type AgentCard,
  type AgentInterface,
  OAuthFlowsSchema,
  type SecurityRequirement,
  type SecurityScheme,
} from "@parley/proto";
import { withOptional } from "./to-v03.js";

function securitySchemeToV03(s: SecurityScheme): JsonObject {
  const v = s.scheme;
  switch (v.case) {
    case "apiKeySecurityScheme":
      return withOptional(
        { type: "apiKey", name: v.value.name, in: v.value.location },
        "description",
        v.value.description,
      );
    case "httpAuthSecurityScheme": {
      const out: JsonObject = { type: "http", scheme: v.value.scheme };
      withOptional(out, "bearerFormat", v.value.bearerFormat);
      return withOptional(out, "description", v.value.description);
    }
    case "oauth2SecurityScheme": {
      const out: JsonObject = { type: "oauth2", flows: v.value.flows ? toJson(OAuthFlowsSchema, v.value.flows) : {} };
      withOptional(out, "oauth2MetadataUrl", v.value.oauth2MetadataUrl);
      return withOptional(out, "description", v.value.description);
    }
    case "openIdConnectSecurityScheme":
      return withOptional(
        { type: "openIdConnect", openIdConnectUrl: v.value.openIdConnectUrl },
        "description",
        v.value.description,
      );
    case "mtlsSecurityScheme":
      return withOptional({ type: "mutualTLS" }, "description", v.value.description);
    default:
      return { type: "http", scheme: "bearer" };
  }
}

function securityToV03(requirements: SecurityRequirement[]): JsonValue {
  return requirements.map((r) => Object.fromEntries(Object.entries(r.schemes).map(([k, v]) => [k, v.list])));
}

/** Whether an interface of the 1.0 card is declared for A2A 0.3 ("0.3", "0.3.0", ...). */
function speaks03(i: AgentInterface): boolean {
  return i.protocolVersion === "0.3" || i.protocolVersion.startsWith("0.3.");
}

/**
 * The 0.3 card: one primary `url` (the 0.3 JSON-RPC endpoint) and the
 * interfaces as `additionalInterfaces`, as 0.3 clients expect. A 0.3 card
 * names no version per interface, so a 0.3 client takes every interface it
 * lists for 0.3: only those the 1.0 card declares for 0.3 are listed. The
 * gRPC interface is 1.0's `lf.a2a.v1.A2AService`; a 0.3 gRPC client calls
 * `a2a.v1.A2AService`, which the h2c port does not serve.
 */
export function agentCardToV03(card: AgentCard): JsonObject {
  const v03 = card.supportedInterfaces.filter(speaks03);
  const jsonRpc = v03.find((i) => i.protocolBinding === "JSONRPC") ?? v03[0];
  const seen = new Set<string>();
  const additionalInterfaces: JsonObject[] = [];
  for (const i of v03) {
    const key = `${i.protocolBinding} ${i.url}`;
    if (seen.has(key)) continue;
    seen.add(key);
    additionalInterfaces.push({ url: i.url, transport: i.protocolBinding });
  }
  const capabilities: JsonObject = {
    streaming: card.capabilities?.streaming ?? false,
    pushNotifications: card.capabilities?.pushNotifications ?? false,
    stateTransitionHistory: false,
  };
  const extensions = (card.capabilities?.extensions ?? []).map((e) =>
    withOptional(withOptional({ uri: e.uri, required: e.required }, "description", e.description), "params", e.params),
  );
  if (extensions.length > 0) capabilities.extensions = extensions;
  const out: JsonObject = {
    protocolVersion: "0.3.0",
    name: card.name,
    description: card.description,
    url: jsonRpc?.url ?? "",
    preferredTransport: jsonRpc?.protocolBinding ?? "JSONRPC",
    additionalInterfaces,
    version: card.version,
    capabilities,
    securitySchemes: Object.fromEntries(
      Object.entries(card.securitySchemes).map(([name, s]) => [name, securitySchemeToV03(s)]),
    ),
    defaultInputModes: card.defaultInputModes,
    defaultOutputModes: card.defaultOutputModes,
    skills: card.skills.map((s) => {
      const skill: JsonObject = { id: s.id, name: s.name, description: s.description, tags: s.tags };
      withOptional(skill, "examples", s.examples);
      withOptional(skill, "inputModes", s.inputModes);
      withOptional(skill, "outputModes", s.outputModes);
      if (s.securityRequirements.length > 0) skill.security = securityToV03(s.securityRequirements);
      return skill;
    }),
    supportsAuthenticatedExtendedCard: card.capabilities?.extendedAgentCard ?? false,
  };
  if (card.securityRequirements.length > 0) out.security = securityToV03(card.securityRequirements);
  if (card.provider) out.provider = { url: card.provider.url, organization: card.provider.organization };
  withOptional(out, "documentationUrl", card.documentationUrl);
  withOptional(out, "iconUrl", card.iconUrl);
  return out;
}
