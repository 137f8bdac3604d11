import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import pg from "pg";
import type { ReplicaBackend } from "../replica-types.js";
import { StoreError } from "../types.js";
import { migrate } from "./migrations.js";
import { createPgConversations } from "./pg-conversations.js";
import { createPgEventLog } from "./pg-event-log.js";
import { createPgLeases } from "./pg-leases.js";
import { createPgListener, type PgListener } from "./pg-listener.js";
import { createPgPipeline, type PgPool } from "./pg-pipeline.js";
import { createPgRetention } from "./pg-retention.js";
import { createPgThreadStore } from "./pg-thread-store.js";

export interface PostgresBackendOptions {
  /** A postgres:// or postgresql:// connection URL. */
  readonly url: string;
  /**
   * Longest wait, in milliseconds, for a pooled connection (connect included) and for one statement, on the
   * client (a silent network) and on the server (statement_timeout). Past it the call fails with an error that
   * isDatabaseUnavailable recognises. Default 5 000.
   */
  readonly timeoutMs?: number;
  /**
   * Connections in this replica's pool, for transactions and the readiness probe (the LISTEN connection and the
   * pipelined connections of single statements are extra).
   */
  readonly poolSize?: number;
  /** Apply pending migrations on open (true by default). */
  readonly migrate?: boolean;
  /** The clock for thread and task timestamps; lease expiry always uses the database clock. */
  readonly now?: () => number;
  /** The follower safety-net poll, in milliseconds. */
  readonly pollMs?: number;
  /** Names this replica in lease rows. */
  readonly holder?: string;
  readonly onError?: (error: Error) => void;
}

export interface PostgresBackend extends ReplicaBackend {
  readonly kind: "postgres";
  readonly pool: pg.Pool;
  readonly listener: PgListener;
}

const defaultTimeoutMs = 5_000;
export const poolApplicationName = "parley";
/** Pipelined connections for single statements: two, so one statement waiting for a lock holds up only half. */
const pipelinedConnections = 2;

/** Opens the PostgreSQL backend: pool, schema, listener, store, leases and event log of one replica. */
export async function createPostgresBackend(options: PostgresBackendOptions): Promise<PostgresBackend> {
  const timeoutMs = options.timeoutMs ?? defaultTimeoutMs;
  // Bounded waits: without them a request waits for as long as the database is away (a dropped network
  // gives no error at all). TCP keepalive notices a dead peer on idle connections.
  const clientConfig: pg.ClientConfig = {
    connectionString: options.url,
    connectionTimeoutMillis: timeoutMs,
    query_timeout: timeoutMs,
    statement_timeout: timeoutMs,
    keepAlive: true,
    // Named so operators (and tests) can tell a replica's connections apart in pg_stat_activity.
    application_name: poolApplicationName,
  };
  const pool = new pg.Pool({ ...clientConfig, max: options.poolSize ?? 10 });
  let closing: Promise<void> | undefined;
  // An idle pooled client that loses its connection emits here; without a listener it would crash the process.
  // Once closing, pool.end() has resolved before its clients' sockets are gone, so a connection cut then (the
  // database dropped or restarted right after a stop) is no trouble worth reporting.
  pool.on("error", (error) => {
    if (!closing) options.onError?.(error);
  });
  try {
    await pool.query("SELECT 1");
  } catch (cause) {
    await pool.end().catch(() => {});
    throw new Error(`cannot reach PostgreSQL at ${redact(options.url)}: ${(cause as Error).message}`, { cause });
  }
  try {
    if (options.migrate !== false) await migrate(pool);
  } catch (cause) {
    await pool.end().catch(() => {});
    throw cause;
  }
  const pipeline = createPgPipeline({
    client: clientConfig,
    connections: pipelinedConnections,
    onError: (error) => {
      if (!closing) options.onError?.(error);
    },
  });
  // Single statements go pipelined; a transaction takes a pooled connection of its own.
  const statements: PgPool = { query: pipeline.query, connect: () => pool.connect() };
  const listener = createPgListener({
    connectionString: options.url,
    timeoutMs,
    ...(options.onError ? { onError: options.onError } : {}),
  });
  const holder = options.holder ?? `${hostname()}:${process.pid}:${randomBytes(4).toString("hex")}`;
  const store = createPgThreadStore({
    pool: statements,
    ...(options.now ? { now: options.now } : {}),
    leases: { holder, ready: () => listener.ready() },
  });
  const leases = createPgLeases({
    pool: statements,
    listener,
    holder,
    ...(options.onError ? { onError: options.onError } : {}),
  });
  const events = createPgEventLog({
    pool: statements,
    listener,
    ...(options.pollMs ? { pollMs: options.pollMs } : {}),
  });
  const retention = createPgRetention({
    pool: statements,
    open: (name) => {
      if (closing) throw new StoreError("CLOSED", `${name} called after the PostgreSQL backend was closed`);
    },
  });
  const conversations = createPgConversations({
    pool: statements,
    open: (name) => {
      if (closing) throw new StoreError("CLOSED", `${name} called after the PostgreSQL backend was closed`);
    },
  });
  return {
    kind: "postgres",
    store,
    conversations,
    leases,
    events,
    retention,
    pool,
    listener,
    close() {
      closing ??= (async () => {
        await Promise.allSettled([events.close(), leases.close(), store.close()]);
        await listener.close();
        await pipeline.close();
        await pool.end();
      })();
      return closing;
    },
  };
}

/** The URL without its password, for error messages and logs. */
export function redact(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = "***";
    return parsed.toString();
  } catch {
    return "(an unparsable URL)";
  }
}
