import type { ParleyConfig } from "./config/schema.js";
import { rateLimitPolicy } from "./limits/rate-limit-policy.js";
import type { Logger } from "./logger.js";
import { retentionPolicy } from "./retention/retention-policy.js";

export const openModeWarning =
  "open mode: no API keys configured, every caller is tenant 'default' (set PARLEY_API_KEYS to require keys)";

type StoreSettings = Pick<ParleyConfig, "storeUrl" | "dataDir" | "durability">;

/**
 * Where this server keeps its data and what an acknowledged write survives, in one line: replicas on
 * PostgreSQL name the database (never its credentials), a LevelDB server its directory and durability mode.
 */
export function storeNotice(config: StoreSettings): string {
  if (config.storeUrl !== "") {
    let where = "(an unparsable URL)";
    try {
      const url = new URL(config.storeUrl);
      where = `${url.hostname}:${url.port || "5432"}${url.pathname}`;
    } catch {}
    const ignored = config.durability === "synced" ? "; PARLEY_DURABILITY applies to LevelDB only" : "";
    return `store: PostgreSQL at ${where} (shared by the replicas; what an acknowledged write survives is the database's synchronous_commit${ignored})`;
  }
  return config.durability === "synced"
    ? `store: LevelDB in ${config.dataDir}, durability synced (every write fsynced before it is acknowledged)`
    : `store: LevelDB in ${config.dataDir}, durability process-crash (survives a crash of this process, not an OS crash or power cut; PARLEY_DURABILITY=synced fsyncs every write)`;
}

/**
 * What both binaries say at start about access, limits and storage: returned as lines
 * for the human banner on stdout, and logged for log collectors.
 */
export function startNotices(
  config: Pick<ParleyConfig, "apiKeys" | "limits" | "retention"> & StoreSettings,
  notices: readonly string[],
  logger: Logger,
): string[] {
  const openMode = Object.keys(config.apiKeys).length === 0;
  const { summary } = rateLimitPolicy(config);
  const store = storeNotice(config);
  if (openMode) logger.warn(openModeWarning);
  for (const notice of notices) logger.warn(notice);
  const retention = retentionPolicy(config).summary;
  logger.info(summary);
  logger.info(retention);
  logger.info(store);
  return [
    ...(openMode ? [`warning: ${openModeWarning}`] : []),
    summary,
    retention,
    store,
    ...notices.map((n) => `note: ${n}`),
  ];
}
