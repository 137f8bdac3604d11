import { StoreError, type ThreadKey } from "@parley/store";
import type { ContextLeases, Fence, LeaseGrant, WriteOptions } from "@parley/store/backends";
import type { Logger } from "pino";
import type { TaskRun } from "../engine/task-run.js";
import { contextBusy } from "../errors.js";

export interface LeaseKeeperOptions {
  readonly leases: ContextLeases;
  readonly logger: Logger;
  /** Lease lifetime; renewed every third of it while the run holds it. */
  readonly leaseTtlMs: number;
  /** How long failing renewals are retried (the database away) before the run is given up as lost. */
  readonly outageToleranceMs?: number;
  /** A run's lease is gone: called before the run is stopped, so nothing more of it gets queued. */
  readonly onLost?: (run: TaskRun) => void;
  /** A renewal failed for want of the database. */
  readonly onOutage?: () => void;
  /** The inbound append of a pending run took its lease (see pend); the run is held from now on. */
  readonly onGranted?: (lease: HeldLease, grant: LeaseGrant) => void;
}

/** What a writer of the run's events needs of its lease. */
export interface RunLease {
  readonly run: TaskRun;
  readonly fence: Fence;
  /** Set when the lease is gone: nothing more of the run may be written. */
  readonly lost: boolean;
  /** Set when the lease was freed with the run's final event. */
  readonly released: boolean;
  /** Renews the lease now (shared with a renewal in flight); true while it is held. */
  renew(): Promise<boolean>;
  /** The lease is gone: the run is stopped and writes nothing more. */
  lose(error: unknown): void;
  /** The log's append freed the lease in the same write as the run's final event. */
  markReleased(): void;
}

/** The store's own refusals (not an outage) are tried this many times before a write gives up. */
export const maxStoreTries = 5;
export const defaultOutageToleranceMs = 60_000;
/** How often a run whose renewal failed tries again, so its lease is renewed soon after the database returns. */
const renewRetryMs = 250;

/** What a run that lost its lease is refused with when it still tries to write. */
export const lostLease = (run: TaskRun) =>
  new StoreError("FENCED", `task ${run.taskId} lost the lease of its context; it writes nothing more`);

/** What every held lease shares of its keeper. */
interface Keeping {
  readonly options: LeaseKeeperOptions;
  readonly outageToleranceMs: number;
  readonly renewIntervalMs: number;
  isHeld(run: TaskRun): boolean;
}

/** The lease one run of this replica holds: its renewals, and whether it was lost or freed. */
export class HeldLease implements RunLease {
  lost = false;
  released = false;
  private renewer: NodeJS.Timeout | undefined = undefined;
  /** When renewals started failing (the database away), or undefined while they succeed. */
  private failingSince: number | undefined = undefined;
  /** A renewal in flight, so a timer tick and a fenced write's retry share it. */
  private renewing: Promise<boolean> | undefined = undefined;

  constructor(
    private readonly keeping: Keeping,
    readonly run: TaskRun,
    readonly fence: Fence,
  ) {}

  /** The next renewal: every third of the TTL, or sooner while the database fails. */
  scheduleRenewal(delayMs: number): void {
    clearTimeout(this.renewer);
    if (this.lost || !this.keeping.isHeld(this.run)) return;
    this.renewer = setTimeout(() => {
      void this.renew().then(() => {
        const every = this.keeping.renewIntervalMs;
        this.scheduleRenewal(this.failingSince === undefined ? every : Math.min(renewRetryMs, every));
      });
    }, delayMs);
    this.renewer.unref();
  }

  stopRenewing(): void {
    clearTimeout(this.renewer);
  }

  /**
   * A renewal also succeeds on a lease that lapsed during a database outage as long as no replica took it over
   * (that bumps the token, and then the run is lost). Failures are retried for up to outageToleranceMs.
   */
  renew(): Promise<boolean> {
    if (this.lost) return Promise.resolve(false);
    this.renewing ??= this.renewOnce();
    return this.renewing;
  }

  private async renewOnce(): Promise<boolean> {
    const { options } = this.keeping;
    try {
      const result = await options.leases.renew(this.fence, options.leaseTtlMs);
      this.failingSince = undefined;
      if (this.lost) return false;
      // A renewal that crossed the run's last write, which freed the lease, finds it gone: that is the end.
      if (this.released) return false;
      if (!result.held) {
        this.lose(new Error("another replica took the lease over before it was renewed"));
        return false;
      }
      if (result.cancelRequested) this.run.cancel("canceled");
      return true;
    } catch (error) {
      options.onOutage?.();
      this.failingSince ??= Date.now();
      const failingMs = Date.now() - this.failingSince;
      if (failingMs >= this.keeping.outageToleranceMs) {
        this.lose(new Error(`the database was unreachable for ${failingMs} ms (outage tolerance)`));
        return false;
      }
      options.logger.warn({ taskId: this.run.taskId, err: error }, "could not renew a context lease; retrying");
      return false;
    } finally {
      this.renewing = undefined;
    }
  }

  lose(error: unknown): void {
    if (this.lost) return;
    this.lost = true;
    this.keeping.options.onLost?.(this.run);
    this.keeping.options.logger.warn(
      { taskId: this.run.taskId, err: error },
      "lost the context lease; stopping the task here",
    );
    if (!this.run.finished) this.run.abort(new Error("this replica lost the context lease (executor lost)"));
  }

  /** Gives the lease up without stopping the run: it is left to expire, and whoever takes it over ends the task. */
  abandon(): void {
    if (this.lost) return;
    this.lost = true;
    this.keeping.options.onLost?.(this.run);
    clearTimeout(this.renewer);
  }

  markReleased(): void {
    this.released = true;
  }
}

export interface LeaseKeeper {
  /** A new run whose inbound append takes its lease in the same statement (FencedThreadStore.acquiresInAppend). */
  pend(run: TaskRun): void;
  /** Takes the context's lease for the run, or throws CONTEXT_BUSY at once; the caller holds or frees it. */
  take(run: TaskRun): Promise<{ readonly fence: Fence; readonly grant: LeaseGrant }>;
  /** Starts holding a granted lease for the run, renewing it until the run lets it go. */
  hold(run: TaskRun, fence: Fence): HeldLease;
  get(run: TaskRun): HeldLease | undefined;
  /** Write options that fence a store write of the run: a pending run's lease request, else its fence. */
  writeOptions(run: TaskRun): WriteOptions | undefined;
  /** Stops holding the run's lease (it is not freed: see release) and forgets a pending run. */
  forget(run: TaskRun): void;
  /** Frees a lease; a failure only warns, the context stays busy until the lease expires. */
  release(fence: Fence): Promise<void>;
  /** Whether a lease is held by a live run of this replica, which renews it. */
  holdsLive(key: ThreadKey, token: number): boolean;
  /** Whether a failed final write of the run may still land: its lease may be live and the database is away. */
  mayRetryEnd(run: TaskRun, error: unknown, attempt: number, failingMs: number): boolean;
  close(): void;
}

export function createLeaseKeeper(options: LeaseKeeperOptions): LeaseKeeper {
  const held = new Map<TaskRun, HeldLease>();
  const pending = new Set<TaskRun>();
  const keeping: Keeping = {
    options,
    outageToleranceMs: options.outageToleranceMs ?? defaultOutageToleranceMs,
    renewIntervalMs: Math.max(1, Math.floor(options.leaseTtlMs / 3)),
    isHeld: (run) => held.has(run),
  };
  let closed = false;
  // Every run of this replica holds a lease, so a cancel announced for one of them finds it here.
  const unsubscribeCancel = options.leases.onCancel((key, taskId) => {
    for (const run of held.keys()) {
      if (run.taskId === taskId && run.tenant === key.tenant) run.cancel("canceled");
    }
  });

  const keyOf = (run: TaskRun): ThreadKey => ({ tenant: run.tenant, contextId: run.contextId });

  const hold = (run: TaskRun, fence: Fence): HeldLease => {
    const lease = new HeldLease(keeping, run, fence);
    held.set(run, lease);
    lease.scheduleRenewal(keeping.renewIntervalMs);
    return lease;
  };

  const release = async (fence: Fence): Promise<void> => {
    try {
      await options.leases.release(fence);
    } catch (error) {
      options.logger.warn(
        { taskId: fence.taskId, contextId: fence.key.contextId, err: error },
        "could not release a context lease; the context stays busy until the lease expires",
      );
    }
  };

  return {
    pend(run) {
      pending.add(run);
    },
    async take(run) {
      const key = keyOf(run);
      const grant = await options.leases.tryAcquire(key, run.taskId, options.leaseTtlMs);
      if (!grant) {
        // Only to name the running task in the error: without it the answer is still CONTEXT_BUSY.
        const holder = await options.leases.holder(key).catch((error: unknown) => {
          options.logger.debug({ err: error }, "could not read the holder of a busy context lease");
          return undefined;
        });
        throw contextBusy(run.contextId, holder?.taskId ?? "");
      }
      return { fence: { key, taskId: run.taskId, token: grant.token }, grant };
    },
    hold,
    get: (run) => held.get(run),
    writeOptions(run) {
      if (pending.has(run)) {
        return {
          acquire: {
            taskId: run.taskId,
            ttlMs: options.leaseTtlMs,
            granted: (grant) => {
              pending.delete(run);
              const lease = hold(run, { key: keyOf(run), taskId: run.taskId, token: grant.token });
              options.onGranted?.(lease, grant);
            },
            busy: (holderTaskId) => contextBusy(run.contextId, holderTaskId),
          },
        };
      }
      const lease = held.get(run);
      return lease ? { fence: lease.fence } : undefined;
    },
    forget(run) {
      pending.delete(run);
      held.get(run)?.stopRenewing();
      held.delete(run);
    },
    release,
    holdsLive(key, token) {
      for (const lease of held.values()) {
        const fence = lease.fence;
        if (
          !lease.lost &&
          fence.token === token &&
          fence.key.tenant === key.tenant &&
          fence.key.contextId === key.contextId
        ) {
          return true;
        }
      }
      return false;
    },
    mayRetryEnd(run, error, attempt, failingMs) {
      const lease = held.get(run);
      if (!lease || lease.lost || lease.released || closed) return false;
      if (error instanceof StoreError && error.code === "FENCED") return false;
      // The store's own refusals are StoreErrors; everything else is the database being away.
      return error instanceof StoreError ? attempt < maxStoreTries : failingMs < keeping.outageToleranceMs;
    },
    close() {
      closed = true;
      unsubscribeCancel();
      for (const lease of held.values()) lease.stopRenewing();
    },
  };
}
