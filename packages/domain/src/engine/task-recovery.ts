import type { FencedThreadStore } from "@parley/store/backends";
import type { Logger } from "pino";
import { recoveredRecord } from "./hidden-turn.js";
import type { ReplicaCoordinator } from "./replica-coordinator.js";
import { interruptedStatus, isCutOffByLostRun } from "./task-model.js";

export interface TaskRecoveryDeps {
  readonly store: FencedThreadStore;
  readonly coordinator: ReplicaCoordinator;
  readonly logger: Logger;
}

/** Marks tasks that were running when the process last stopped as FAILED, freeing their contexts. */
export async function failInterruptedTasks(deps: TaskRecoveryDeps): Promise<number> {
  const { store, coordinator, logger } = deps;
  let failed = 0;
  for (const listed of await store.listUnfinishedTasks()) {
    if (!isCutOffByLostRun(listed.state)) continue;
    failed++;
    const why = interruptedStatus(
      "interrupted: the server process ended (a crash or a kill) while this task was running, found at restart; any partial reply was not kept",
      listed.contextId,
    );
    // A turn cut off while hidden ends as a task, made visible first so the paths below find its record.
    if (listed.hidden) await store.putTask(await recoveredRecord(store, listed));
    // Under the context's lease, so the task's event log gets its final event after what it logged.
    await coordinator.failInterrupted(listed.tenant, listed.contextId, listed.taskId, why);
  }
  if (failed > 0) logger.warn({ failed }, "marked tasks interrupted by the last shutdown as FAILED");
  return failed;
}
