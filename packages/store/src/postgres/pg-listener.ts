import pg from "pg";

export const eventChannel = "parley_ev";
export const controlChannel = "parley_ctl";
export const listenerApplicationName = "parley-listener";

export interface PgListenerOptions {
  readonly connectionString: string;
  /** Longest wait for the connection and its LISTEN statements, in milliseconds. */
  readonly timeoutMs?: number;
  /** Reports connection trouble; the listener keeps reconnecting regardless. */
  readonly onError?: (error: Error) => void;
}

/**
 * The one LISTEN connection of a replica: a dedicated client outside the pool
 * (a pooled connection would be closed when idle, taking its LISTEN with it).
 * Notifications are only wake-ups: after every (re)connect every follower is
 * woken to catch up from the table, because nothing sent while the
 * connection was down is ever delivered.
 */
export interface PgListener {
  /** Resolves once LISTEN is active on a live connection. */
  ready(): Promise<void>;
  on(channel: string, handler: (payload: string) => void): () => void;
  /** Called after each reconnect, once LISTEN is active again. */
  onReconnect(handler: () => void): () => void;
  /** The backend pid of the current listening connection (for diagnostics and failure tests). */
  readonly pid: number | undefined;
  close(): Promise<void>;
}

/** `work`, or a rejection after `timeoutMs` (when set) that says the listener is not connected. */
function bounded(work: Promise<void>, timeoutMs: number | undefined): Promise<void> {
  if (timeoutMs === undefined) return work;
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`the PostgreSQL listener could not connect within ${timeoutMs} ms`)),
      timeoutMs,
    );
  });
  return Promise.race([work, timeout]).finally(() => clearTimeout(timer));
}

export function createPgListener(options: PgListenerOptions): PgListener {
  const handlers = new Map<string, Set<(payload: string) => void>>();
  const reconnectHandlers = new Set<() => void>();
  let client: pg.Client | undefined;
  let pid: number | undefined;
  let closed = false;
  let connecting: Promise<void> | undefined;
  let connectedOnce = false;
  let backoffMs = 50;

  const connect = (): Promise<void> => {
    if (!connecting) {
      connecting = (async () => {
        for (;;) {
          if (closed) throw new Error("the PostgreSQL listener was closed");
          // Named so operators (and failure tests) can tell the LISTEN connection apart in pg_stat_activity.
          const c = new pg.Client({
            connectionString: options.connectionString,
            application_name: listenerApplicationName,
            keepAlive: true,
            ...(options.timeoutMs
              ? { connectionTimeoutMillis: options.timeoutMs, query_timeout: options.timeoutMs }
              : {}),
          });
          try {
            c.on("error", (error) => lost(c, error));
            c.on("end", () => lost(c, new Error("the listener connection ended")));
            c.on("notification", (n) => {
              for (const handler of handlers.get(n.channel) ?? []) handler(n.payload ?? "");
            });
            await c.connect();
            await c.query(`LISTEN ${eventChannel}; LISTEN ${controlChannel}`);
            const { rows } = await c.query<{ pid: number }>("SELECT pg_backend_pid() AS pid");
            if (closed) {
              c.removeAllListeners("end");
              await c.end().catch(() => {});
              throw new Error("the PostgreSQL listener was closed");
            }
            client = c;
            pid = rows[0]!.pid;
            backoffMs = 50;
            if (connectedOnce) for (const handler of reconnectHandlers) handler();
            connectedOnce = true;
            return;
          } catch (error) {
            c.removeAllListeners("end");
            const ended = c.end().catch(() => {});
            if (closed) {
              await ended;
              throw error;
            }
            options.onError?.(error as Error);
            await new Promise((resolve) => setTimeout(resolve, backoffMs).unref());
            backoffMs = Math.min(backoffMs * 2, 2000);
          }
        }
      })();
      connecting.catch(() => {});
    }
    return connecting;
  };

  const lost = (c: pg.Client, error: Error) => {
    if (client !== c) return;
    client = undefined;
    pid = undefined;
    connecting = undefined;
    c.removeAllListeners("end");
    c.end().catch(() => {});
    if (closed) return;
    options.onError?.(error);
    void connect();
  };

  void connect();

  return {
    // Bounded like every other wait on the database: while PostgreSQL is away the reconnect loop goes on,
    // but a caller waiting for LISTEN gets an error after timeoutMs instead of waiting for the outage to end.
    ready: () => (client ? Promise.resolve() : bounded(connect(), options.timeoutMs)),
    on(channel, handler) {
      const set = handlers.get(channel) ?? new Set();
      handlers.set(channel, set);
      set.add(handler);
      return () => set.delete(handler);
    },
    onReconnect(handler) {
      reconnectHandlers.add(handler);
      return () => reconnectHandlers.delete(handler);
    },
    get pid() {
      return pid;
    },
    async close() {
      closed = true;
      // A connect in flight ends its own client once it sees `closed` (its waits are bounded): wait for
      // that, so no connection outlives close().
      await connecting?.catch(() => {});
      const c = client;
      client = undefined;
      if (c) {
        c.removeAllListeners("end");
        await c.end().catch(() => {});
      }
    },
  };
}
