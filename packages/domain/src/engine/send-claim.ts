import { TaskState } from "@parley/proto";
import type { FencedThreadStore } from "@parley/store/backends";
import type { Logger } from "pino";
import { storeFailure } from "../errors.js";
import type { ReplicaCoordinator } from "./replica-coordinator.js";
import type { RunTable } from "./run-table.js";
import { setStatus, taskRecord } from "./task-model.js";
import type { TaskRun } from "./task-run.js";

/** What a turn holds of its context once its send handed it over: the turn's end releases it. */
export interface TurnHold {
  readonly run: TaskRun;
  /** Frees the busy guard once the outcome is stored; a send that follows waits for end (TaskRun.settled). */
  leave(): void;
  /** Frees the guard if still held, then the lease once the run's events are durable, and ends the run. Once. */
  end(): Promise<void>;
}

/**
 * A send's hold on its context, taken with the busy guard: then the lease, then the stored task. `hold` runs
 * the send's setup and, however that ends, releases what the send still holds, once; what it handed to the
 * turn (`handOver`) the turn's end releases instead.
 */
export interface SendClaim {
  readonly run: TaskRun;
  /** Waits for the context's previous run to make its end durable, then takes the lease across replicas. */
  lease(continued: boolean): Promise<void>;
  /** The task is stored: the run is listed, and a failure before its turn starts ends it FAILED. */
  stored(): void;
  /** The turn starts: from now on only its end releases the claim. Refused once the claim was released. */
  handOver(): TurnHold;
  hold<T>(setup: () => Promise<T>): Promise<T>;
}

export interface SendClaimDeps {
  readonly table: RunTable;
  readonly store: FencedThreadStore;
  readonly coordinator: ReplicaCoordinator;
  readonly logger: Logger;
}

/** Takes the context's busy guard for `run` at once (synchronously, so concurrent sends see it). */
export function createSendClaim(deps: SendClaimDeps, run: TaskRun): SendClaim {
  const { table, store, coordinator, logger } = deps;
  table.guard(run);
  let phase: "claimed" | "stored" | "turn" | "released" = "claimed";
  let ending: Promise<void> | undefined;

  const leave = () => table.leave(run);
  const end = (): Promise<void> => {
    ending ??= (async () => {
      leave();
      try {
        await coordinator.finish(run);
      } catch (error) {
        logger.error({ taskId: run.taskId, err: error }, "could not free the context of a task");
      } finally {
        run.end();
      }
    })();
    return ending;
  };

  /** A stored task whose turn did not start: it ends FAILED, so it does not stay SUBMITTED. */
  const failStored = async (failure: unknown): Promise<void> => {
    const why = failure instanceof Error ? failure.message : String(failure);
    setStatus(run.task, TaskState.FAILED, `the task could not start: ${why}`);
    await store.putTask(taskRecord(run.tenant, run.task), coordinator.writeOptions(run)).catch((cause: unknown) => {
      logger.error({ taskId: run.taskId, err: cause }, "could not record a task that failed to start");
    });
    await end();
  };

  /** Nothing was stored: the guard and the lease (if taken) are freed; a send that follows waits for this. */
  const unclaim = async (): Promise<void> => {
    leave();
    try {
      await coordinator.release(run);
    } catch (error) {
      logger.error({ taskId: run.taskId, err: error }, "could not free the lease of a send that failed");
    } finally {
      run.end();
    }
  };

  const release = (failed: boolean, failure: unknown): Promise<void> | undefined => {
    const was = phase;
    if (was === "turn" || was === "released") return undefined;
    phase = "released";
    if (was === "claimed") return unclaim();
    return failStored(failed ? failure : new Error("its turn never started"));
  };

  return {
    run,
    async lease(continued) {
      await table.previousEnded(run);
      try {
        // Across replicas the local guard only holds this process; the coordinator's lease decides.
        await coordinator.acquire(run, continued);
      } catch (error) {
        throw storeFailure(error);
      }
    },
    stored() {
      table.add(run);
      if (phase === "claimed") phase = "stored";
    },
    handOver() {
      if (phase === "released") throw new Error(`task ${run.taskId} was released before its turn started`);
      phase = "turn";
      return { run, leave, end };
    },
    async hold(setup) {
      let failed = false;
      let failure: unknown;
      try {
        return await setup();
      } catch (error) {
        failed = true;
        failure = error;
        throw error;
      } finally {
        await release(failed, failure);
      }
    },
  };
}
