import { threadDigest } from "../core/digests.js";
import { fencedError } from "../core/fences.js";
import { checkTtl } from "../core/lease-checks.js";
import { RecentMap } from "../core/recent-map.js";
import type { ContextLeases, ExpiredLease, Fence, LeaseGrant, LeaseHolder, RenewResult } from "../replica-types.js";
import { StoreError, type ThreadKey } from "../types.js";

export interface LevelLeasesOptions {
  /** A monotonic clock in milliseconds; performance.now by default, so wall-clock jumps never end a lease. */
  readonly now?: () => number;
}

interface Lease {
  readonly key: ThreadKey;
  taskId: string;
  token: number;
  /** -Infinity once released, so the token survives for the next grant. */
  expiresAt: number;
  cancelRequested: boolean;
}

/**
 * In-process leases of the LevelDB backend, with the synchronous checks its fenced writes rely on. The server
 * runs the same lease and event-log code on both backends, so a LevelDB server numbers and keeps task events
 * exactly as PostgreSQL replicas do.
 */
export interface LevelLeases extends ContextLeases {
  /** Decides at once, in call order: exactly one of many concurrent callers wins a free context. */
  tryAcquireSync(key: ThreadKey, taskId: string, ttlMs: number): LeaseGrant | null;
  /** Throws StoreError FENCED unless the fence is the live lease of its context. */
  check(fence: Fence): void;
  /** True when no task holds the context: no lease, or one that was released (not one that merely expired). */
  isFree(key: ThreadKey): boolean;
}

/**
 * The single-process lease table of the LevelDB backend. A LevelDB directory
 * has exactly one owning process, so this map is the whole truth; it keeps
 * the same contract (tokens, expiry, fencing, takeover) as the shared one.
 */
/**
 * Released leases remembered for their tokens, at least this many and at most twice as many; older ones are
 * forgotten (see `tokenFloor`).
 */
const REMEMBERED_RELEASED = 10_000;

export function createLevelLeases(options: LevelLeasesOptions = {}): LevelLeases {
  const now = options.now ?? (() => performance.now());
  const leases = new Map<string, Lease>();
  /** Leases not released (live or expired): all that expired() has to look at. */
  const held = new Set<Lease>();
  /**
   * The highest token of a forgotten lease. A context seen again starts above it, so a
   * fence of any earlier holder stays stale, while the table does not keep an entry for
   * every context this process ever ran (one per fresh contextId).
   */
  let tokenFloor = 0;
  /**
   * Released leases by slot, forgotten a generation at a time (RecentMap): forgetting the single oldest on every
   * release walked V8's deleted-entry holes at the front of one insertion-ordered map (see RecentMap).
   */
  const released = new RecentMap<string, Lease>(REMEMBERED_RELEASED, (id, lease) => {
    leases.delete(id);
    if (lease.token > tokenFloor) tokenFloor = lease.token;
  });
  const cancelHandlers = new Set<(key: ThreadKey, taskId: string) => void>();
  let closed = false;

  const open = (name: string) => {
    if (closed) throw new StoreError("CLOSED", `${name} called after the in-process leases were closed`);
  };
  const live = (lease: Lease | undefined): boolean => lease !== undefined && lease.expiresAt > now();
  // A run's fence carries the same (readonly) key object into every check and write of the run: hash it once.
  const slots = new WeakMap<ThreadKey, string>();
  const slot = (key: ThreadKey) => {
    let id = slots.get(key);
    if (id === undefined) {
      id = threadDigest(key.tenant, key.contextId);
      slots.set(key, id);
    }
    return id;
  };
  const current = (fence: Fence) => {
    const lease = leases.get(slot(fence.key));
    return lease && live(lease) && lease.token === fence.token ? lease : undefined;
  };

  const tryAcquireSync = (key: ThreadKey, taskId: string, ttlMs: number): LeaseGrant | null => {
    open("tryAcquire");
    checkTtl(ttlMs);
    const id = slot(key);
    const lease = leases.get(id);
    if (live(lease)) return null;
    const expiresAt = now() + ttlMs;
    if (!lease) {
      const fresh: Lease = {
        key: { tenant: key.tenant, contextId: key.contextId },
        taskId,
        token: tokenFloor + 1,
        expiresAt,
        cancelRequested: false,
      };
      leases.set(id, fresh);
      held.add(fresh);
      return { key, taskId, token: fresh.token };
    }
    released.delete(id);
    held.add(lease);
    const orphan =
      lease.expiresAt === Number.NEGATIVE_INFINITY ? undefined : { taskId: lease.taskId, token: lease.token };
    lease.taskId = taskId;
    lease.token += 1;
    lease.expiresAt = expiresAt;
    lease.cancelRequested = false;
    return orphan ? { key, taskId, token: lease.token, orphan } : { key, taskId, token: lease.token };
  };

  return {
    tryAcquireSync,
    check(fence: Fence): void {
      open("a fenced write");
      if (!current(fence)) {
        throw fencedError(fence);
      }
    },
    async tryAcquire(key, taskId, ttlMs) {
      return tryAcquireSync(key, taskId, ttlMs);
    },
    isFree(key: ThreadKey): boolean {
      open("isFree");
      const lease = leases.get(slot(key));
      return lease === undefined || lease.expiresAt === Number.NEGATIVE_INFINITY;
    },
    async renew(fence, ttlMs): Promise<RenewResult> {
      open("renew");
      checkTtl(ttlMs);
      // A lease that lapsed but that nobody acquired or took over still carries this token: renewing it is
      // safe (no newer fence exists), as PostgreSQL's renew does after an outage.
      const lease = leases.get(slot(fence.key));
      if (!lease || lease.token !== fence.token || lease.expiresAt === Number.NEGATIVE_INFINITY) {
        return { held: false, cancelRequested: false };
      }
      lease.expiresAt = now() + ttlMs;
      return { held: true, cancelRequested: lease.cancelRequested };
    },
    async release(fence) {
      open("release");
      const lease = current(fence);
      if (!lease) return false;
      lease.expiresAt = Number.NEGATIVE_INFINITY;
      held.delete(lease);
      released.set(slot(fence.key), lease);
      return true;
    },
    async holder(key): Promise<LeaseHolder | undefined> {
      open("holder");
      const lease = leases.get(slot(key));
      return lease && live(lease) ? { taskId: lease.taskId, token: lease.token } : undefined;
    },
    async expired(limit): Promise<ExpiredLease[]> {
      open("expired");
      const t = now();
      return [...held]
        .filter((l) => l.expiresAt <= t)
        .sort((a, b) => a.expiresAt - b.expiresAt)
        .slice(0, limit)
        .map((l) => ({ key: l.key, taskId: l.taskId, token: l.token }));
    },
    async takeOver(expired, ttlMs) {
      open("takeOver");
      checkTtl(ttlMs);
      const lease = leases.get(slot(expired.key));
      if (!lease || live(lease) || lease.token !== expired.token || lease.expiresAt === Number.NEGATIVE_INFINITY) {
        return null;
      }
      lease.token += 1;
      lease.expiresAt = now() + ttlMs;
      lease.cancelRequested = false;
      return { key: lease.key, taskId: lease.taskId, token: lease.token };
    },
    async requestCancel(key, taskId) {
      open("requestCancel");
      const lease = leases.get(slot(key));
      if (!lease || !live(lease) || lease.taskId !== taskId) return false;
      lease.cancelRequested = true;
      for (const handler of cancelHandlers) {
        try {
          handler(lease.key, taskId);
        } catch {
          // A handler's failure is its own; the cancel stays recorded for the holder's next renewal.
        }
      }
      return true;
    },
    onCancel(handler) {
      cancelHandlers.add(handler);
      return () => cancelHandlers.delete(handler);
    },
    async close() {
      closed = true;
      cancelHandlers.clear();
    },
  };
}
