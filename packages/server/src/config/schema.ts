import { DEFAULT_WRITE_BUFFER_BYTES, MAX_WRITE_BUFFER_BYTES, MIN_WRITE_BUFFER_BYTES } from "@parley/store";
import { z } from "zod";
import { a2aOptionsSchema } from "../agents/a2a-options.js";
import { conformanceOptionsSchema } from "../agents/conformance-options.js";
import { echoOptionsSchema } from "../agents/echo-options.js";
import { openaiOptionsSchema } from "../agents/openai-options.js";
import { peerSchema } from "../agents/peer-options.js";
import { scriptOptionsSchema } from "../agents/script-options.js";
import { millis } from "../options/timer-range.js";
import {
  bridgeSection,
  cardSection,
  connectionsSection,
  operationsSection,
  pushSection,
  tlsSection,
} from "./port-sections.js";
import { mebibyte, port, type SettingMeta, section, setting, settings } from "./setting.js";

/** A century: a longer idle time is a typo, not a policy. */
export const maxRetentionDays = 36_500;
const retentionDays = z.int().min(1).max(maxRetentionDays);
// Environment text ("tenant=30") arrives as strings; only whole numbers become numbers, anything else is refused.
const tenantRetention = z.preprocess(
  (value) => (typeof value === "string" && /^\s*\d+\s*$/.test(value) ? Number(value) : value),
  z.union([retentionDays, z.literal("off")], {
    error: `expected a whole number of days from 1 to ${maxRetentionDays}, or "off"`,
  }),
);

export const agentTypes = ["echo", "openai", "a2a", "conformance", "script"] as const;
/** What an acknowledged LevelDB write survives (see docs/operations.md, "Durability"). */
export const durabilityModes = ["process-crash", "synced"] as const;
export const logLevels = ["trace", "debug", "info", "warn", "error", "fatal", "silent"] as const;

type AgentType = (typeof agentTypes)[number];

/** A hosted agent of one type, whose `options` that type's schema (next to the agent, in agents/) checks. */
function agentOf<T extends AgentType, O extends z.ZodType>(type: T, options: O) {
  return z.strictObject({
    name: z
      .string()
      .regex(
        /^[a-z0-9][a-z0-9._-]{0,63}$/i,
        "an agent name is 1-64 of [A-Za-z0-9._-], starting with a letter or digit",
      ),
    type: z.literal(type),
    description: z.string().optional(),
    options,
  });
}

// By type, so a typo or a wrong value in an agent's options is refused like any other setting's.
export const agentSchema = z.discriminatedUnion(
  "type",
  [
    agentOf("echo", echoOptionsSchema.optional()),
    agentOf("openai", openaiOptionsSchema),
    agentOf("a2a", a2aOptionsSchema),
    agentOf("conformance", conformanceOptionsSchema.optional()),
    agentOf("script", scriptOptionsSchema),
  ],
  {
    error: (issue) =>
      issue.code === "invalid_union"
        ? `Invalid option: expected one of ${agentTypes.map((t) => JSON.stringify(t)).join("|")}`
        : undefined,
  },
);

export const defaultAgent = {
  name: "echo",
  type: "echo",
  description: "Says what reached it: the turn, the earlier messages and who wrote them, the new text",
} as const satisfies z.input<typeof agentSchema>;

/**
 * The one definition of every setting of parley-server and parley-bridge: its
 * type and range (zod), its default, and, in `settings`, what it does and which
 * environment variable and flag set it. The loader, the error messages, the
 * help text and docs/configuration.md are all derived from here.
 *
 * To add a setting: add a field to the right section below (or in port-sections.ts), wrapped in
 * `setting(schema.default(value), { description, env?, flag? })`, then run
 * `npm run docs:config` so the configuration doc table follows (a test compares them).
 */
export const parleyConfigSchema = z
  .strictObject({
    host: setting(z.string().min(1).default("127.0.0.1"), {
      description: "listen address of the h2c port (gRPC, Connect, gRPC-Web)",
      env: "PARLEY_HOST",
      flag: "grpc-host",
    }),
    port: setting(port.default(8081), {
      description: "h2c port for gRPC, Connect and gRPC-Web (0 = any free port)",
      env: "PARLEY_GRPC_PORT",
      flag: "grpc-port",
    }),
    dataDir: setting(z.string().min(1).default("./data"), {
      description: "LevelDB directory (when storeUrl is empty)",
      env: "PARLEY_DATA_DIR",
      flag: "data-dir",
    }),
    serverId: setting(
      z
        .string()
        .regex(/^([A-Za-z0-9][A-Za-z0-9._:@-]{0,127})?$/, "1-128 of [A-Za-z0-9._:@-], starting with a letter or digit")
        .default(""),
      {
        description:
          "this server's id in chain traces; empty: generated once into dataDir, or derived from storeUrl for replicas",
        env: "PARLEY_SERVER_ID",
      },
    ),
    storeUrl: setting(
      z
        .string()
        .regex(/^(postgres(ql)?:\/\/.+)?$/i, "expected a postgres:// URL, or empty for LevelDB in dataDir")
        .default(""),
      {
        description: "postgres://... : replicas share that database (leases, event logs); empty: LevelDB in dataDir",
        env: "PARLEY_STORE_URL",
        flag: "store-url",
        allowed: "a postgres:// or postgresql:// URL, or empty",
      },
    ),
    durability: setting(z.enum(durabilityModes).default("process-crash"), {
      description:
        "LevelDB: process-crash = an acknowledged write survives a crash of the process, not an OS crash or power cut; synced = fsynced before it is acknowledged (concurrent writes share one fsync)",
      env: "PARLEY_DURABILITY",
      flag: "durability",
    }),
    writeBufferMb: setting(
      z
        .int()
        .min(MIN_WRITE_BUFFER_BYTES / mebibyte)
        .max(MAX_WRITE_BUFFER_BYTES / mebibyte)
        .default(DEFAULT_WRITE_BUFFER_BYTES / mebibyte),
      {
        description:
          "LevelDB: MiB of writes gathered in memory before they are written to disk as one table; under steady writes the process holds up to twice this; smaller: less memory, more compaction work per turn as the store grows",
        env: "PARLEY_WRITE_BUFFER_MB",
      },
    ),
    scaleOut: section({
      leaseTtlMs: setting(millis(300).default(15_000), {
        description: "context lease lifetime; a replica that stops renewing loses its tasks after this long",
        env: "PARLEY_LEASE_TTL_MS",
      }),
      sweepIntervalMs: setting(millis(1).default(2_000), {
        description: "how often each replica looks for expired leases to take over",
        env: "PARLEY_SWEEP_MS",
      }),
      eventRetentionMs: setting(millis(1).default(600_000), {
        description: "how long a finished task's events stay resumable",
      }),
      dbTimeoutMs: setting(millis(100).default(5_000), {
        description:
          "PostgreSQL: longest wait for a pooled connection and for one statement; past it the call fails UNAVAILABLE",
        env: "PARLEY_DB_TIMEOUT_MS",
      }),
      outageToleranceMs: setting(millis(1).default(60_000), {
        description:
          "PostgreSQL: how long a running task waits out a database outage (event writes and lease renewals are retried, its lease kept); a longer outage fails it",
        env: "PARLEY_DB_OUTAGE_TOLERANCE_MS",
      }),
      eventBatchMs: setting(millis(0).max(1_000).default(20), {
        description:
          "how long a run's events gather before they are written to the task event log in one batch (a run's last event is written at once); resumes and other replicas' subscribers see events up to this much later",
      }),
    }),
    retention: section({
      threadIdleDays: setting(retentionDays.optional(), {
        description:
          "delete threads (with their tasks, push configs and event logs) whose last message is older than this many days; unset: never (opt-in)",
        env: "PARLEY_RETENTION_DAYS",
        allowed: `a whole number of days from 1 to ${maxRetentionDays}, or unset (off)`,
      }),
      tenants: setting(z.record(z.string().min(1), tenantRetention).default({}), {
        description:
          'per-tenant override of threadIdleDays: { "tenant": days | "off" }; a tenant not named takes threadIdleDays',
        env: "PARLEY_RETENTION_TENANT_DAYS",
        allowed: `{ "tenant": 1-${maxRetentionDays} or "off" } naming configured tenants (environment: "tenant=30,tenant2=off")`,
      }),
      intervalMs: setting(millis(1).default(60_000), {
        description: "how often the sweeper starts a retention pass; a pass goes on until nothing more is due",
        env: "PARLEY_RETENTION_INTERVAL_MS",
      }),
    }),
    agents: setting(z.array(agentSchema).min(1).default([defaultAgent]), {
      description: `hosted agents, the first is the default: [{ "name", "type": ${agentTypes.join("|")}, "description"?, "options" }], "options" optional for echo and conformance (each type's options: docs/agents-and-sessions.md)`,
      allowed: "a non-empty list of agents with distinct names",
    }),
    peers: setting(z.array(peerSchema).default([]), {
      description:
        'remote A2A agents: [{ "name", "url", "protocol": jsonrpc|rest|grpc (rest: A2A 1.0 HTTP+JSON, url is the base of /message:send), "a2aVersion"?: 1.0|0.3, "agent"?, "token"?, "description"? }]',
      allowed: "a list of peers with an http(s) url each",
    }),
    apiKeys: setting(z.record(z.string().min(1), z.string().min(1)).default({}), {
      description: 'bearer API key -> tenant; empty: open mode, every caller is tenant "default"',
      env: "PARLEY_API_KEYS",
      allowed: '{ "key": "tenant" } (environment: "key=tenant,key2=tenant2")',
    }),
    history: section({
      maxMessages: setting(z.int().min(0).default(20), {
        description: "earlier messages read back into the agent's input per turn",
        env: "PARLEY_HISTORY_MESSAGES",
      }),
      maxChars: setting(z.int().min(1).default(12_000), {
        description: "character budget of the history block; the oldest messages are dropped first",
        env: "PARLEY_HISTORY_CHARS",
      }),
    }),
    limits: section({
      maxMessageBytes: setting(
        z
          .int()
          .min(1)
          .max(2 ** 30)
          .default(1024 * 1024),
        { description: "largest request message in bytes, on every protocol" },
      ),
      maxPartsPerMessage: setting(z.int().min(1).default(64), { description: "most parts in one message" }),
      failedAuthPerMinute: setting(z.int().min(0).default(30), {
        description:
          "failed authentications (a missing, malformed or unknown API key) one client address may make per minute, in a burst or spread out; past it the address is refused RATE_LIMITED (gRPC RESOURCE_EXHAUSTED) until a try is back, whatever key it sends; 0: off",
        env: "PARLEY_FAILED_AUTH_PER_MINUTE",
      }),
      maxTextChars: setting(
        z
          .int()
          .min(1)
          .default(256 * 1024),
        { description: "largest text part, in characters" },
      ),
      agentStepTimeoutMs: setting(millis(1).default(120_000), {
        description: "how long one agent step (one reply) may take",
        env: "PARLEY_STEP_TIMEOUT_MS",
      }),
      maxOpenStreamsPerTenant: setting(z.int().min(1).default(1_000), {
        description: "open streams (SendStreamingMessage, SubscribeToTask) per tenant",
      }),
      // Optional: unset means "per tenant when API keys name tenants, none in open mode" (see limits/rate-limit-policy.ts).
      requestsPerSecondPerTenant: setting(z.int().min(0).optional(), {
        description:
          "requests per second per tenant, so one tenant cannot starve the others; default 200 with API keys, none in open mode (one tenant); 0 = off",
        env: "PARLEY_RATE_LIMIT",
      }),
      requestBurstPerTenant: setting(z.int().min(1).default(400), {
        description: "requests a tenant may send at once after a quiet spell (the token bucket's size)",
        env: "PARLEY_RATE_BURST",
      }),
      subscriberBufferEvents: setting(z.int().min(1).default(4_096), {
        description: "events a slow subscriber may fall behind before it is cut off",
      }),
    }),
    sessions: section({
      defaultTurns: setting(z.int().min(1).default(5), { description: "ping-pong turns of a conversation" }),
      maxTurns: setting(z.int().min(1).default(20), { description: "most turns a caller may ask for" }),
      maxHops: setting(z.int().min(1).default(8), {
        description: "hops an agent-to-agent chain (and a session trace) may take across agents and servers",
        env: "PARLEY_MAX_HOPS",
      }),
      stepBudget: setting(z.int().min(1).default(50), { description: "agent steps per conversation" }),
      chainStepBudget: setting(z.int().min(1).default(64), {
        description: "agent steps of a whole chain: everything one request causes, on every server it reaches",
        env: "PARLEY_CHAIN_STEPS",
      }),
      chainDeadlineMs: setting(millis(1).default(600_000), {
        description: "how long a chain may run, from its first hop",
        env: "PARLEY_CHAIN_DEADLINE_MS",
      }),
      silenceTokens: setting(
        z.array(z.string().min(1)).default(["REPLY_SKIP", "ANNOUNCE_SKIP", "NO_REPLY", "HEARTBEAT_OK"]),
        {
          description:
            "silence tokens, matched ignoring case, separators and decoration: a reply that is only one is never delivered or stored",
        },
      ),
    }),
    capabilities: section({
      streaming: setting(z.boolean().default(true), {
        description: "advertise and serve streaming",
        env: "PARLEY_STREAMING",
      }),
      pushNotifications: setting(z.boolean().default(false), {
        description: "push notifications",
        env: "PARLEY_PUSH",
      }),
      extendedAgentCard: setting(z.boolean().default(false), {
        description:
          "serve the extended agent card (GetExtendedAgentCard) to authenticated callers; requires apiKeys; off: UnsupportedOperationError",
        env: "PARLEY_EXTENDED_CARD",
      }),
      requiredExtensions: setting(z.array(z.string().min(1)).default([]), {
        description: "extension URIs a client must declare in A2A-Extensions",
        env: "PARLEY_REQUIRED_EXTENSIONS",
      }),
    }),
    push: pushSection,
    operations: operationsSection,
    connections: connectionsSection,
    tls: tlsSection,
    card: cardSection,
    shutdownGraceMs: setting(millis(0).default(10_000), {
      description: "how long running tasks may finish after SIGTERM before they are failed",
      env: "PARLEY_SHUTDOWN_GRACE_MS",
    }),
    logLevel: setting(z.enum(logLevels).default("info"), {
      description: "log level",
      env: "PARLEY_LOG_LEVEL",
      flag: "log-level",
    }),
    bridge: bridgeSection,
  })
  .superRefine((config, ctx) => {
    const seen = new Set<string>();
    const peers = config.peers.map((p) => p.name);
    config.agents.forEach((agent, i) => {
      if (seen.has(agent.name)) {
        ctx.addIssue({ code: "custom", path: ["agents", i, "name"], message: "this agent name is used twice" });
      }
      seen.add(agent.name);
      // An a2a agent that names no configured peer could answer no turn.
      if (agent.type === "a2a" && !peers.includes(agent.options.peer)) {
        ctx.addIssue({
          code: "custom",
          path: ["agents", i, "options", "peer"],
          message: `no peer is named ${JSON.stringify(agent.options.peer)}; the peers are ${peers.map((p) => JSON.stringify(p)).join(", ") || "none (see the peers setting)"}`,
        });
      }
    });
    // A retention override for a tenant no key maps to is a typo: it would silently leave that policy unapplied.
    const tenants = new Set(Object.values(config.apiKeys));
    if (tenants.size === 0) tenants.add("default");
    for (const tenant of Object.keys(config.retention.tenants)) {
      if (!tenants.has(tenant)) {
        ctx.addIssue({
          code: "custom",
          path: ["retention", "tenants", tenant],
          message: `no API key maps to tenant ${JSON.stringify(tenant)}; the tenants are ${[...tenants].map((t) => JSON.stringify(t)).join(", ")}${Object.keys(config.apiKeys).length === 0 ? " (open mode)" : ""}`,
        });
      }
    }
    if ((config.tls.certFile === undefined) !== (config.tls.keyFile === undefined)) {
      ctx.addIssue({
        code: "custom",
        path: ["tls", config.tls.certFile === undefined ? "certFile" : "keyFile"],
        message: "tls.certFile and tls.keyFile go together: set both (TLS) or neither (cleartext)",
      });
    }
    if (config.tls.clientCaFile !== undefined && config.tls.certFile === undefined) {
      ctx.addIssue({
        code: "custom",
        path: ["tls", "clientCaFile"],
        message: "a client CA (mutual TLS) needs TLS itself: set tls.certFile and tls.keyFile",
      });
    }
    // Section 13.3: the extended card MUST require authentication, which open mode (no API keys) has none of.
    if (config.capabilities.extendedAgentCard && Object.keys(config.apiKeys).length === 0) {
      ctx.addIssue({
        code: "custom",
        path: ["capabilities", "extendedAgentCard"],
        message:
          "the extended agent card requires authentication: configure apiKeys (PARLEY_API_KEYS), or leave extendedAgentCard off",
      });
    }
    if (config.sessions.defaultTurns > config.sessions.maxTurns) {
      ctx.addIssue({
        code: "custom",
        path: ["sessions", "defaultTurns"],
        message: `must not exceed sessions.maxTurns (${config.sessions.maxTurns})`,
      });
    }
  });

/**
 * Every setting with its type and range, without the rules across settings
 * above: what each source (file, environment, flags) is checked against on its
 * own, since one source may hold only one side of such a rule.
 */
export const parleySettingsSchema = z.strictObject(parleyConfigSchema.shape);

export type ParleyConfig = z.output<typeof parleyConfigSchema>;
export type AgentConfig = z.output<typeof agentSchema>;
export type { PeerConfig } from "../agents/peer-options.js";

/** Every default, as the loader starts from it. */
export const defaultConfig: ParleyConfig = parleyConfigSchema.parse({});

export { type SettingMeta, settings };
