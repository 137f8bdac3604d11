import { createMemoryEventLog } from "./events/memory-event-log.js";
import { fenceStore } from "./leases/fenced-store.js";
import { createMemoryLeases } from "./leases/memory-leases.js";
import { createLevelThreadStore } from "./level-thread-store.js";
import { createPostgresBackend } from "./postgres/pg-backend.js";
import type { StoreBackend } from "./types.js";

export interface CreateStoreOptions {
  /** A postgres:// (or postgresql://) URL selects PostgreSQL; anything else is a LevelDB directory. */
  readonly url: string;
  /** The clock for thread and task timestamps; Date.now by default. */
  readonly now?: () => number;
  /** LevelDB: fsync every write. */
  readonly sync?: boolean;
  /** PostgreSQL: pool size of this replica. */
  readonly poolSize?: number;
  /** PostgreSQL: the follower safety-net poll in milliseconds. */
  readonly pollMs?: number;
  /** PostgreSQL: apply pending migrations on open (true by default). */
  readonly migrate?: boolean;
  readonly onError?: (error: Error) => void;
}

export function isPostgresUrl(url: string): boolean {
  return /^postgres(ql)?:\/\//i.test(url);
}

/**
 * Opens the backend named by `url`: PostgreSQL for N replicas sharing one
 * database, or LevelDB with in-process leases and event logs for one process.
 */
export async function createStore(options: CreateStoreOptions): Promise<StoreBackend> {
  if (typeof options?.url !== "string" || options.url.length === 0) {
    throw new TypeError("createStore needs options.url: a postgres:// URL or a LevelDB directory");
  }
  if (isPostgresUrl(options.url)) {
    return createPostgresBackend({
      url: options.url,
      ...(options.now ? { now: options.now } : {}),
      ...(options.poolSize ? { poolSize: options.poolSize } : {}),
      ...(options.pollMs ? { pollMs: options.pollMs } : {}),
      ...(options.migrate !== undefined ? { migrate: options.migrate } : {}),
      ...(options.onError ? { onError: options.onError } : {}),
    });
  }
  const level = await createLevelThreadStore({
    path: options.url,
    ...(options.now ? { now: options.now } : {}),
    ...(options.sync !== undefined ? { sync: options.sync } : {}),
  });
  const leases = createMemoryLeases();
  const events = createMemoryEventLog({ leases, ...(options.now ? { now: options.now } : {}) });
  const store = fenceStore(level, leases);
  let closing: Promise<void> | undefined;
  return {
    kind: "level",
    store,
    leases,
    events,
    close() {
      closing ??= (async () => {
        await Promise.allSettled([events.close(), leases.close()]);
        await level.close();
      })();
      return closing;
    },
  };
}
