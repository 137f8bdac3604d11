import type { AgentConfig, PeerConfig } from "../config.js";
import { createA2APeerAgent } from "./a2a-peer-agent.js";
import type { Agent } from "./agent.js";
import { createConformanceAgent } from "./conformance-agent.js";
import { createEchoAgent, type EchoInput, type EchoReply } from "./echo-agent.js";
import { createOpenAIAgent } from "./openai-agent.js";
import { createScriptAgent, parseScript } from "./script-agent.js";

function stringOption(config: AgentConfig, key: string): string | undefined {
  const value = config.options?.[key];
  if (value === undefined) return undefined;
  if (typeof value !== "string") throw new Error(`agent ${config.name}: option ${key} must be a string`);
  return value;
}

function numberOption(config: AgentConfig, key: string): number | undefined {
  const value = config.options?.[key];
  if (value === undefined) return undefined;
  if (typeof value !== "number" || !Number.isFinite(value))
    throw new Error(`agent ${config.name}: option ${key} must be a number`);
  return value;
}

/** Builds the hosted agents from configuration, in order (the first is the default). */
export function createAgents(configs: readonly AgentConfig[], peers: readonly PeerConfig[], self: string): Agent[] {
  return configs.map((config) => {
    switch (config.type) {
      case "echo":
        return createEchoAgent({
          name: config.name,
          ...(numberOption(config, "delayMs") !== undefined ? { delayMs: numberOption(config, "delayMs")! } : {}),
          ...(numberOption(config, "chunks") !== undefined ? { chunks: numberOption(config, "chunks")! } : {}),
          ...(numberOption(config, "repeat") !== undefined ? { repeat: numberOption(config, "repeat")! } : {}),
          ...(stringOption(config, "reply") !== undefined ? { reply: stringOption(config, "reply") as EchoReply } : {}),
          ...(stringOption(config, "input") !== undefined ? { input: stringOption(config, "input") as EchoInput } : {}),
        });
      case "openai": {
        const baseUrl = stringOption(config, "baseUrl");
        const model = stringOption(config, "model");
        if (!baseUrl || !model) throw new Error(`agent ${config.name}: options baseUrl and model are required`);
        const apiKey = stringOption(config, "apiKey");
        const systemPrompt = stringOption(config, "systemPrompt");
        return createOpenAIAgent({
          name: config.name,
          baseUrl,
          model,
          ...(apiKey ? { apiKey } : {}),
          ...(systemPrompt ? { systemPrompt } : {}),
        });
      }
      case "a2a": {
        const peerName = stringOption(config, "peer");
        const peer = peers.find((p) => p.name === peerName);
        if (!peer) {
          throw new Error(
            `agent ${config.name}: option peer must name a configured peer (${peers.map((p) => p.name).join(", ") || "none configured"})`,
          );
        }
        return createA2APeerAgent({ name: config.name, peer, self });
      }
      case "conformance": {
        const resubscribeWorkMs = numberOption(config, "resubscribeWorkMs");
        return createConformanceAgent({
          name: config.name,
          ...(resubscribeWorkMs !== undefined ? { resubscribeWorkMs } : {}),
        });
      }
      case "script":
        return createScriptAgent({
          name: config.name,
          ...(config.description ? { description: config.description } : {}),
          replies: parseScript(config.name, config.options?.replies),
          peers,
        });
      default:
        throw new Error(
          `agent ${(config as AgentConfig).name}: unknown type ${JSON.stringify((config as AgentConfig).type)}`,
        );
    }
  });
}
