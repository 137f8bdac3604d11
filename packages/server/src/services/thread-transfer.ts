// ExportThread and ImportThread: a conversation as the records of the parley.thread format, out and back in,
// losslessly (every stored field of every message and task) and idempotently.
import { create, fromBinary, type MessageInitShape, toBinary } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, type ServiceImpl } from "@connectrpc/connect";
import type { Engine } from "@parley/domain";
import { contextBusy, invalidArgument } from "@parley/domain";
import { fromStore } from "@parley/domain/internal";
import {
  type ExportedMessage,
  type ExportedTask,
  type ExportThreadResponse,
  ExportThreadResponseSchema,
  MessageSchema,
  type Provenance,
  TaskSchema,
  type ThreadRecord,
  type ThreadRecordSchema,
  type ThreadService,
} from "@parley/proto";
import type {
  ImportedMessage,
  Provenance as StoredProvenance,
  TaskRecord,
  ThreadKey,
  ThreadStore,
} from "@parley/store";
import type { ContextLeases } from "@parley/store/backends";
import { callerOf } from "../interceptors/caller-interceptor.js";
import { provenances, threadFromMeta } from "./thread-wire.js";

/** The format name and version written in every header; an importer refuses any other. */
export const threadFormat = { name: "parley.thread", version: 1 } as const;

const PAGE = 500;

const storedProvenance = new Map<Provenance, StoredProvenance>(
  Object.entries(provenances).map(([name, code]) => [code, name as StoredProvenance]),
);

/** The time of a Timestamp in whole milliseconds; the store keeps milliseconds, so finer times are refused. */
function millis(at: { seconds: bigint; nanos: number } | undefined, what: string): number {
  if (!at) throw invalidArgument(`${what} is required`);
  if (at.nanos % 1_000_000 !== 0) throw invalidArgument(`${what} must be whole milliseconds`);
  const ms = Number(at.seconds) * 1000 + at.nanos / 1_000_000;
  if (!Number.isSafeInteger(ms) || ms < 0) throw invalidArgument(`${what} must be at or after 1970-01-01`);
  return ms;
}

function record(value: MessageInitShape<typeof ThreadRecordSchema>["record"]): ExportThreadResponse {
  return create(ExportThreadResponseSchema, { record: { record: value } });
}

export function createThreadTransfer(deps: {
  store: ThreadStore;
  engine: Engine;
  /** The backend's context leases: a task running on another replica holds one. */
  leases?: ContextLeases;
}): Pick<ServiceImpl<typeof ThreadService>, "exportThread" | "importThread"> {
  const { store, engine, leases } = deps;
  /**
   * The busy guard of export and import: a task running here (the engine's
   * guard) or on any replica (its live lease). This is a check, not a hold: a
   * send that starts during an import lands in the store's order; in the
   * default mode the import then refuses (the thread holds a message the file
   * does not carry), with --append its messages follow the import's.
   */
  async function refuseBusy(key: ThreadKey, doing: string): Promise<void> {
    const running = engine.busyRun(key.tenant, key.contextId);
    if (running) throw contextBusy(key.contextId, running.taskId, doing);
    const holder = leases ? await fromStore(leases.holder(key)) : undefined;
    if (holder) throw contextBusy(key.contextId, holder.taskId, doing);
  }
  return {
    async *exportThread(req, ctx) {
      if (req.contextId === "") throw invalidArgument("contextId is required");
      const key = { tenant: callerOf(ctx).tenant, contextId: req.contextId };
      // A snapshot of a conversation in the middle of a turn would hold a task that no executor owns once imported.
      await refuseBusy(key, "export it");
      const meta = await fromStore(store.getThread(key));
      if (!meta)
        throw new ConnectError(`no conversation with contextId ${JSON.stringify(req.contextId)}`, Code.NotFound);
      yield record({
        case: "header",
        value: {
          format: threadFormat.name,
          version: threadFormat.version,
          source: { software: "parley", messageSchema: "lf.a2a.v1.Message" },
          contextId: meta.contextId,
          exportTime: timestampFromMs(Date.now()),
        },
      });
      let messageCount = 0n;
      let cursor: string | undefined;
      do {
        const page = await fromStore(
          store.readMessages(key, { order: "oldest-first", limit: PAGE, ...(cursor ? { cursor } : {}) }),
        );
        for (const stored of page.messages) {
          const message = fromBinary(MessageSchema, stored.payload);
          message.contextId = meta.contextId;
          if (stored.taskId !== undefined) message.taskId = stored.taskId;
          messageCount += 1n;
          yield record({
            case: "message",
            value: {
              sequence: BigInt(stored.sequence),
              messageId: stored.messageId,
              provenance: provenances[stored.provenance],
              taskId: stored.taskId ?? "",
              createTime: timestampFromMs(stored.createdAt),
              message,
            },
          });
        }
        cursor = page.nextCursor;
      } while (cursor);
      const tasks: TaskRecord[] = [];
      let taskCursor: string | undefined;
      do {
        const page = await fromStore(
          store.listTasks(key.tenant, {
            contextId: key.contextId,
            limit: 100,
            ...(taskCursor ? { cursor: taskCursor } : {}),
          }),
        );
        tasks.push(...page.tasks);
        taskCursor = page.nextCursor;
      } while (taskCursor);
      // Oldest first, ties by id: the same data always gives the same file, whatever the backend's listing order.
      tasks.sort((a, b) => a.updatedAt - b.updatedAt || (a.taskId < b.taskId ? -1 : a.taskId > b.taskId ? 1 : 0));
      for (const t of tasks) {
        yield record({
          case: "task",
          value: {
            taskId: t.taskId,
            state: t.state,
            updateTime: timestampFromMs(t.updatedAt),
            task: fromBinary(TaskSchema, t.payload),
          },
        });
      }
      yield record({ case: "end", value: { messageCount, taskCount: BigInt(tasks.length) } });
    },

    async importThread(req, ctx) {
      const tenant = callerOf(ctx).tenant;
      const parsed = parseRecords(req.records);
      const contextId = req.contextId !== "" ? req.contextId : parsed.contextId;
      if (contextId === "") throw invalidArgument("contextId is required (in the request or the header)");
      await refuseBusy({ tenant, contextId }, "import into it");
      const messages: ImportedMessage[] = parsed.messages.map(({ value: m, at }) => {
        const message = m.message!;
        message.contextId = contextId;
        return {
          messageId: m.messageId,
          provenance: storedProvenance.get(m.provenance)!,
          ...(m.taskId !== "" ? { taskId: m.taskId } : {}),
          payload: toBinary(MessageSchema, message),
          createdAt: millis(m.createTime, `record ${at}: createTime`),
        };
      });
      const tasks: TaskRecord[] = parsed.tasks.map(({ value: t, at }) => {
        const task = t.task!;
        task.contextId = contextId;
        for (const h of task.history) h.contextId = contextId;
        return {
          tenant,
          taskId: t.taskId,
          contextId,
          state: t.state,
          updatedAt: millis(t.updateTime, `record ${at}: updateTime`),
          payload: toBinary(TaskSchema, task),
        };
      });
      const result = await fromStore(
        store.importThread({ tenant, contextId }, { messages, tasks, mode: req.append ? "append" : "empty" }),
      );
      return {
        contextId,
        addedMessageCount: BigInt(result.added),
        skippedMessageCount: BigInt(result.skipped),
        addedTaskCount: BigInt(result.tasksAdded),
        skippedTaskCount: BigInt(result.tasksSkipped),
        ...(result.thread ? { thread: threadFromMeta(result.thread) } : {}),
      };
    },
  };
}

interface Numbered<T> {
  readonly value: T;
  /** 1-based position in the request: the line number in a file that holds one record per line. */
  readonly at: number;
}

/**
 * Checks the records' order and contents: a known header first, then messages
 * in increasing sequence, then tasks, and an end record (optional, for a
 * request that carries part of a file) last whose counts match.
 */
function parseRecords(records: readonly ThreadRecord[]) {
  const fail = (at: number, why: string) => invalidArgument(`record ${at}: ${why}`);
  const first = records[0]?.record;
  if (first?.case !== "header") throw fail(1, "the first record must be the header");
  const header = first.value;
  if (header.format !== threadFormat.name || header.version !== threadFormat.version) {
    throw fail(
      1,
      `unknown format ${JSON.stringify(header.format)} version ${header.version}; this server imports ${threadFormat.name} version ${threadFormat.version}`,
    );
  }
  const messages: Numbered<ExportedMessage>[] = [];
  const tasks: Numbered<ExportedTask>[] = [];
  let lastSequence = 0n;
  for (let i = 1; i < records.length; i++) {
    const at = i + 1;
    const r = records[i]!.record;
    switch (r.case) {
      case "message": {
        const m = r.value;
        if (tasks.length > 0) throw fail(at, "a message record after the task records");
        if (m.sequence <= lastSequence) throw fail(at, `sequence ${m.sequence} does not follow ${lastSequence}`);
        lastSequence = m.sequence;
        if (m.messageId === "") throw fail(at, "messageId is required");
        if (!m.message) throw fail(at, "message is required");
        if (!storedProvenance.has(m.provenance)) throw fail(at, `unknown provenance ${m.provenance}`);
        if (!m.createTime) throw fail(at, "createTime is required");
        messages.push({ value: m, at });
        break;
      }
      case "task": {
        const t = r.value;
        if (t.taskId === "") throw fail(at, "taskId is required");
        if (!t.task) throw fail(at, "task is required");
        if (t.task.id !== t.taskId) throw fail(at, `task.id ${JSON.stringify(t.task.id)} is not taskId`);
        if (!t.updateTime) throw fail(at, "updateTime is required");
        tasks.push({ value: t, at });
        break;
      }
      case "end": {
        if (at !== records.length) throw fail(at, "the end record must be the last");
        if (r.value.messageCount !== BigInt(messages.length) || r.value.taskCount !== BigInt(tasks.length)) {
          throw fail(
            at,
            `the end record counts ${r.value.messageCount} messages and ${r.value.taskCount} tasks, but ${messages.length} and ${tasks.length} precede it`,
          );
        }
        break;
      }
      case "header":
        throw fail(at, "a second header");
      default:
        throw fail(at, "an empty record");
    }
  }
  return { contextId: header.contextId, messages, tasks };
}
