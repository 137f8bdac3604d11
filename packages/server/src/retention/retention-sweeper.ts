// Runs the retention policy from the lease sweeper's timer: one pass at a time, every retention.intervalMs.
import type { ThreadKey, ThreadRetention } from "@parley/store";
import type { Logger } from "../logger.js";
import type { ParleyMetrics } from "../observability/metrics.js";
import { type RetentionPolicy, retentionQuery } from "./retention-policy.js";

/** What one pass deleted. */
export interface RetentionTotals {
  readonly threads: number;
  readonly messages: number;
  readonly tasks: number;
  readonly skipped: number;
}

export interface RetentionSweeper {
  /** Called at every tick of the lease sweeper: starts a pass when one is due and none is running. */
  tick(): void;
  /** Runs a pass now (or joins the running one) and resolves with what it deleted. */
  run(): Promise<RetentionTotals>;
  /** Lets a running pass finish its current batch, then stops. */
  close(): Promise<void>;
}

export interface RetentionSweeperOptions {
  readonly retention: ThreadRetention;
  readonly policy: RetentionPolicy;
  readonly intervalMs: number;
  /** The clock the idle times are measured with; tests move it instead of waiting for days. */
  readonly now: () => number;
  /** The engine's busy guard: a context with a send in flight is never deleted. */
  readonly busy: (key: ThreadKey) => boolean;
  readonly logger: Logger;
  readonly metrics?: ParleyMetrics;
}

/** Threads one store call deletes; a pass makes calls until nothing is due. */
const BATCH = 100;

export function createRetentionSweeper(options: RetentionSweeperOptions): RetentionSweeper {
  const { retention, policy, logger, metrics } = options;
  let running: Promise<RetentionTotals> | undefined;
  let lastStart = Number.NEGATIVE_INFINITY;
  let closing = false;

  async function pass(): Promise<RetentionTotals> {
    const started = performance.now();
    const query = retentionQuery(policy, options.now(), BATCH, options.busy);
    const totals = { threads: 0, messages: 0, tasks: 0, skipped: 0 };
    try {
      for (;;) {
        const batch = await retention.purgeIdleThreads(query);
        metrics?.retentionDeleted({ ...batch, skipped: 0 });
        totals.threads += batch.threads;
        totals.messages += batch.messages;
        totals.tasks += batch.tasks;
        // Busy threads are met again by every batch of the pass: counted once, from the last batch.
        totals.skipped = batch.skipped;
        if (!batch.more || closing) break;
      }
      metrics?.retentionDeleted({ threads: 0, messages: 0, tasks: 0, skipped: totals.skipped });
      metrics?.retentionRun("ok", (performance.now() - started) / 1000, options.now());
      if (totals.threads > 0 || totals.skipped > 0) {
        logger.info(totals, `retention deleted ${totals.threads} idle threads (${totals.skipped} busy ones kept)`);
      }
      return totals;
    } catch (error) {
      metrics?.retentionRun("error", (performance.now() - started) / 1000, options.now());
      logger.warn({ err: error, ...totals }, "retention pass failed; the next one goes on where it stopped");
      throw error;
    }
  }

  function run(): Promise<RetentionTotals> {
    if (running) return running;
    lastStart = options.now();
    const current = pass().finally(() => {
      running = undefined;
    });
    running = current;
    return current;
  }

  return {
    tick() {
      if (!policy.enabled || closing || running) return;
      // Compared both ways, so a clock moved back (tests, NTP) does not stop the passes.
      const since = options.now() - lastStart;
      if (since >= 0 && since < options.intervalMs) return;
      run().catch(() => {
        // Logged and counted by pass(); the next due tick retries.
      });
    },
    run,
    async close() {
      closing = true;
      await running?.catch(() => {});
    },
  };
}
