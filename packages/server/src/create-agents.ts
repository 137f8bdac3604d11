import type { Agent } from "@parley/domain";
import { createA2APeerAgent } from "./agents/a2a-peer-agent.js";
import { createConformanceAgent } from "./agents/conformance-agent.js";
import { createEchoAgent } from "./agents/echo-agent.js";
import { createOpenAIAgent } from "./agents/openai-agent.js";
import { createScriptAgent } from "./agents/script-agent.js";
import type { AgentConfig, PeerConfig } from "./config.js";

/**
 * Builds the hosted agents from configuration, in order (the first is the
 * default). Their options were checked with the configuration, by each type's
 * schema (agents/*-options.ts).
 */
export function createAgents(configs: readonly AgentConfig[], peers: readonly PeerConfig[], self: string): Agent[] {
  return configs.map((config): Agent => {
    switch (config.type) {
      case "echo":
        return createEchoAgent({ ...config.options, name: config.name });
      case "openai": {
        const { apiKey, systemPrompt, ...options } = config.options;
        // An empty key or prompt is none: no authorization header, Parley's prompt.
        return createOpenAIAgent({
          ...options,
          name: config.name,
          ...(apiKey ? { apiKey } : {}),
          ...(systemPrompt ? { systemPrompt } : {}),
        });
      }
      case "a2a": {
        const peer = peers.find((p) => p.name === config.options.peer);
        // The configuration's check refuses such a name; this is for configurations built in code.
        if (!peer) throw new Error(`agent ${config.name}: option peer names no configured peer`);
        return createA2APeerAgent({
          name: config.name,
          peer,
          self,
          ...(config.options.forwardBudget ? { forwardBudget: config.options.forwardBudget } : {}),
        });
      }
      case "conformance":
        return createConformanceAgent({ ...config.options, name: config.name });
      case "script":
        return createScriptAgent({
          name: config.name,
          ...(config.description ? { description: config.description } : {}),
          replies: config.options.replies,
          peers,
        });
      default:
        throw new Error(
          `agent ${(config as AgentConfig).name}: unknown type ${JSON.stringify((config as AgentConfig).type)}`,
        );
    }
  });
}
