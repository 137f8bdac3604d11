import { timingSafeEqual } from "node:crypto";
import { clone } from "@bufbuild/protobuf";
import {
  Code,
  ConnectError,
  type ContextValues,
  createContextKey,
  type HandlerContext,
  type Interceptor,
} from "@connectrpc/connect";
import type { Caller } from "@parley/domain";
import { createTypedError } from "@parley/domain";
import { A2AService, a2aMajorMinor, ErrorInfoSchema, headers } from "@parley/proto";
import { clientAddressKey } from "@parley/serving";
import type { Logger } from "pino";
import type { ParleyConfig } from "../config.js";
import { createAuthThrottle } from "../limits/auth-throttle.js";
import { rateLimitPolicy } from "../limits/rate-limit-policy.js";
import { createRateLimiter } from "../limits/rate-limiter.js";

/** The tenant every caller belongs to in open mode (no API keys configured). */
export const openModeTenant = "default";

/** Request header that picks one of the hosted agents; absent: the default agent. */
export const agentHeader = headers.agent;

/**
 * A2A protocol versions the gRPC/Connect interface speaks (the card declares it for 1.0 only): an absent or empty
 * header means 0.3 (section 3.6.2) and is refused like any other version it does not speak. Parley's own services
 * (parley.v1.*) are not A2A and take no version.
 */
export const supportedA2AVersions = ["1.0"] as const;

const callerKey = createContextKey<Caller | undefined>(undefined, { description: "the authenticated caller" });

/** The caller established by the interceptors; every Parley handler runs behind them. */
export function callerOf(ctx: HandlerContext): Caller {
  const caller = ctx.values.get(callerKey);
  if (!caller) throw new ConnectError("no caller was established for this request", Code.Internal);
  return caller;
}

/** The tenant of a call, once the caller interceptor has run (for request logs, which run outside it). */
export function tenantIn(values: ContextValues): string | undefined {
  return values.get(callerKey)?.tenant;
}

function findTenant(apiKeys: Readonly<Record<string, string>>, token: string): string | undefined {
  const presented = Buffer.from(token);
  let found: string | undefined;
  // Compare against every key in constant time so timing does not reveal a near match.
  for (const [key, tenant] of Object.entries(apiKeys)) {
    const candidate = Buffer.from(key);
    if (candidate.length === presented.length && timingSafeEqual(candidate, presented)) found = tenant;
  }
  return found;
}

/** Longest error message sent back; longer ones are cut (see boundError). */
export const maxErrorMessageChars = 1024;
/** Longest ErrorInfo metadata value sent back. */
export const maxErrorMetadataChars = 256;

function clip(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max)}… (${text.length - max} more characters)`;
}

/**
 * Cuts an error's message and ErrorInfo metadata to a bounded size. Errors
 * quote what the caller sent (an id, a header), and on gRPC and gRPC-Web they
 * travel in HTTP/2 trailers: an echo of a 50 kB id overflows the header frame,
 * and the caller gets a reset stream instead of an error.
 */
export function boundError(error: unknown): unknown {
  if (!(error instanceof ConnectError)) return error;
  const info = error.findDetails(ErrorInfoSchema)[0];
  const longMetadata = info && Object.values(info.metadata).some((v) => v.length > maxErrorMetadataChars);
  if (error.rawMessage.length <= maxErrorMessageChars && !longMetadata) return error;
  const details = error.details.map((detail) => {
    if (!("desc" in detail) || detail.desc.typeName !== ErrorInfoSchema.typeName) return detail;
    const value = clone(ErrorInfoSchema, info!);
    for (const [k, v] of Object.entries(value.metadata)) value.metadata[k] = clip(v, maxErrorMetadataChars);
    return { desc: ErrorInfoSchema, value };
  });
  return new ConnectError(
    clip(error.rawMessage, maxErrorMessageChars),
    error.code,
    error.metadata,
    details.filter((d) => "desc" in d),
    error.cause,
  );
}

const rethrowBound = (error: unknown): never => {
  throw boundError(error);
};

/**
 * A stream's messages with its failure bounded (boundError). A class in front of the inner iterator, not a
 * `yield*` generator: an open stream then holds no suspended generator, and a message costs one `then`.
 */
class BoundStreamErrors<T> implements AsyncIterable<T>, AsyncIterator<T> {
  private inner: AsyncIterator<T> | undefined;

  constructor(private readonly messages: AsyncIterable<T>) {}

  [Symbol.asyncIterator](): this {
    return this;
  }

  private opened(): AsyncIterator<T> {
    this.inner ??= this.messages[Symbol.asyncIterator]();
    return this.inner;
  }

  next(): Promise<IteratorResult<T>> {
    try {
      return this.opened().next().catch(rethrowBound);
    } catch (error) {
      return Promise.reject(boundError(error));
    }
  }

  async return(value?: unknown): Promise<IteratorResult<T>> {
    const inner = this.inner;
    if (inner?.return) return inner.return(value).catch(rethrowBound);
    return { done: true, value: undefined };
  }

  async throw(error?: unknown): Promise<IteratorResult<T>> {
    const inner = this.inner;
    if (inner?.throw) return inner.throw(error).catch(rethrowBound);
    throw boundError(error);
  }
}

/**
 * Authenticates the caller (bearer API key -> tenant, or open mode), picks the
 * agent, and for A2A methods checks the protocol version and the extensions
 * the agent requires.
 */
export function createCallerInterceptor(
  config: ParleyConfig,
  agentNames: readonly string[],
  logger?: Logger,
): Interceptor {
  const openMode = Object.keys(config.apiKeys).length === 0;
  const throttle = createAuthThrottle(config.limits.failedAuthPerMinute);
  /** A failed authentication: logged with the client's address, and counted against it. */
  const refuse = (address: string | undefined, message: string): ConnectError => {
    logger?.warn({ clientAddress: address ?? "in-process", reason: message }, "authentication failed");
    if (address !== undefined) throttle.failed(address);
    return new ConnectError(message, Code.Unauthenticated);
  };
  const defaultAgent = agentNames[0]!;
  const { ratePerSecond: rate, burst } = rateLimitPolicy(config);
  const limiter = createRateLimiter({ ratePerSecond: rate, burst });
  const { requiredExtensions } = config.capabilities;
  /** The required extensions a request did not declare in its A2A-Extensions header. */
  const missingExtensions = (header: Headers): readonly string[] => {
    const declared = new Set(
      (header.get(headers.a2aExtensions) ?? "")
        .split(",")
        .map((s) => s.trim())
        .filter(Boolean),
    );
    return requiredExtensions.filter((uri) => !declared.has(uri));
  };
  const intercept: Interceptor = (next) => async (req) => {
    let tenant = openModeTenant;
    if (!openMode) {
      const address = req.contextValues.get(clientAddressKey);
      const waitMs = address === undefined ? 0 : throttle.blockedFor(address);
      if (waitMs > 0) {
        throw createTypedError(
          "RATE_LIMITED",
          `too many failed authentications from ${address}; retry in ${Math.ceil(waitMs / 1000)} s (limits.failedAuthPerMinute: ${config.limits.failedAuthPerMinute})`,
          { limit: "failedAuthPerMinute", retryAfterMs: String(waitMs) },
        );
      }
      const header = req.header.get("authorization") ?? "";
      const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
      if (!match) {
        throw refuse(
          address,
          header === ""
            ? "missing credentials: send the header 'authorization: Bearer <API key>'"
            : "malformed authorization header: expected 'Bearer <API key>'",
        );
      }
      const found = findTenant(config.apiKeys, match[1]!);
      if (found === undefined) throw refuse(address, "unknown API key");
      tenant = found;
    }
    // After authentication, so an unauthenticated flood cannot spend a real tenant's budget.
    const decision = limiter.take(tenant);
    if (!decision.allowed) {
      throw createTypedError(
        "RATE_LIMITED",
        `tenant ${JSON.stringify(tenant)} exceeded requestsPerSecondPerTenant (${rate} requests per second, burst ${burst}); retry in ${decision.retryAfterMs} ms`,
        { limit: "requestsPerSecondPerTenant", retryAfterMs: String(decision.retryAfterMs) },
      );
    }
    const requested = req.header.get(agentHeader)?.trim();
    const agent = requested ? requested : defaultAgent;
    if (!agentNames.includes(agent)) {
      throw new ConnectError(
        `no agent named ${JSON.stringify(agent)}; this server hosts: ${agentNames.join(", ")}`,
        Code.NotFound,
      );
    }
    if (req.service.typeName === A2AService.typeName) {
      const sent = req.header.get(headers.a2aVersion)?.trim() ?? "";
      const version = a2aMajorMinor(sent);
      if (!(supportedA2AVersions as readonly string[]).includes(version)) {
        const named =
          sent === "" ? "no A2A-Version header (read as 0.3)" : `A2A protocol version ${JSON.stringify(sent)}`;
        throw createTypedError(
          "VERSION_NOT_SUPPORTED",
          `${named} is not supported on this interface; supported versions: ${supportedA2AVersions.join(", ")}; send the header "A2A-Version: 1.0"`,
          { requested: sent === "" ? "0.3" : sent, supported: supportedA2AVersions.join(",") },
        );
      }
      const missing = requiredExtensions.length === 0 ? requiredExtensions : missingExtensions(req.header);
      if (missing.length > 0) {
        throw createTypedError(
          "EXTENSION_SUPPORT_REQUIRED",
          `this agent requires the extension(s) ${missing.join(", ")}; declare them in the A2A-Extensions header`,
          { extensions: missing.join(",") },
        );
      }
    }
    req.contextValues.set(callerKey, { tenant, agent });
    return next(req);
  };
  return (next) => {
    const inner = intercept(next);
    return async (req) => {
      try {
        const res = await inner(req);
        return res.stream ? { ...res, message: new BoundStreamErrors(res.message) } : res;
      } catch (error) {
        throw boundError(error);
      }
    };
  };
}
