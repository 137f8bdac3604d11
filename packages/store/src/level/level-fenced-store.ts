import { checkFenceFor } from "../core/fences.js";
import type { FencedThreadStore, WriteOptions } from "../replica-types.js";
import type {
  AppendInput,
  AppendResult,
  DeleteThreadOptions,
  ListTasksQuery,
  MessagePage,
  PageOrder,
  PushConfigRecord,
  TaskPage,
  TaskRecord,
  ThreadImport,
  ThreadKey,
  ThreadMeta,
  ThreadPage,
} from "../types.js";
import type { LevelEventLog, PreparedEvents } from "./level-event-log.js";
import type { LevelLeases } from "./level-leases.js";
import type { LevelThreadStore } from "./level-thread-store.js";

/**
 * Fences a single-process store with the in-process lease table. The check
 * runs synchronously right before the write is issued: with one process there
 * is no other holder that could take the lease over while the write is in
 * flight, so checking then writing is as strong as checking inside the batch.
 */
export function fenceLevelStore(
  store: LevelThreadStore,
  leases: LevelLeases,
  events: LevelEventLog,
): FencedThreadStore {
  /** Checks the fence; with WriteOptions.events, the event log's ops to write in the same batch. */
  const checkFence = (
    options: WriteOptions | undefined,
    tenant: string,
    contextId: string,
  ): PreparedEvents | undefined => {
    const fence = options?.fence;
    if (!fence) {
      if (options?.events) throw new RangeError("WriteOptions.events needs a fence (the events' task and lease)");
      return undefined;
    }
    checkFenceFor(fence, tenant, contextId);
    leases.check(fence);
    const logged = options?.events;
    return logged && logged.length > 0 ? events.prepare(tenant, fence.taskId, logged, fence) : undefined;
  };
  return {
    writesEvents: true,
    async append(key: ThreadKey, input: AppendInput, task?: TaskRecord, options?: WriteOptions): Promise<AppendResult> {
      const prepared = checkFence(options, key.tenant, key.contextId);
      const result = await store.append(key, input, task, prepared?.ops);
      if (prepared && result.duplicate) {
        // A retry writes nothing, its events included: they are appended on their own.
        await events.append(key.tenant, options!.fence!.taskId, options!.events!, options!.fence!);
      } else prepared?.landed();
      return result;
    },
    async putTask(task: TaskRecord, options?: WriteOptions): Promise<void> {
      const prepared = checkFence(options, task.tenant, task.contextId);
      await store.putTask(task, prepared?.ops);
      prepared?.landed();
    },
    tail: (key: ThreadKey, count: number) => store.tail(key, count),
    readMessages: (
      key: ThreadKey,
      options: { readonly order: PageOrder; readonly limit: number; readonly cursor?: string },
    ): Promise<MessagePage> => store.readMessages(key, options),
    getThread: (key: ThreadKey): Promise<ThreadMeta | undefined> => store.getThread(key),
    listThreads: (tenant: string, options: { readonly limit: number; readonly cursor?: string }): Promise<ThreadPage> =>
      store.listThreads(tenant, options),
    deleteThread: (key: ThreadKey, options?: DeleteThreadOptions) =>
      store.deleteThread(key, options, {
        leaseFree: (k) => leases.isFree(k),
        forgetTask: (t, id) => events.forget(t, id),
      }),
    sweepThreads: (olderThanMs: number) => store.sweepThreads(olderThanMs),
    importThread: (key: ThreadKey, data: ThreadImport) => store.importThread(key, data),
    getTask: (tenant: string, taskId: string) => store.getTask(tenant, taskId),
    listTasks: (tenant: string, query: ListTasksQuery): Promise<TaskPage> => store.listTasks(tenant, query),
    listUnfinishedTasks: () => store.listUnfinishedTasks(),
    putPushConfig: (config: PushConfigRecord) => store.putPushConfig(config),
    getPushConfig: (tenant: string, taskId: string, configId: string) => store.getPushConfig(tenant, taskId, configId),
    listPushConfigs: (tenant: string, taskId: string, options: { readonly limit: number; readonly cursor?: string }) =>
      store.listPushConfigs(tenant, taskId, options),
    deletePushConfig: (tenant: string, taskId: string, configId: string) =>
      store.deletePushConfig(tenant, taskId, configId),
    close: () => store.close(),
  };
}
