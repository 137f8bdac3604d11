import { defaultConnectionLimits } from "@parley/serving";
import { z } from "zod";
import { millis } from "../options/timer-range.js";
import { allowedAddressProblem } from "../push/push-address-policy.js";
import { port, section, setting } from "./setting.js";

// The sections of what serves the ports: push delivery, CORS, metrics and logs, connection limits, TLS, the agent card
// and the bridge. schema.ts composes them.

export const pushSection = section({
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
});

export const operationsSection = section({
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
});

// Both ports (the h2c port and the bridge's JSON-RPC port) take these; see listen/connection-limits.ts.
export const connectionsSection = section({
  headersTimeoutMs: setting(millis(1).default(defaultConnectionLimits.headersTimeoutMs), {
    description:
      "how long a client may take to send a request's headers; on the h2c port also a new connection's first bytes and HTTP/2 preface and SETTINGS",
    env: "PARLEY_HEADERS_TIMEOUT_MS",
  }),
  bodyTimeoutMs: setting(millis(1).default(defaultConnectionLimits.bodyTimeoutMs), {
    description:
      "how long a request body may take to arrive in full, from the end of its headers; later, the request is answered 408 (gRPC DEADLINE_EXCEEDED) and cut",
    env: "PARLEY_BODY_TIMEOUT_MS",
  }),
  http1IdleTimeoutMs: setting(millis(1).default(defaultConnectionLimits.http1IdleTimeoutMs), {
    description: "an HTTP/1.1 keep-alive connection idle between requests is closed after this long (Node adds 1 s)",
    env: "PARLEY_HTTP1_IDLE_TIMEOUT_MS",
  }),
  http2IdleTimeoutMs: setting(millis(1).default(defaultConnectionLimits.http2IdleTimeoutMs), {
    description:
      "an HTTP/2 connection with no open stream (from its start or its last stream) is closed (GOAWAY) after this long",
    env: "PARLEY_HTTP2_IDLE_TIMEOUT_MS",
  }),
  maxConcurrentStreams: setting(
    z
      .int()
      .min(1)
      .max(2 ** 31 - 1)
      .default(defaultConnectionLimits.maxConcurrentStreams),
    {
      description: "streams (calls) one HTTP/2 connection may have open at once (SETTINGS_MAX_CONCURRENT_STREAMS)",
    },
  ),
  maxConnections: setting(
    z
      .int()
      .min(1)
      .max(2 ** 31 - 1)
      .default(defaultConnectionLimits.maxConnections),
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
      .default(defaultConnectionLimits.maxDiscardBytes),
    {
      description:
        "bytes of a too-large request body read and thrown away so that its refusal reaches the client; past this the connection (HTTP/1.1) or stream (HTTP/2) is cut after the refusal",
    },
  ),
});

// Both ports (the h2c port and the bridge's JSON-RPC port) take these; see listen/tls-files.ts.
export const tlsSection = section({
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
});

export const cardSection = section({
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
});

export const bridgeSection = section({
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
});
