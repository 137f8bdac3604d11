import { createLevelEventLog } from "./level/level-event-log.js";
import { fenceLevelStore } from "./level/level-fenced-store.js";
import { createLevelLeases } from "./level/level-leases.js";
import { createLevelThreadStore } from "./level/level-thread-store.js";
import { createPostgresBackend, type PostgresBackend } from "./postgres/pg-backend.js";
import type { LevelBackend, StoreHealth } from "./replica-types.js";

export interface CreateStoreOptions {
  /** A postgres:// (or postgresql://) URL selects PostgreSQL; anything else is a LevelDB directory. */
  readonly url: string;
  /** The clock for thread and task timestamps; Date.now by default. */
  readonly now?: () => number;
  /** LevelDB: fsync every write before acknowledging it (group commit: concurrent writes share one fsync). */
  readonly sync?: boolean;
  /** LevelDB: bytes of writes gathered in memory before they go to disk (LevelThreadStoreOptions.writeBufferBytes). */
  readonly writeBufferBytes?: number;
  /** LevelDB: hears each change of the store's health with its cause (for the log); see LevelBackend.health. */
  readonly onHealth?: (health: StoreHealth, detail?: unknown) => void;
  /** PostgreSQL: longest wait for a pooled connection and for one statement (default 5 000 ms). */
  readonly timeoutMs?: number;
  /** PostgreSQL: pool size of this replica. */
  readonly poolSize?: number;
  /** PostgreSQL: the follower safety-net poll in milliseconds. */
  readonly pollMs?: number;
  /** PostgreSQL: apply pending migrations on open (true by default). */
  readonly migrate?: boolean;
  /** PostgreSQL: connection trouble of an idle pooled client or the listener (they reconnect). */
  readonly onError?: (error: Error) => void;
}

export function isPostgresUrl(url: string): boolean {
  return /^postgres(ql)?:\/\//i.test(url);
}

/**
 * Opens the backend named by `url`: PostgreSQL for N replicas sharing one
 * database, or LevelDB owned by this one process (in-process leases, a durable event log).
 */
export async function createStore(options: CreateStoreOptions): Promise<LevelBackend | PostgresBackend> {
  if (typeof options?.url !== "string" || options.url.length === 0) {
    throw new TypeError("createStore needs options.url: a postgres:// URL or a LevelDB directory");
  }
  if (isPostgresUrl(options.url)) {
    return createPostgresBackend({
      url: options.url,
      ...(options.now ? { now: options.now } : {}),
      ...(options.poolSize ? { poolSize: options.poolSize } : {}),
      ...(options.timeoutMs ? { timeoutMs: options.timeoutMs } : {}),
      ...(options.pollMs ? { pollMs: options.pollMs } : {}),
      ...(options.migrate !== undefined ? { migrate: options.migrate } : {}),
      ...(options.onError ? { onError: options.onError } : {}),
    });
  }
  const store = await createLevelThreadStore({
    path: options.url,
    ...(options.now ? { now: options.now } : {}),
    ...(options.sync !== undefined ? { sync: options.sync } : {}),
    ...(options.writeBufferBytes !== undefined ? { writeBufferBytes: options.writeBufferBytes } : {}),
    ...(options.onHealth ? { onHealth: options.onHealth } : {}),
  });
  const leases = createLevelLeases();
  const events = createLevelEventLog({
    keyspace: store.keyspace(),
    leases,
    ...(options.now ? { now: options.now } : {}),
  });
  let closing: Promise<void> | undefined;
  return {
    kind: "level",
    store: fenceLevelStore(store, leases, events),
    conversations: store,
    leases,
    events,
    retention: {
      purgeIdleThreads: (query) =>
        store.purgeIdleThreads(query, {
          leaseFree: (key) => leases.isFree(key),
          forgetTask: (tenant, taskId) => events.forget(tenant, taskId),
        }),
    },
    synced: options.sync === true,
    commitStats: () => store.commitStats(),
    health: () => store.health(),
    close() {
      closing ??= (async () => {
        await Promise.allSettled([events.close(), leases.close()]);
        await store.close();
      })();
      return closing;
    },
  };
}
