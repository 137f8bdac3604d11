import { create, fromBinary } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, type ServiceImpl } from "@connectrpc/connect";
import { HistoryOrder, MessageSchema, ThreadMessageSchema, type ThreadService } from "@parley/proto";
import type { ContextLeases, StoredMessage, ThreadStore } from "@parley/store";
import type { Engine } from "../engine/engine.js";
import { contextBusy, fromStore, invalidArgument } from "../errors.js";
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

function pageSizeOf(requested: number, fallback: number, max: number): number {
  if (requested === 0) return fallback;
  if (requested < 0 || requested > max)
    throw invalidArgument(`pageSize must be between 1 and ${max}, got ${requested}`);
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
          limit: pageSizeOf(req.pageSize, 20, 100),
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
          limit: pageSizeOf(req.pageSize, 50, 500),
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
      const result = await fromStore(store.deleteThread(key));
      return { deleted: result.deleted, deletedMessageCount: BigInt(result.messageCount) };
    },
  };
}
