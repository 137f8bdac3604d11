import type { ParleyConfig } from "./config/schema.js";
import { rateLimitPolicy } from "./limits/rate-limit-policy.js";
import type { Logger } from "./logger.js";
import { retentionPolicy } from "./retention/retention-policy.js";

export const openModeWarning =
  "open mode: no API keys configured, every caller is tenant 'default' (set PARLEY_API_KEYS to require keys)";

/**
 * What both binaries say at start about access and limits: returned as lines
 * for the human banner on stdout, and logged for log collectors.
 */
export function startNotices(
  config: Pick<ParleyConfig, "apiKeys" | "limits" | "retention">,
  notices: readonly string[],
  logger: Logger,
): string[] {
  const openMode = Object.keys(config.apiKeys).length === 0;
  const { summary } = rateLimitPolicy(config);
  if (openMode) logger.warn(openModeWarning);
  for (const notice of notices) logger.warn(notice);
  const retention = retentionPolicy(config).summary;
  logger.info(summary);
  logger.info(retention);
  return [
    ...(openMode ? [`warning: ${openModeWarning}`] : []),
    summary,
    retention,
    ...notices.map((n) => `note: ${n}`),
  ];
}
