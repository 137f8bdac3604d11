import { create, fromBinary } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, type ServiceImpl } from "@connectrpc/connect";
import type { Engine } from "@parley/domain";
import { contextBusy, invalidArgument, storeFailure } from "@parley/domain";
import { fromStore } from "@parley/domain/internal";
import { HistoryOrder, MessageSchema, ThreadMessageSchema, type ThreadService } from "@parley/proto";
import { type StoredMessage, StoreError, type ThreadStore } from "@parley/store";
import type { ContextLeases } from "@parley/store/backends";
import { callerOf } from "../interceptors/caller-interceptor.js";
import { createThreadTransfer } from "./thread-transfer.js";
import { provenances, threadFromMeta } from "./thread-wire.js";

function threadMessage(contextId: string, stored: StoredMessage) {
  const message = fromBinary(MessageSchema, stored.payload);
  message.contextId = contextId;
  if (stored.taskId !== undefined) message.taskId = stored.taskId;
  return create(ThreadMessageSchema, {
    sequence: BigInt(stored.sequence),
    message,
    createTime: timestampFromMs(stored.createdAt),
    provenance: provenances[stored.provenance],
  });
}

/**
 * The page size of a list RPC: 0 takes the default; above the documented maximum (ListThreads 100,
 * GetThreadHistory 500) the request is refused, never cut short, so a caller always pages on next_page_token.
 */
function pageSizeOf(rpc: string, requested: number, fallback: number, max: number): number {
  if (requested === 0) return fallback;
  if (requested < 0 || requested > max) {
    throw invalidArgument(
      `${rpc} page_size must be between 1 and ${max} (the server's maximum page size; 0 = ${fallback}), got ${requested}: ask for at most ${max} and follow next_page_token`,
    );
  }
  return requested;
}

function requireContextId(contextId: string): string {
  if (contextId === "") throw invalidArgument("contextId is required");
  return contextId;
}

export function createThreadServiceImpl(deps: {
  store: ThreadStore;
  engine: Engine;
  /** The backend's context leases, for the busy guard of export and import across replicas. */
  leases?: ContextLeases;
}): ServiceImpl<typeof ThreadService> {
  const { store, engine } = deps;
  return {
    ...createThreadTransfer(deps),
    async listThreads(req, ctx) {
      const tenant = callerOf(ctx).tenant;
      const page = await fromStore(
        store.listThreads(tenant, {
          limit: pageSizeOf("ListThreads", req.pageSize, 20, 100),
          ...(req.pageToken !== "" ? { cursor: req.pageToken } : {}),
        }),
      );
      return { threads: page.threads.map(threadFromMeta), nextPageToken: page.nextCursor ?? "" };
    },

    async getThreadHistory(req, ctx) {
      const key = { tenant: callerOf(ctx).tenant, contextId: requireContextId(req.contextId) };
      const meta = await fromStore(store.getThread(key));
      if (!meta)
        throw new ConnectError(`no conversation with contextId ${JSON.stringify(req.contextId)}`, Code.NotFound);
      const page = await fromStore(
        store.readMessages(key, {
          order: req.order === HistoryOrder.OLDEST_FIRST ? "oldest-first" : "newest-first",
          limit: pageSizeOf("GetThreadHistory", req.pageSize, 50, 500),
          ...(req.pageToken !== "" ? { cursor: req.pageToken } : {}),
        }),
      );
      return {
        thread: threadFromMeta(meta),
        messages: page.messages.map((m) => threadMessage(meta.contextId, m)),
        nextPageToken: page.nextCursor ?? "",
      };
    },

    async deleteThread(req, ctx) {
      const key = { tenant: callerOf(ctx).tenant, contextId: requireContextId(req.contextId) };
      const running = engine.busyRun(key.tenant, key.contextId);
      if (running) throw contextBusy(key.contextId, running.taskId, "delete it");
      // Everything of the thread goes (messages, tasks, their push configs and event logs, sessions), in the
      // store's one purge; a task running on this replica (busy guard) or any other (the lease) refuses it.
      const busy = (k: { tenant: string; contextId: string }) => engine.busyRun(k.tenant, k.contextId) !== undefined;
      try {
        const result = await store.deleteThread(key, { busy });
        return {
          deleted: result.deleted,
          deletedMessageCount: BigInt(result.messageCount),
          deletedTaskCount: BigInt(result.tasks),
          deletedSessionCount: BigInt(result.conversations),
        };
      } catch (error) {
        if (error instanceof StoreError && error.code === "BUSY") {
          const holder = await deps.leases?.holder(key).catch(() => undefined);
          throw contextBusy(
            key.contextId,
            holder?.taskId ?? engine.busyRun(key.tenant, key.contextId)?.taskId ?? "",
            "delete it",
          );
        }
        throw storeFailure(error);
      }
    },
  };
}
