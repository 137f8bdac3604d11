/**
 * The per-tenant rate limit keeps tenants from starving each other on a
 * replica: it is a fairness limit between tenants, not overload protection
 * (open streams, message sizes and step timeouts bound a single caller). In
 * open mode every caller is the one tenant "default", so a per-tenant limit
 * would only cap the whole replica; there it is off unless configured.
 */
export const keyedRequestsPerSecondPerTenant = 200;

export interface RateLimitPolicy {
  /** Tokens per second per tenant; 0 = no limit. */
  readonly ratePerSecond: number;
  readonly burst: number;
  /** One line for the start log: the limit and why it is what it is. */
  readonly summary: string;
}

/** What the policy reads of the server's settings. */
export interface RateLimitSettings {
  readonly apiKeys: Readonly<Record<string, string>>;
  readonly limits: { readonly requestsPerSecondPerTenant?: number | undefined; readonly requestBurstPerTenant: number };
}

export function rateLimitPolicy(config: RateLimitSettings): RateLimitPolicy {
  const openMode = Object.keys(config.apiKeys).length === 0;
  const configured = config.limits.requestsPerSecondPerTenant;
  const burst = config.limits.requestBurstPerTenant;
  const ratePerSecond = configured ?? (openMode ? 0 : keyedRequestsPerSecondPerTenant);
  const why =
    configured !== undefined
      ? "configured"
      : openMode
        ? "open mode has one tenant, so a per-tenant limit would cap the whole replica"
        : "the default with API keys";
  const summary =
    ratePerSecond === 0
      ? `no per-tenant rate limit (${why}; set PARLEY_RATE_LIMIT to add one)`
      : `rate limit ${ratePerSecond} requests/s per tenant, burst ${burst} (${why})`;
  return { ratePerSecond, burst, summary };
}
