import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { parseArgs } from "node:util";
import { echoInputs, echoReplies } from "./agents/echo-agent.js";

/** One agent the server hosts. The first configured agent is the default. */
export interface AgentConfig {
  readonly name: string;
  readonly type: "echo" | "openai" | "a2a" | "conformance" | "script";
  readonly description?: string;
  /** Type-specific settings (see each agent's factory). */
  readonly options?: Readonly<Record<string, unknown>>;
}

/** A remote A2A agent that sessions and the a2a agent can address by name. */
export interface PeerConfig {
  readonly name: string;
  /** JSON-RPC: an http(s) URL; gRPC: http://host:port with protocol "grpc". */
  readonly url: string;
  readonly protocol: "jsonrpc" | "grpc";
  readonly token?: string;
  readonly description?: string;
}

export interface ParleyConfig {
  /** Address of the h2c listener that serves gRPC, Connect and gRPC-Web. */
  readonly host: string;
  readonly port: number;
  /** LevelDB directory. */
  readonly dataDir: string;
  /** A postgres:// URL: replicas share that database (leases, event logs); empty: LevelDB in dataDir. */
  readonly storeUrl: string;
  readonly scaleOut: {
    /** Context lease lifetime; a replica that stops renewing loses its tasks after this long. */
    readonly leaseTtlMs: number;
    /** How often each replica looks for expired leases to take over. */
    readonly sweepIntervalMs: number;
    /** How long a finished task's events stay resumable. */
    readonly eventRetentionMs: number;
  };
  readonly agents: readonly AgentConfig[];
  readonly peers: readonly PeerConfig[];
  /** Bearer token -> tenant. Empty: open mode, every caller is tenant "default". */
  readonly apiKeys: Readonly<Record<string, string>>;
  readonly history: {
    /** How many earlier messages are read back into the agent's input. */
    readonly maxMessages: number;
    /** Character budget of the history block; the oldest messages are dropped first. */
    readonly maxChars: number;
  };
  readonly limits: {
    /** Largest request message, in bytes, on every protocol. */
    readonly maxMessageBytes: number;
    readonly maxPartsPerMessage: number;
    /** Largest text part, in characters. */
    readonly maxTextChars: number;
    /** How long one agent step (one reply) may take. */
    readonly agentStepTimeoutMs: number;
    readonly maxOpenStreamsPerTenant: number;
    /** 0 switches the rate limit off. */
    readonly requestsPerSecondPerTenant: number;
    /** Requests a tenant may send at once after a quiet spell (the token bucket's size). */
    readonly requestBurstPerTenant: number;
    /** Events a slow subscriber may fall behind before it is cut off. */
    readonly subscriberBufferEvents: number;
  };
  readonly sessions: {
    readonly defaultTurns: number;
    readonly maxTurns: number;
    readonly maxHops: number;
    readonly stepBudget: number;
    readonly silenceTokens: readonly string[];
  };
  readonly capabilities: {
    readonly streaming: boolean;
    readonly pushNotifications: boolean;
    readonly extendedAgentCard: boolean;
    /** Extension URIs a client must declare in A2A-Extensions. */
    readonly requiredExtensions: readonly string[];
  };
  readonly push: {
    /** Hosts push notifications may be sent to (exact host names or IPs). */
    readonly allowedHosts: readonly string[];
    /** Tries per notification before it is dropped (the first try included). */
    readonly maxAttempts: number;
    /** Pause before the first retry; it doubles with each further retry. */
    readonly retryBaseMs: number;
    /** How long one POST may take. */
    readonly timeoutMs: number;
  };
  readonly card: {
    readonly name: string;
    readonly description: string;
    readonly version: string;
  };
  /** How long in-flight streams may run on after SIGTERM before they are failed. */
  readonly shutdownGraceMs: number;
  readonly logLevel: string;
}

export const defaultConfig: ParleyConfig = {
  host: "127.0.0.1",
  port: 8081,
  dataDir: "./data",
  storeUrl: "",
  scaleOut: { leaseTtlMs: 15_000, sweepIntervalMs: 2_000, eventRetentionMs: 600_000 },
  agents: [{ name: "echo", type: "echo", description: "Replies with exactly the input it was given" }],
  peers: [],
  apiKeys: {},
  history: { maxMessages: 20, maxChars: 12_000 },
  limits: {
    maxMessageBytes: 1024 * 1024,
    maxPartsPerMessage: 64,
    maxTextChars: 256 * 1024,
    agentStepTimeoutMs: 120_000,
    maxOpenStreamsPerTenant: 1_000,
    // On by default so one tenant cannot starve the others; benchmarks raise it with PARLEY_RATE_LIMIT.
    requestsPerSecondPerTenant: 200,
    requestBurstPerTenant: 400,
    subscriberBufferEvents: 4_096,
  },
  sessions: {
    defaultTurns: 5,
    maxTurns: 20,
    maxHops: 8,
    stepBudget: 50,
    silenceTokens: ["REPLY_SKIP", "ANNOUNCE_SKIP", "NO_REPLY", "HEARTBEAT_OK"],
  },
  capabilities: { streaming: true, pushNotifications: false, extendedAgentCard: false, requiredExtensions: [] },
  push: {
    allowedHosts: ["127.0.0.1", "localhost", "::1"],
    maxAttempts: 5,
    retryBaseMs: 500,
    timeoutMs: 10_000,
  },
  card: {
    name: "Parley",
    description: "Durable multi-turn agent-to-agent conversations",
    version: "0.1.0",
  },
  shutdownGraceMs: 10_000,
  logLevel: "info",
};

export const configHelp = `parley-server: serves A2A (gRPC, Connect, gRPC-Web) and Parley's thread, session and target services.

Options (flag / environment variable; flags win over the environment, which wins over the config file):
  --config FILE           PARLEY_CONFIG            JSON file with any of the settings below (nested as in ParleyConfig)
  --host HOST             PARLEY_HOST              listen address (default 127.0.0.1)
  --port PORT             PARLEY_GRPC_PORT         h2c port for gRPC, Connect and gRPC-Web (default 8081; 0 = any)
  --data-dir DIR          PARLEY_DATA_DIR          LevelDB directory (default ./data)
                          PARLEY_STORE_URL         postgres://... : share one PostgreSQL database between replicas
                          PARLEY_LEASE_TTL_MS      context lease lifetime across replicas (default 15000)
                          PARLEY_SWEEP_MS          how often a replica takes over expired leases (default 2000)
  --agent TYPE            PARLEY_AGENT             default agent: echo | openai | conformance (default echo)
                          PARLEY_ECHO_DELAY_MS     echo agent: delay per streamed chunk
                          PARLEY_ECHO_REPLY        echo agent: task | message | auto (default task; auto = message unless streaming)
                          PARLEY_ECHO_INPUT        echo agent: framed | text (default framed: history block + new message)
                          PARLEY_OPENAI_BASE_URL   openai agent: chat-completions base URL (default https://api.openai.com/v1)
                          PARLEY_OPENAI_MODEL      openai agent: model name
                          PARLEY_OPENAI_API_KEY    openai agent: API key (or OPENAI_API_KEY)
                          PARLEY_API_KEYS          bearer tokens, "token=tenant,token2=tenant2"; unset = open mode
                          PARLEY_HISTORY_MESSAGES  earlier messages read back per turn (default 20)
                          PARLEY_HISTORY_CHARS     character budget of the history block (default 12000)
                          PARLEY_STEP_TIMEOUT_MS   agent step timeout (default 120000)
                          PARLEY_RATE_LIMIT        requests per second per tenant (default 200; 0 = off)
                          PARLEY_RATE_BURST        requests a tenant may send at once (default 400)
                          PARLEY_SHUTDOWN_GRACE_MS how long running tasks may finish after SIGTERM (default 10000)
                          PARLEY_STREAMING         on|off (default on)
                          PARLEY_PUSH              on|off push notifications (default off)
                          PARLEY_EXTENDED_CARD     on|off extended agent card (default off)
                          PARLEY_REQUIRED_EXTENSIONS  comma-separated extension URIs clients must declare
                          PARLEY_PUSH_ALLOWED_HOSTS   comma-separated hosts push notifications may go to (default loopback)
  --log-level LEVEL       PARLEY_LOG_LEVEL         trace|debug|info|warn|error|silent (default info)
  --help                                           this text`;

type Env = Readonly<Record<string, string | undefined>>;

function oneOf<T extends string>(value: string | undefined, name: string, allowed: readonly T[]): T | undefined {
  if (value === undefined || value === "") return undefined;
  if (!(allowed as readonly string[]).includes(value)) {
    throw new Error(`${name} must be one of ${allowed.join(", ")}, got ${JSON.stringify(value)}`);
  }
  return value as T;
}

function intFrom(value: string | undefined, name: string): number | undefined {
  if (value === undefined || value === "") return undefined;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0)
    throw new Error(`${name} must be a non-negative integer, got ${JSON.stringify(value)}`);
  return n;
}

function switchFrom(value: string | undefined, name: string): boolean | undefined {
  if (value === undefined || value === "") return undefined;
  if (/^(on|true|1|yes)$/i.test(value)) return true;
  if (/^(off|false|0|no)$/i.test(value)) return false;
  throw new Error(`${name} must be on or off, got ${JSON.stringify(value)}`);
}

function parseApiKeys(value: string): Record<string, string> {
  const keys: Record<string, string> = {};
  for (const pair of value.split(",").filter((s) => s.trim() !== "")) {
    const at = pair.indexOf("=");
    if (at <= 0 || at === pair.length - 1) {
      throw new Error(`PARLEY_API_KEYS entries must be token=tenant, got ${JSON.stringify(pair)}`);
    }
    keys[pair.slice(0, at).trim()] = pair.slice(at + 1).trim();
  }
  return keys;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** Deep-merges plain objects; arrays and scalars of `override` replace those of `base`. */
function merge<T>(base: T, override: unknown): T {
  if (!isRecord(base) || !isRecord(override)) return (override === undefined ? base : override) as T;
  const out: Record<string, unknown> = { ...base };
  for (const [k, v] of Object.entries(override)) {
    if (v !== undefined) out[k] = k in out ? merge(out[k], v) : v;
  }
  return out as T;
}

function agentFromType(type: string, env: Env): AgentConfig {
  switch (type) {
    case "echo":
      return defaultConfig.agents[0]!;
    case "openai":
      return {
        name: "openai",
        type: "openai",
        description: "An OpenAI-compatible chat-completions model",
        options: {
          baseUrl: env.PARLEY_OPENAI_BASE_URL ?? "https://api.openai.com/v1",
          model: env.PARLEY_OPENAI_MODEL ?? "gpt-4o-mini",
          apiKey: env.PARLEY_OPENAI_API_KEY ?? env.OPENAI_API_KEY,
        },
      };
    case "conformance":
      return {
        name: "conformance",
        type: "conformance",
        description: "Acts on the messageId prefixes of the A2A conformance kit (TCK)",
      };
    default:
      throw new Error(`PARLEY_AGENT must be echo, openai or conformance, got ${JSON.stringify(type)}`);
  }
}

/**
 * Builds the configuration from defaults, a JSON file, PARLEY_* environment
 * variables and flags, in that order of precedence (later wins).
 */
export function loadConfig(options: { argv?: readonly string[]; env?: Env } = {}): ParleyConfig & { help: boolean } {
  const env = options.env ?? process.env;
  const { values } = parseArgs({
    args: [...(options.argv ?? [])],
    options: {
      config: { type: "string" },
      host: { type: "string" },
      port: { type: "string" },
      "data-dir": { type: "string" },
      agent: { type: "string" },
      "log-level": { type: "string" },
      help: { type: "boolean", short: "h" },
    },
    strict: true,
    allowPositionals: false,
  });

  let config: ParleyConfig = defaultConfig;
  const file = values.config ?? env.PARLEY_CONFIG;
  if (file) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(readFileSync(file, "utf8"));
    } catch (error) {
      throw new Error(`cannot read config file ${file}: ${(error as Error).message}`);
    }
    if (!isRecord(parsed)) throw new Error(`config file ${file} must hold a JSON object`);
    config = merge(config, parsed);
  }

  const agentType = values.agent ?? env.PARLEY_AGENT;
  const fromEnv = {
    host: env.PARLEY_HOST,
    port: intFrom(env.PARLEY_GRPC_PORT, "PARLEY_GRPC_PORT"),
    dataDir: env.PARLEY_DATA_DIR,
    storeUrl: env.PARLEY_STORE_URL,
    scaleOut: {
      leaseTtlMs: intFrom(env.PARLEY_LEASE_TTL_MS, "PARLEY_LEASE_TTL_MS"),
      sweepIntervalMs: intFrom(env.PARLEY_SWEEP_MS, "PARLEY_SWEEP_MS"),
    },
    agents: agentType ? [agentFromType(agentType, env)] : undefined,
    apiKeys: env.PARLEY_API_KEYS ? parseApiKeys(env.PARLEY_API_KEYS) : undefined,
    history: {
      maxMessages: intFrom(env.PARLEY_HISTORY_MESSAGES, "PARLEY_HISTORY_MESSAGES"),
      maxChars: intFrom(env.PARLEY_HISTORY_CHARS, "PARLEY_HISTORY_CHARS"),
    },
    limits: {
      agentStepTimeoutMs: intFrom(env.PARLEY_STEP_TIMEOUT_MS, "PARLEY_STEP_TIMEOUT_MS"),
      requestsPerSecondPerTenant: intFrom(env.PARLEY_RATE_LIMIT, "PARLEY_RATE_LIMIT"),
      requestBurstPerTenant: intFrom(env.PARLEY_RATE_BURST, "PARLEY_RATE_BURST"),
    },
    capabilities: {
      streaming: switchFrom(env.PARLEY_STREAMING, "PARLEY_STREAMING"),
      pushNotifications: switchFrom(env.PARLEY_PUSH, "PARLEY_PUSH"),
      extendedAgentCard: switchFrom(env.PARLEY_EXTENDED_CARD, "PARLEY_EXTENDED_CARD"),
      requiredExtensions: env.PARLEY_REQUIRED_EXTENSIONS
        ? env.PARLEY_REQUIRED_EXTENSIONS.split(",")
            .map((s) => s.trim())
            .filter(Boolean)
        : undefined,
    },
    push: {
      allowedHosts: env.PARLEY_PUSH_ALLOWED_HOSTS
        ? env.PARLEY_PUSH_ALLOWED_HOSTS.split(",")
            .map((s) => s.trim())
            .filter(Boolean)
        : undefined,
    },
    shutdownGraceMs: intFrom(env.PARLEY_SHUTDOWN_GRACE_MS, "PARLEY_SHUTDOWN_GRACE_MS"),
    logLevel: env.PARLEY_LOG_LEVEL,
  };
  config = merge(config, fromEnv);

  const echoDelay = intFrom(env.PARLEY_ECHO_DELAY_MS, "PARLEY_ECHO_DELAY_MS");
  const echoReply = oneOf(env.PARLEY_ECHO_REPLY, "PARLEY_ECHO_REPLY", echoReplies);
  const echoInput = oneOf(env.PARLEY_ECHO_INPUT, "PARLEY_ECHO_INPUT", echoInputs);
  if (echoDelay !== undefined || echoReply !== undefined || echoInput !== undefined) {
    const echoOptions = {
      ...(echoDelay !== undefined ? { delayMs: echoDelay } : {}),
      ...(echoReply !== undefined ? { reply: echoReply } : {}),
      ...(echoInput !== undefined ? { input: echoInput } : {}),
    };
    config = {
      ...config,
      agents: config.agents.map((a) => (a.type === "echo" ? { ...a, options: { ...a.options, ...echoOptions } } : a)),
    };
  }

  config = merge(config, {
    host: values.host,
    port: intFrom(values.port, "--port"),
    dataDir: values["data-dir"],
    logLevel: values["log-level"],
  });
  validate(config);
  return { ...config, dataDir: resolve(config.dataDir), help: values.help ?? false };
}

function validate(config: ParleyConfig): void {
  if (config.agents.length === 0) throw new Error("config: at least one agent is required");
  const names = new Set<string>();
  for (const agent of config.agents) {
    if (!/^[a-z0-9][a-z0-9._-]{0,63}$/i.test(agent.name)) {
      throw new Error(`config: agent name ${JSON.stringify(agent.name)} must be 1-64 of [A-Za-z0-9._-]`);
    }
    if (names.has(agent.name)) throw new Error(`config: agent name ${JSON.stringify(agent.name)} is used twice`);
    names.add(agent.name);
  }
  if (config.port > 65_535) throw new Error(`config: port ${config.port} is out of range`);
  if (config.storeUrl !== "" && !/^postgres(ql)?:\/\//i.test(config.storeUrl)) {
    throw new Error(`config: storeUrl must be a postgres:// URL (or empty for LevelDB in dataDir)`);
  }
  if (config.scaleOut.leaseTtlMs < 300) {
    throw new Error(`config: scaleOut.leaseTtlMs must be at least 300, got ${config.scaleOut.leaseTtlMs}`);
  }
  if (config.sessions.defaultTurns > config.sessions.maxTurns) {
    throw new Error("config: sessions.defaultTurns must not exceed sessions.maxTurns");
  }
}
