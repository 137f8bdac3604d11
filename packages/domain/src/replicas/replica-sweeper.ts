import type { ThreadKey } from "@parley/store";
import type { ContextLeases, Fence, TaskEventLog } from "@parley/store/backends";
import type { Logger } from "pino";

export interface ReplicaSweeperOptions {
  readonly leases: ContextLeases;
  readonly events: TaskEventLog;
  readonly logger: Logger;
  readonly leaseTtlMs: number;
  /** How often this replica looks for expired leases to take over. */
  readonly sweepIntervalMs: number;
  /** How long the event log of a finished task stays resumable. */
  readonly eventRetentionMs: number;
  /** Whether a lease is held by a live run of this replica: its renewer renews it, so it is never judged lost here. */
  readonly holdsLive: (key: ThreadKey, token: number) => boolean;
  /** Ends the task of a lease taken over, under the new fence (TaskEndings.endLost). */
  readonly endLost: (key: ThreadKey, taskId: string, fence: Fence) => Promise<void>;
  /** Frees a lease taken over once its task is ended; must not throw. */
  readonly release: (fence: Fence) => Promise<void>;
  /** Called for each expired lease this replica took over. */
  readonly onTakeover?: () => void;
  /** Called at every tick, beside the lease sweep (not awaited by it). */
  readonly onSweep?: () => void;
}

/** The periodic pass that ends the tasks of replicas that died, and prunes the event logs of finished tasks. */
export interface ReplicaSweeper {
  /** One pass: takes expired leases over, ends their tasks and frees their contexts; how many tasks it ended. */
  sweep(): Promise<number>;
  /** This replica saw the database fail: once it is back, takeovers wait one lease lifetime. */
  sawOutage(): void;
  close(): void;
}

export function createReplicaSweeper(options: ReplicaSweeperOptions): ReplicaSweeper {
  const { leases, logger, leaseTtlMs } = options;
  let sweeping = false;
  // -Infinity: the first pass prunes the event logs.
  let lastEventSweep = Number.NEGATIVE_INFINITY;
  /** Set when this replica saw the database fail; the next successful pass starts the hold-off below. */
  let outageSeen = false;
  /**
   * No expired lease is taken over before this time: after an outage every holder's lease may have lapsed only
   * because nobody could renew, so the holders get one lease lifetime to renew before they are judged lost.
   */
  let holdOffUntil = Number.NEGATIVE_INFINITY;

  const sweep = async (): Promise<number> => {
    if (sweeping) return 0;
    sweeping = true;
    let ended = 0;
    try {
      const expired = await leases.expired(20);
      if (outageSeen) {
        // The database is back: leases that lapsed while it was away say nothing about their holders yet.
        outageSeen = false;
        holdOffUntil = Date.now() + leaseTtlMs;
        logger.warn(
          { holdOffMs: leaseTtlMs },
          "the database is reachable again; expired leases are left to their holders for one lease lifetime",
        );
      }
      for (const lease of Date.now() < holdOffUntil ? [] : expired) {
        if (options.holdsLive(lease.key, lease.token)) continue;
        const fence = await leases.takeOver(lease, leaseTtlMs);
        if (!fence) continue;
        options.onTakeover?.();
        try {
          await options.endLost(lease.key, lease.taskId, fence);
          ended++;
        } finally {
          await options.release(fence);
        }
      }
      if (Date.now() - lastEventSweep > options.eventRetentionMs / 10) {
        lastEventSweep = Date.now();
        await options.events.sweep(options.eventRetentionMs);
      }
    } catch (error) {
      outageSeen = true;
      logger.warn({ err: error }, "lease sweep failed; retrying on the next tick");
    } finally {
      sweeping = false;
    }
    return ended;
  };

  const timer = setInterval(() => {
    void sweep();
    // Not awaited by the lease sweep: a long retention pass must not delay the takeover of a dead replica's tasks.
    options.onSweep?.();
  }, options.sweepIntervalMs);
  timer.unref();

  return {
    sweep,
    sawOutage() {
      outageSeen = true;
    },
    close() {
      clearInterval(timer);
    },
  };
}
