// The PostgreSQL backend of ThreadStore: each job's module behind one closed-check.
import { bindJobs } from "../core/bind-jobs.js";
import type { FencedThreadStore } from "../replica-types.js";
import { StoreError } from "../types.js";
import type { PgContext } from "./pg-context.js";
import type { PgPool } from "./pg-pipeline.js";
import { pushConfigJobs } from "./pg-push-configs.js";
import { taskJobs } from "./pg-tasks.js";
import { threadDeletes } from "./pg-thread-deletes.js";
import { importThread } from "./pg-thread-import.js";
import { threadReads } from "./pg-thread-reads.js";
import { append } from "./pg-thread-writes.js";

export interface PgThreadStoreOptions {
  readonly pool: PgPool;
  /** The clock for createdAt/updatedAt and sweeps; Date.now by default (lease expiry uses the database clock). */
  readonly now?: () => number;
  /** Lets appends take the context's lease in the same statement (see PgContext.leases). */
  readonly leases?: PgContext["leases"];
}

/** ThreadStore on PostgreSQL, with writes an executor can fence with its lease. */
export function createPgThreadStore(options: PgThreadStoreOptions): FencedThreadStore {
  const ctx: PgContext = {
    pool: options.pool,
    now: options.now ?? Date.now,
    ...(options.leases ? { leases: options.leases } : {}),
  };
  let closed = false;
  /** Refuses new work once closed; the checks and the work run as one async call, so failures reject. */
  async function op<T>(name: string, work: () => Promise<T>): Promise<T> {
    if (closed) throw new StoreError("CLOSED", `${name} called after the PostgreSQL store was closed`);
    return work();
  }
  const jobs = { append, importThread, ...threadReads, ...threadDeletes, ...taskJobs, ...pushConfigJobs };
  return {
    ...bindJobs<Omit<FencedThreadStore, "close" | "acquiresInAppend">, PgContext>(ctx, jobs, op),
    acquiresInAppend: ctx.leases !== undefined,
    async close(): Promise<void> {
      // The pool belongs to the backend, which ends it after every user of it is closed.
      closed = true;
    },
  };
}
