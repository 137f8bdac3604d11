// The retention policy of the configuration: which tenants' threads go after how many idle days.
import type { RetentionQuery, ThreadKey } from "@parley/store";

const dayMs = 86_400_000;

export interface RetentionPolicy {
  /** Days for every tenant not in `tenants`; undefined keeps their threads. */
  readonly defaultDays: number | undefined;
  /** Per-tenant days; undefined ("off") keeps that tenant's threads whatever the default. */
  readonly tenants: ReadonlyMap<string, number | undefined>;
  /** False when no tenant's threads can ever be deleted: no pass runs at all. */
  readonly enabled: boolean;
  /** One line for the start banner and the log. */
  readonly summary: string;
}

/** The `retention` settings: days per tenant, "off" keeps that tenant's threads. */
export interface RetentionSettings {
  readonly retention: {
    readonly threadIdleDays?: number | undefined;
    readonly tenants: Readonly<Record<string, number | "off">>;
  };
}

export function retentionPolicy(config: RetentionSettings): RetentionPolicy {
  const defaultDays = config.retention.threadIdleDays;
  const tenants = new Map<string, number | undefined>(
    Object.entries(config.retention.tenants).map(([tenant, days]) => [tenant, days === "off" ? undefined : days]),
  );
  const enabled = defaultDays !== undefined || [...tenants.values()].some((days) => days !== undefined);
  const overrides = [...tenants].map(([tenant, days]) => `${tenant}: ${days === undefined ? "off" : `${days} days`}`);
  const summary = !enabled
    ? "retention: off (threads are kept until deleted; set PARLEY_RETENTION_DAYS to delete idle ones)"
    : `retention: threads idle for more than ${defaultDays === undefined ? "(no default: kept)" : `${defaultDays} days`} are deleted with their tasks, push configs and event logs${overrides.length > 0 ? ` (per tenant: ${overrides.join(", ")})` : ""}`;
  return { defaultDays, tenants, enabled, summary };
}

/** The store query of a pass that starts at `nowMs`: each cutoff is `now - days`. */
export function retentionQuery(
  policy: RetentionPolicy,
  nowMs: number,
  limit: number,
  busy: (key: ThreadKey) => boolean,
): RetentionQuery {
  const cutoff = (days: number | undefined) => (days === undefined ? undefined : Math.max(0, nowMs - days * dayMs));
  const idleBefore = cutoff(policy.defaultDays);
  return {
    ...(idleBefore === undefined ? {} : { idleBefore }),
    tenants: new Map([...policy.tenants].map(([tenant, days]) => [tenant, cutoff(days)])),
    limit,
    busy,
  };
}
