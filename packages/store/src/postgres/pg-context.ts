import type pg from "pg";

/** What every job of the PostgreSQL ThreadStore shares. */
export interface PgContext {
  readonly pool: pg.Pool;
  /** The clock for createdAt/updatedAt and sweeps (lease expiry uses the database clock). */
  readonly now: () => number;
}
