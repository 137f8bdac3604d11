// importThread in the LevelDB backend: the messages (with their original times), the id index, the meta and the
// thread's tasks in one batch, under the thread's lock and the tasks' locks.
import { bytesEqual, sha256, toHex } from "../core/bytes.js";
import { messageIdHash, taskHash, threadHash } from "../core/digests.js";
import { checkThreadImport, foreignTask, notEmpty } from "../core/import-checks.js";
import type { StoredMessage, TaskRecord, ThreadImport, ThreadImportResult, ThreadKey } from "../types.js";
import { type LevelContext, pointRead, readMeta, remember, threadLock } from "./level-context.js";
import { type BatchOp, key, messageKey, T_MESSAGE_ID, T_TASK } from "./level-keys.js";
import {
  decodeMessage,
  decodeMessageIdEntries,
  decodeOrCorrupt,
  decodeTask,
  encodeMessage,
  encodeMessageIdEntries,
  type LevelMeta,
  type MessageIdEntry,
  publicMeta,
} from "./level-records.js";
import { withTask } from "./level-tasks.js";
import { listedAt, threadIndexOps } from "./level-thread-writes.js";

/** Runs `write` under every task's lock (taken in one order, so two imports cannot deadlock) with all their ops. */
function withTasks<T>(
  ctx: LevelContext,
  tasks: readonly TaskRecord[],
  write: (ops: BatchOp[]) => Promise<T>,
  collected: BatchOp[] = [],
): Promise<T> {
  const [first, ...rest] = tasks;
  if (!first) return write(collected);
  return withTask(ctx, first, (ops) => withTasks(ctx, rest, write, [...collected, ...ops]));
}

export async function importThread(
  ctx: LevelContext,
  threadKey: ThreadKey,
  data: ThreadImport,
): Promise<ThreadImportResult> {
  checkThreadImport(threadKey, data);
  const { tenant, contextId } = threadKey;
  const th = threadHash(tenant, contextId);
  return ctx.locks.run(threadLock(th), async () => {
    const meta = readMeta(ctx, th, tenant, contextId);
    // The id index lists, by id key, with the entries of stored messages and those this import adds.
    const idLists = new Map<string, { key: Uint8Array; entries: MessageIdEntry[]; changed: boolean }>();
    const listOf = (messageId: string) => {
      const idKey = key(T_MESSAGE_ID, th, messageIdHash(messageId));
      const hex = toHex(idKey);
      let list = idLists.get(hex);
      if (!list) {
        list = { key: idKey, entries: [], changed: false };
        idLists.set(hex, list);
      }
      return list;
    };
    for (const m of data.messages) listOf(m.messageId);
    if (meta) {
      const lists = [...idLists.values()];
      const raws = await ctx.db.getMany(lists.map((l) => l.key));
      for (const [i, l] of lists.entries())
        l.entries.push(...decodeMessageIdEntries(l.key, raws[i], meta.lastSequence));
    }
    const added: StoredMessage[] = [];
    const matched = new Set<number>();
    let skipped = 0;
    let sequence = meta?.lastSequence ?? 0;
    for (const m of data.messages) {
      const list = listOf(m.messageId);
      const digest = sha256(m.payload);
      const same = list.entries.find((e) => {
        if (!bytesEqual(e.digest, digest)) return false;
        if (e.sequence > (meta?.lastSequence ?? 0)) return true; // added by this import: its bytes are m's
        const mk = messageKey(th, e.sequence);
        const raw = pointRead(ctx, mk);
        if (raw === undefined) return false;
        const stored = decodeOrCorrupt("message", mk, () => decodeMessage(e.sequence, raw));
        return stored.messageId === m.messageId && bytesEqual(stored.payload, m.payload);
      });
      if (same) {
        skipped += 1;
        matched.add(same.sequence);
        continue;
      }
      sequence += 1;
      list.entries.push({ sequence, digest });
      list.changed = true;
      added.push({
        sequence,
        messageId: m.messageId,
        provenance: m.provenance,
        ...(m.taskId === undefined ? {} : { taskId: m.taskId }),
        payload: m.payload.slice(),
        createdAt: m.createdAt,
      });
    }
    const foreign = meta ? meta.messageCount - [...matched].filter((s) => s <= meta.lastSequence).length : 0;
    if (data.mode === "empty" && foreign > 0 && added.length > 0) throw notEmpty(contextId, foreign);

    const newTasks: TaskRecord[] = [];
    for (const task of data.tasks) {
      const tk = key(T_TASK, taskHash(tenant, task.taskId));
      const raw = pointRead(ctx, tk);
      if (raw === undefined) {
        newTasks.push(task);
        continue;
      }
      const stored = decodeOrCorrupt("task", tk, () => decodeTask(raw));
      if (stored.contextId !== contextId) throw foreignTask(task.taskId, stored.contextId);
    }
    const result = {
      added: added.length,
      skipped,
      tasksAdded: newTasks.length,
      tasksSkipped: data.tasks.length - newTasks.length,
    };
    if (added.length === 0 && newTasks.length === 0) return meta ? { ...result, thread: publicMeta(meta) } : result;

    const ops: BatchOp[] = added.map((message) => ({
      type: "put",
      key: messageKey(th, message.sequence),
      value: encodeMessage(message),
    }));
    for (const list of idLists.values()) {
      if (list.changed) ops.push({ type: "put", key: list.key, value: encodeMessageIdEntries(list.entries) });
    }
    let next: LevelMeta | undefined = meta;
    if (added.length > 0) {
      // The thread's own times are the import's: an imported thread was active now (retention counts from here).
      const updatedAt = Math.max(ctx.now(), meta?.updatedAt ?? 0);
      next = {
        tenant,
        contextId,
        createdAt: meta?.createdAt ?? updatedAt,
        updatedAt,
        messageCount: (meta?.messageCount ?? 0) + added.length,
        lastSequence: sequence,
        listedAt: listedAt(meta, updatedAt),
      };
      ops.push(...threadIndexOps(ctx, th, meta, next));
    }
    const sorted = [...newTasks].sort((a, b) => (a.taskId < b.taskId ? -1 : a.taskId > b.taskId ? 1 : 0));
    remember(ctx, th, undefined);
    await withTasks(ctx, sorted, (taskOps) => ctx.write([...ops, ...taskOps]));
    if (next) remember(ctx, th, next);
    return next ? { ...result, thread: publicMeta(next) } : result;
  });
}
