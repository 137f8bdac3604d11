// Single statements over a few pipelined connections: node-postgres's pipeline mode writes each statement as soon
// as it is made, behind the ones still in flight on that connection, instead of waiting for a pooled connection
// that is idle. Every statement of a turn is one statement (its own implicit transaction, closed by its own Sync),
// so nothing of a statement's outcome depends on what shares its connection; transactions of several statements
// keep a pooled connection to themselves (pg-transaction.ts). A statement costs the replica and the database
// less CPU than through the pool: no checkout and release per statement, and one wake-up answers several
// statements on either side.
import pg from "pg";

/** What the backend's jobs run statements on: single statements here, transactions on a pooled connection. */
export interface PgPool {
  query<R extends pg.QueryResultRow = pg.QueryResultRow>(
    text: string | pg.QueryConfig,
    values?: unknown[],
  ): Promise<pg.QueryResult<R>>;
  connect(): Promise<pg.PoolClient>;
}

export interface PgPipelineOptions {
  /** The same client settings as the pool's (URL, timeouts, keepalive, application_name). */
  readonly client: pg.ClientConfig;
  /** How many pipelined connections; a statement goes to the one with the fewest in flight. */
  readonly connections: number;
  /** A connection's error that no statement reported (it is replaced by the next statement). */
  readonly onError?: (error: Error) => void;
}

export interface PgPipeline {
  query: PgPool["query"];
  /** Ends every connection once the statements already given to it are answered. */
  close(): Promise<void>;
}

interface Slot {
  client: pg.Client | undefined;
  inFlight: number;
}

/**
 * The session is gone or cannot be trusted: a FATAL or PANIC from PostgreSQL, or a failure of node-postgres's
 * own (no SQLSTATE: a lost socket, a read timeout). A statement's own error (a unique violation, a
 * statement_timeout, a serialization failure) leaves the session usable.
 */
function connectionLost(error: unknown): boolean {
  const { code, severity } = (error ?? {}) as { code?: unknown; severity?: unknown };
  if (severity === "FATAL" || severity === "PANIC") return true;
  return !(typeof code === "string" && /^[0-9A-Z]{5}$/.test(code));
}

export function createPgPipeline(options: PgPipelineOptions): PgPipeline {
  const slots: Slot[] = Array.from({ length: Math.max(1, options.connections) }, () => ({
    client: undefined,
    inFlight: 0,
  }));
  let closed = false;

  // A connection is opened on first use and dropped on its first error: the statements on it fail with that
  // error (node-postgres fails them), and the next statement opens a new one.
  function open(slot: Slot): pg.Client {
    const client = new pg.Client({ ...options.client, pipeline: true } as pg.ClientConfig);
    const drop = (error?: Error) => {
      if (slot.client === client) slot.client = undefined;
      if (error && !closed) options.onError?.(error);
    };
    client.on("error", (error) => {
      drop(error);
      // A dead socket is not reused: end() destroys it.
      client.end().catch(() => {});
    });
    client.on("end", () => drop());
    // A connection that could not be made fails the statements waiting for it, which report it: not again here.
    client.connect().catch(() => drop());
    slot.client = client;
    return client;
  }

  // A connection whose statement failed for want of the connection is not trusted with another (as the pool
  // destroys a client released with an error): PostgreSQL may have ended the session while the socket still looks
  // open (a relay that holds the close), and the next statement would wait out query_timeout on it.
  function retire(slot: Slot, client: pg.Client): void {
    if (slot.client !== client) return;
    slot.client = undefined;
    (client as unknown as { connection?: { stream?: { destroy(): void } } }).connection?.stream?.destroy();
  }

  function pick(): Slot {
    let best = slots[0]!;
    for (let i = 1; i < slots.length; i++) {
      const slot = slots[i]!;
      if (slot.inFlight < best.inFlight || (best.client === undefined && slot.client !== undefined)) best = slot;
    }
    return best;
  }

  const query = (<R extends pg.QueryResultRow>(text: string | pg.QueryConfig, values?: unknown[]) => {
    if (closed) return Promise.reject(new Error("Client was closed and is not queryable"));
    const slot = pick();
    const client = slot.client ?? open(slot);
    slot.inFlight++;
    const result = client.query<R>(text as pg.QueryConfig, values);
    result.then(
      () => {
        slot.inFlight--;
      },
      (error: unknown) => {
        slot.inFlight--;
        if (connectionLost(error)) retire(slot, client);
      },
    );
    return result;
  }) as PgPool["query"];

  return {
    query,
    async close() {
      closed = true;
      await Promise.allSettled(
        slots.map(async (slot) => {
          const client = slot.client;
          slot.client = undefined;
          await client?.end();
        }),
      );
    },
  };
}
