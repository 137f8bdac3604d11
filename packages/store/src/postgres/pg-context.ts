import type { PgPool } from "./pg-pipeline.js";

/** What every job of the PostgreSQL ThreadStore shares. */
export interface PgContext {
  readonly pool: PgPool;
  /** The clock for createdAt/updatedAt and sweeps (lease expiry uses the database clock). */
  readonly now: () => number;
  /** What an append that takes the lease itself needs (WriteOptions.acquire): absent, appends cannot. */
  readonly leases?: {
    /** Names this replica in lease rows. */
    readonly holder: string;
    /** Resolves once this replica LISTENs: a holder must hear cancels for its lease from its grant on. */
    ready(): Promise<void>;
  };
}
