import { checkFenceFor } from "../core/fences.js";
import type {
  AppendInput,
  AppendResult,
  FencedThreadStore,
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
  ThreadStore,
  WriteOptions,
} from "../types.js";
import type { LevelLeases } from "./level-leases.js";

/**
 * Fences a single-process store with the in-process lease table. The check
 * runs synchronously right before the write is issued: with one process there
 * is no other holder that could take the lease over while the write is in
 * flight, so checking then writing is as strong as checking inside the batch.
 */
export function fenceLevelStore(store: ThreadStore, leases: LevelLeases): FencedThreadStore {
  const checkFence = (options: WriteOptions | undefined, tenant: string, contextId: string) => {
    const fence = options?.fence;
    if (!fence) return;
    checkFenceFor(fence, tenant, contextId);
    leases.check(fence);
  };
  return {
    async append(key: ThreadKey, input: AppendInput, task?: TaskRecord, options?: WriteOptions): Promise<AppendResult> {
      checkFence(options, key.tenant, key.contextId);
      return store.append(key, input, task);
    },
    async putTask(task: TaskRecord, options?: WriteOptions): Promise<void> {
      checkFence(options, task.tenant, task.contextId);
      return store.putTask(task);
    },
    tail: (key: ThreadKey, count: number) => store.tail(key, count),
    readMessages: (
      key: ThreadKey,
      options: { readonly order: PageOrder; readonly limit: number; readonly cursor?: string },
    ): Promise<MessagePage> => store.readMessages(key, options),
    getThread: (key: ThreadKey): Promise<ThreadMeta | undefined> => store.getThread(key),
    listThreads: (tenant: string, options: { readonly limit: number; readonly cursor?: string }): Promise<ThreadPage> =>
      store.listThreads(tenant, options),
    deleteThread: (key: ThreadKey) => store.deleteThread(key),
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
