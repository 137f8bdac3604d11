import { fromBinary } from "@bufbuild/protobuf";
import { type Message, MessageSchema, type Task, TaskState } from "@parley/proto";
import type { StoredMessage, ThreadKey, ThreadStore } from "@parley/store";
import { fromStore, taskNotFound } from "../errors.js";

/** How a true retry of a message whose turn has ended is answered: as its first send was. */
export type RetryAnswer =
  /** The turn's task, from the store. */
  | { readonly kind: "stored"; readonly task: Task }
  /** The Message the turn was answered with. */
  | { readonly kind: "reply"; readonly message: Message };

/**
 * The answer to a true retry of the stored inbound message `inbound`: its
 * task, or the Message its turn answered with. A turn answered with a Message
 * leaves no task behind (TaskRun.visible); its reply is then the agent's
 * message of that task after the inbound one in the thread, which the turn
 * had to itself until the reply was stored.
 */
export async function answerOfRetry(
  store: ThreadStore,
  getTask: (taskId: string) => Promise<Task | undefined>,
  key: ThreadKey,
  inbound: StoredMessage,
): Promise<RetryAnswer> {
  const taskId = inbound.taskId ?? "";
  if (taskId === "") throw taskNotFound(taskId);
  const task = await getTask(taskId);
  if (task) {
    const reply = directReplyOf(task);
    return reply ? { kind: "reply", message: reply } : { kind: "stored", task };
  }
  const reply = await fromStore(replyAfter(store, key, inbound.sequence, taskId));
  if (!reply) throw taskNotFound(taskId);
  return { kind: "reply", message: reply };
}

/**
 * The Message a stored task's turn answered with, if it did. A backend that
 * stores hidden tasks like any other keeps such a task, COMPLETED, with the
 * reply as its status message; the reply has no taskId, where the engine's
 * own status messages always carry one.
 */
function directReplyOf(task: Task): Message | undefined {
  const message = task.status?.message;
  return task.status?.state === TaskState.COMPLETED && message && message.taskId === "" ? message : undefined;
}

/** The first agent message of `taskId` after `sequence` in the thread, read newest first down to it. */
async function replyAfter(
  store: ThreadStore,
  key: ThreadKey,
  sequence: number,
  taskId: string,
): Promise<Message | undefined> {
  let found: StoredMessage | undefined;
  let cursor: string | undefined;
  for (;;) {
    const page = await store.readMessages(key, {
      order: "newest-first",
      limit: 20,
      ...(cursor !== undefined ? { cursor } : {}),
    });
    for (const message of page.messages) {
      if (message.sequence <= sequence) return found && fromBinary(MessageSchema, found.payload);
      if (message.taskId === taskId && message.provenance === "agent") found = message;
    }
    cursor = page.nextCursor;
    if (cursor === undefined) return found && fromBinary(MessageSchema, found.payload);
  }
}
