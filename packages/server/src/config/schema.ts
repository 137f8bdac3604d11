import { DEFAULT_WRITE_BUFFER_BYTES, MAX_WRITE_BUFFER_BYTES, MIN_WRITE_BUFFER_BYTES } from "@parley/store";
import { z } from "zod";
import { a2aOptionsSchema } from "../agents/a2a-options.js";
import { conformanceOptionsSchema } from "../agents/conformance-options.js";
import { echoOptionsSchema } from "../agents/echo-options.js";
import { openaiOptionsSchema } from "../agents/openai-options.js";
import { scriptOptionsSchema } from "../agents/script-options.js";
import { allowedAddressProblem } from "../push/push-address-policy.js";
import { millis } from "./timer-range.js";

/**
 * The one definition of every setting of parley-server and parley-bridge: its
 * type and range (zod), its default, and, in `settings`, what it does and which
 * environment variable and flag set it. The loader, the error messages, the
 * help text and docs/configuration.md are all derived from here.
 *
 * To add a setting: add a field to the right section below, wrapped in
 * `setting(schema.default(value), { description, env?, flag? })`, then run
 * `npm run docs:config` so the configuration doc table follows (a test compares them).
 */
export interface SettingMeta {
  /** What the setting does, one line, for the help text and the configuration doc table. */
  readonly description: string;
  /** The environment variable that sets it. */
  readonly env?: string;
  /** The command-line flag that sets it, without the leading "--". */
  readonly flag?: string;
  /** What values are allowed, when the type and range alone do not say it (a URL, a map). */
  readonly allowed?: string;
  /** Read by parley-bridge only; parley-server accepts the key in a shared file and ignores it. */
  readonly bridgeOnly?: boolean;
}

export const settings = z.registry<SettingMeta>();

function setting<T extends z.ZodType>(schema: T, meta: SettingMeta): T {
  settings.add(schema, meta);
  return schema;
}

const port = z.int().min(0).max(65_535);
const mebibyte = 1024 * 1024;
// A section may be left out of the file: its keys then take their defaults (every key has one).
const section = <S extends z.core.$ZodLooseShape>(shape: S) => z.strictObject(shape).prefault({} as never);

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

export const peerSchema = z.strictObject({
  name: z.string().min(1),
  /** JSON-RPC: an http(s) URL; HTTP+JSON ("rest"): the base URL of its paths; gRPC: http://host:port with protocol "grpc". */
  url: z.url({ protocol: /^https?$/ }),
  protocol: z.enum(["jsonrpc", "rest", "grpc"]).default("jsonrpc"),
  /** JSON-RPC peers: the A2A version to speak, "1.0" (SendMessage, default) or "0.3" (message/send). */
  a2aVersion: z.enum(["1.0", "0.3"]).optional(),
  /** gRPC peers: the remote server's agent to address (the parley-agent header); default: its default agent. */
  agent: z.string().min(1).optional(),
  token: z.string().optional(),
  description: z.string().optional(),
});

export const defaultAgent = {
  name: "echo",
  type: "echo",
  description: "Says what reached it: the turn, the earlier messages and who wrote them, the new text",
} as const satisfies z.input<typeof agentSchema>;

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
    push: section({
      allowedHosts: setting(z.array(z.string().min(1)).default([]), {
        description:
          "when set, the only hosts push notifications may be sent to (exact host names or IPs); empty: any host whose addresses pass push.allowedAddresses",
        env: "PARLEY_PUSH_ALLOWED_HOSTS",
      }),
      allowedAddresses: setting(
        z
          .array(
            z.string().refine((entry) => allowedAddressProblem(entry) === undefined, {
              error: (issue) => allowedAddressProblem(String(issue.input)) ?? "expected an IP address or CIDR",
            }),
          )
          .default([]),
        {
          description:
            "non-public addresses push notifications may reach (IPs or CIDRs, e.g. 10.0.0.0/8); loopback, private, link-local, CGNAT, multicast, metadata and other non-public addresses are refused otherwise (a metadata address only by exact address)",
          env: "PARLEY_PUSH_ALLOWED_ADDRESSES",
        },
      ),
      maxAttempts: setting(z.int().min(1).default(5), { description: "tries per notification, the first included" }),
      retryBaseMs: setting(millis(1).default(500), { description: "pause before the first retry; doubles each time" }),
      timeoutMs: setting(millis(1).default(10_000), {
        description:
          "how long one POST may take, the address lookup included; past it the POST is cut (and retried as a failure)",
      }),
      maxConfigsPerTask: setting(z.int().min(1).max(10_000).default(10), {
        description:
          "push notification configs one task may have; creating one more (a new id) is refused LIMIT_EXCEEDED (gRPC RESOURCE_EXHAUSTED) naming this limit",
        env: "PARLEY_PUSH_MAX_CONFIGS_PER_TASK",
      }),
    }),
    operations: section({
      corsOrigins: setting(
        z
          .array(
            z
              .string()
              .regex(/^https?:\/\/[^/\s?#*]+$/, "an origin is scheme://host[:port], e.g. https://console.example.com"),
          )
          .default([]),
        {
          description: "browser origins allowed to call both ports (CORS); others are refused with 403",
          env: "PARLEY_CORS_ORIGINS",
        },
      ),
      metrics: setting(z.boolean().default(true), {
        description: "Prometheus text on /metrics of both ports",
        env: "PARLEY_METRICS",
      }),
      requestLog: setting(z.boolean().default(true), {
        description: "one log line per finished request",
        env: "PARLEY_REQUEST_LOG",
      }),
      logTenant: setting(z.enum(["hash", "omit"]).default("hash"), {
        description: "how request log lines show the tenant: a SHA-256 digest, or not at all",
        env: "PARLEY_LOG_TENANT",
      }),
    }),
    // Both ports (the h2c port and the bridge's JSON-RPC port) take these; see listen/connection-limits.ts.
    connections: section({
      headersTimeoutMs: setting(millis(1).default(10_000), {
        description:
          "how long a client may take to send a request's headers; on the h2c port also a new connection's first bytes and HTTP/2 preface and SETTINGS",
        env: "PARLEY_HEADERS_TIMEOUT_MS",
      }),
      bodyTimeoutMs: setting(millis(1).default(30_000), {
        description:
          "how long a request body may take to arrive in full, from the end of its headers; later, the request is answered 408 (gRPC DEADLINE_EXCEEDED) and cut",
        env: "PARLEY_BODY_TIMEOUT_MS",
      }),
      http1IdleTimeoutMs: setting(millis(1).default(5_000), {
        description:
          "an HTTP/1.1 keep-alive connection idle between requests is closed after this long (Node adds 1 s)",
        env: "PARLEY_HTTP1_IDLE_TIMEOUT_MS",
      }),
      http2IdleTimeoutMs: setting(millis(1).default(120_000), {
        description:
          "an HTTP/2 connection with no open stream (from its start or its last stream) is closed (GOAWAY) after this long",
        env: "PARLEY_HTTP2_IDLE_TIMEOUT_MS",
      }),
      maxConcurrentStreams: setting(
        z
          .int()
          .min(1)
          .max(2 ** 31 - 1)
          .default(1_000),
        {
          description: "streams (calls) one HTTP/2 connection may have open at once (SETTINGS_MAX_CONCURRENT_STREAMS)",
        },
      ),
      maxConnections: setting(
        z
          .int()
          .min(1)
          .max(2 ** 31 - 1)
          .default(4_096),
        {
          description: "open connections per port; more are closed as they arrive",
          env: "PARLEY_MAX_CONNECTIONS",
        },
      ),
      maxDiscardBytes: setting(
        z
          .int()
          .min(0)
          .max(2 ** 32)
          .default(64 * 1024 * 1024),
        {
          description:
            "bytes of a too-large request body read and thrown away so that its refusal reaches the client; past this the connection (HTTP/1.1) or stream (HTTP/2) is cut after the refusal",
        },
      ),
    }),
    // Both ports (the h2c port and the bridge's JSON-RPC port) take these; see listen/tls-files.ts.
    tls: section({
      certFile: setting(z.string().min(1).optional(), {
        description:
          "PEM certificate chain: both ports serve TLS (the h2c port as h2 and HTTP/1.1 by ALPN, the bridge's port HTTP/1.1) and cards advertise https URLs; unset: cleartext; reloaded on SIGHUP and when the file changes",
        env: "PARLEY_TLS_CERT",
        flag: "tls-cert",
      }),
      keyFile: setting(z.string().min(1).optional(), {
        description: "PEM private key of tls.certFile (required with it); reloaded with it",
        env: "PARLEY_TLS_KEY",
        flag: "tls-key",
      }),
      clientCaFile: setting(z.string().min(1).optional(), {
        description:
          "PEM CA certificate(s): with it, every client must present a certificate they signed (mutual TLS); others fail the handshake",
        env: "PARLEY_TLS_CLIENT_CA",
      }),
    }),
    card: section({
      name: setting(z.string().min(1).default("Parley"), { description: "agent card name" }),
      description: setting(z.string().default("Durable multi-turn agent-to-agent conversations"), {
        description: "agent card description",
      }),
      version: setting(z.string().min(1).default("0.1.0"), { description: "agent card version" }),
      inputModes: setting(
        z
          .array(z.string().regex(/^([\w.+-]+|\*)\/([\w.+-]+|\*)$/, "a media type, e.g. text/plain or image/*"))
          .min(1)
          .default(["text/plain", "application/json"]),
        {
          description:
            "media types the agents accept in message parts (the card's defaultInputModes; type/* and */* match families); a text part is text/plain, a data part application/json, a file part its mediaType (application/octet-stream if none); others are refused with ContentTypeNotSupportedError",
          env: "PARLEY_INPUT_MODES",
        },
      ),
    }),
    shutdownGraceMs: setting(millis(0).default(10_000), {
      description: "how long running tasks may finish after SIGTERM before they are failed",
      env: "PARLEY_SHUTDOWN_GRACE_MS",
    }),
    logLevel: setting(z.enum(logLevels).default("info"), {
      description: "log level",
      env: "PARLEY_LOG_LEVEL",
      flag: "log-level",
    }),
    bridge: section({
      host: setting(z.string().min(1).default("127.0.0.1"), {
        description: "listen address of the JSON-RPC port",
        env: "BRIDGE_HOST",
        flag: "host",
        bridgeOnly: true,
      }),
      port: setting(port.default(8080), {
        description: "JSON-RPC + SSE port (0 = any free port)",
        env: "PORT",
        flag: "port",
        bridgeOnly: true,
      }),
      publicUrl: setting(z.url({ protocol: /^https?$/ }).optional(), {
        description: "base URL the agent cards advertise (default http://HOST:PORT/)",
        env: "BRIDGE_PUBLIC_URL",
        flag: "public-url",
        bridgeOnly: true,
      }),
      keepAliveMs: setting(millis(1).default(15_000), {
        description:
          "a quiet SSE stream gets a ': keep-alive' comment (no id) at least this often, also before its first event",
        env: "BRIDGE_KEEPALIVE_MS",
        bridgeOnly: true,
      }),
      sseStreamBufferBytes: setting(
        z
          .int()
          .min(1024)
          .max(2 ** 30)
          .default(1024 * 1024),
        {
          description:
            "unsent bytes one SSE stream may hold; past it the bridge reads no more events for it until its client catches up",
          env: "BRIDGE_SSE_STREAM_BUFFER_BYTES",
          bridgeOnly: true,
        },
      ),
      sseBufferBytes: setting(
        z
          .int()
          .min(1024)
          .max(2 ** 40)
          .default(64 * 1024 * 1024),
        {
          description:
            "unsent bytes all SSE streams together may hold; past it each stream gets more only once its socket drained",
          env: "BRIDGE_SSE_BUFFER_BYTES",
          bridgeOnly: true,
        },
      ),
      sseStallMs: setting(millis(1).default(30_000), {
        description:
          "an SSE stream held back this long while its client reads nothing is cut with an error event naming the limit",
        env: "BRIDGE_SSE_STALL_MS",
        bridgeOnly: true,
      }),
      upstream: setting(z.url({ protocol: /^https?$/ }).optional(), {
        description: "remote mode: forward to this running parley-server instead of embedding one",
        flag: "upstream",
        bridgeOnly: true,
      }),
    }),
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
export type PeerConfig = z.output<typeof peerSchema>;

/** Every default, as the loader starts from it. */
export const defaultConfig: ParleyConfig = parleyConfigSchema.parse({});
