import { threadDigest } from "../level-thread-store.js";
import {
  type ContextLeases,
  type ExpiredLease,
  type Fence,
  type LeaseGrant,
  type LeaseHolder,
  type RenewResult,
  StoreError,
  type ThreadKey,
} from "../types.js";
import { checkTtl } from "./ttl.js";

export interface MemoryLeasesOptions {
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

/** In-process leases, with the synchronous checks the LevelDB fast path relies on. */
export interface MemoryLeases extends ContextLeases {
  /** Decides at once, in call order: exactly one of many concurrent callers wins a free context. */
  tryAcquireSync(key: ThreadKey, taskId: string, ttlMs: number): LeaseGrant | null;
  /** Throws StoreError FENCED unless the fence is the live lease of its context. */
  check(fence: Fence): void;
}

/**
 * The single-process lease table of the LevelDB backend. A LevelDB directory
 * has exactly one owning process, so this map is the whole truth; it keeps
 * the same contract (tokens, expiry, fencing, takeover) as the shared one.
 */
export function createMemoryLeases(options: MemoryLeasesOptions = {}): MemoryLeases {
  const now = options.now ?? (() => performance.now());
  const leases = new Map<string, Lease>();
  const cancelHandlers = new Set<(key: ThreadKey, taskId: string) => void>();
  let closed = false;

  const open = (name: string) => {
    if (closed) throw new StoreError("CLOSED", `${name} called after the in-process leases were closed`);
  };
  const live = (lease: Lease | undefined): boolean => lease !== undefined && lease.expiresAt > now();
  const slot = (key: ThreadKey) => threadDigest(key.tenant, key.contextId);
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
      leases.set(id, {
        key: { tenant: key.tenant, contextId: key.contextId },
        taskId,
        token: 1,
        expiresAt,
        cancelRequested: false,
      });
      return { key, taskId, token: 1 };
    }
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
        throw new StoreError(
          "FENCED",
          `lease token ${fence.token} of task ${fence.taskId} is no longer the live lease of context ${JSON.stringify(fence.key.contextId)}`,
        );
      }
    },
    async tryAcquire(key, taskId, ttlMs) {
      return tryAcquireSync(key, taskId, ttlMs);
    },
    async renew(fence, ttlMs): Promise<RenewResult> {
      open("renew");
      checkTtl(ttlMs);
      const lease = current(fence);
      if (!lease) return { held: false, cancelRequested: false };
      lease.expiresAt = now() + ttlMs;
      return { held: true, cancelRequested: lease.cancelRequested };
    },
    async release(fence) {
      open("release");
      const lease = current(fence);
      if (!lease) return false;
      lease.expiresAt = Number.NEGATIVE_INFINITY;
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
      return [...leases.values()]
        .filter((l) => l.expiresAt !== Number.NEGATIVE_INFINITY && l.expiresAt <= t)
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
