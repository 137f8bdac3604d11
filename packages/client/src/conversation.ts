import { create } from "@bufbuild/protobuf";
import type { CallOptions } from "@connectrpc/connect";
import {
  type Artifact,
  ArtifactSchema,
  endsTurn,
  type GetThreadHistoryResponse,
  HistoryOrder,
  type ListThreadsResponse,
  type Message,
  Role,
  type SendMessageResponse,
  type StreamResponse,
  type Task,
  TaskSchema,
  TaskState,
  type TaskStatus,
  TaskStatusSchema,
} from "@parley/proto";
import type { ParleyClient } from "./client.js";
import type { A2ASender } from "./json-rpc-client.js";

/** What a conversation needs: an A2A sender, and the thread API when the other side is a Parley server. */
export interface ConversationBackend {
  readonly a2a: A2ASender;
  readonly threads?: ParleyClient["threads"];
}

export interface ConversationOptions {
  /** Continue this thread; absent: the server starts one on the first send. */
  readonly contextId?: string;
  /** Continue this task (one waiting for input); normally picked up automatically. */
  readonly taskId?: string;
  /** Applied to every call (signal, timeoutMs, headers). */
  readonly callOptions?: CallOptions;
}

export type ConversationEvent =
  | { readonly type: "delta"; readonly text: string }
  | { readonly type: "status"; readonly state: TaskState; readonly text: string }
  | { readonly type: "done"; readonly task: Task; readonly text: string };

export interface Reply {
  /** The agent's reply text (artifacts, or the status message when there are none). */
  readonly text: string;
  /** The final task; a reply that came as a bare Message is wrapped into a COMPLETED task. */
  readonly task: Task;
}

/** Per-send options: the call options plus an explicit messageId (for idempotent retries). */
export interface SendOptions extends CallOptions {
  readonly messageId?: string;
}

export interface Conversation {
  readonly contextId: string | undefined;
  readonly taskId: string | undefined;
  readonly lastTask: Task | undefined;
  send(text: string, options?: SendOptions): Promise<Reply>;
  stream(text: string, options?: SendOptions): AsyncIterable<ConversationEvent>;
  history(options?: {
    order?: "newest-first" | "oldest-first";
    pageSize?: number;
    pageToken?: string;
  }): Promise<GetThreadHistoryResponse>;
  list(options?: { pageSize?: number; pageToken?: string }): Promise<ListThreadsResponse>;
}

/**
 * The agent's turn ended without a usable answer: it is over (terminal, or
 * waiting for the client), but neither COMPLETED nor asking for input. That
 * leaves FAILED, CANCELED, REJECTED and AUTH_REQUIRED, whose credentials this
 * client has no way to supply.
 */
function failedTurn(state: TaskState): boolean {
  return endsTurn(state) && state !== TaskState.COMPLETED && state !== TaskState.INPUT_REQUIRED;
}

/** The state's ProtoJSON name, e.g. TASK_STATE_COMPLETED. */
export function taskStateName(state: TaskState): string {
  return `TASK_STATE_${TaskState[state] ?? state}`;
}

/** The agent ended the task in a failed state; `task` holds what it said. */
export class TaskFailedError extends Error {
  override readonly name = "TaskFailedError";
  constructor(readonly task: Task) {
    const detail = partsText(task.status?.message?.parts ?? []);
    super(
      `task ${task.id || "(no id)"} in context ${task.contextId || "(none)"} ended ${taskStateName(task.status?.state ?? TaskState.UNSPECIFIED)}` +
        (detail ? `: ${detail}` : ""),
    );
  }
}

export function partsText(parts: readonly { content: { case: string | undefined; value?: unknown } }[]): string {
  return parts.map((p) => (p.content.case === "text" ? (p.content.value as string) : "")).join("");
}

/** The reply text of a task: its artifacts' text, or its status message when it has no artifacts. */
export function taskText(task: Task): string {
  const fromArtifacts = task.artifacts.map((a) => partsText(a.parts)).join("");
  return fromArtifacts || partsText(task.status?.message?.parts ?? []);
}

function userMessage(text: string, contextId: string | undefined, taskId: string | undefined, messageId?: string) {
  return {
    messageId: messageId ?? crypto.randomUUID(),
    role: Role.USER,
    parts: [{ content: { case: "text" as const, value: text } }],
    contextId: contextId ?? "",
    taskId: taskId ?? "",
  };
}

function taskFromMessage(message: Message): Task {
  return create(TaskSchema, {
    id: message.taskId,
    contextId: message.contextId,
    status: create(TaskStatusSchema, { state: TaskState.COMPLETED, message }),
  });
}

/** Folds streamed events into the final task, the way a polling client would see it. */
class TaskBuilder {
  task: Task | undefined;

  private ensure(taskId: string, contextId: string): Task {
    this.task ??= create(TaskSchema, { id: taskId, contextId, status: create(TaskStatusSchema, {}) });
    return this.task;
  }

  /** Applies one event and returns the text it adds to the reply, if any. */
  apply(event: StreamResponse): { delta?: string; status?: TaskStatus } {
    const payload = event.payload;
    switch (payload.case) {
      case "task":
        this.task = payload.value;
        return { delta: taskText(payload.value) || undefined, status: payload.value.status };
      case "message": {
        this.task = taskFromMessage(payload.value);
        return { delta: partsText(payload.value.parts) };
      }
      case "statusUpdate": {
        const task = this.ensure(payload.value.taskId, payload.value.contextId);
        if (payload.value.status) task.status = payload.value.status;
        return { status: payload.value.status };
      }
      case "artifactUpdate": {
        const task = this.ensure(payload.value.taskId, payload.value.contextId);
        const incoming = payload.value.artifact ?? create(ArtifactSchema, {});
        const existing = task.artifacts.find((a: Artifact) => a.artifactId === incoming.artifactId);
        if (existing && payload.value.append) existing.parts.push(...incoming.parts);
        else if (existing) task.artifacts[task.artifacts.indexOf(existing)] = incoming;
        else task.artifacts.push(incoming);
        return { delta: partsText(incoming.parts) };
      }
      default:
        return {};
    }
  }
}

/**
 * A multi-turn conversation: keeps the contextId (and a task waiting for
 * input) across sends so each turn lands in the same durable thread.
 */
export function createConversation(backend: ConversationBackend, options: ConversationOptions = {}): Conversation {
  let contextId = options.contextId || undefined;
  let taskId = options.taskId || undefined;
  let lastTask: Task | undefined;
  let continueTask = taskId !== undefined;
  const defaults = options.callOptions ?? {};

  const record = (task: Task) => {
    lastTask = task;
    if (task.contextId) contextId = task.contextId;
    if (task.id) taskId = task.id;
    // Only a task waiting for input is continued; any other next turn starts a new task in the same thread.
    continueTask = task.status?.state === TaskState.INPUT_REQUIRED;
    if (failedTurn(task.status?.state ?? TaskState.UNSPECIFIED)) throw new TaskFailedError(task);
  };
  const request = (text: string, messageId: string | undefined) => ({
    message: userMessage(text, contextId, continueTask ? taskId : undefined, messageId),
  });
  const requireThreads = (what: string) => {
    if (!backend.threads) {
      throw new Error(`${what} needs a Parley server's ThreadService; this conversation talks to a plain A2A agent`);
    }
    return backend.threads;
  };

  return {
    get contextId() {
      return contextId;
    },
    get taskId() {
      return taskId;
    },
    get lastTask() {
      return lastTask;
    },

    async send(text, options = {}) {
      const { messageId, ...callOptions } = options;
      const response: SendMessageResponse = await backend.a2a.sendMessage(request(text, messageId), {
        ...defaults,
        ...callOptions,
      });
      let task: Task;
      if (response.payload.case === "task") task = response.payload.value;
      else if (response.payload.case === "message") task = taskFromMessage(response.payload.value);
      else throw new Error("SendMessage answered with neither a task nor a message");
      record(task);
      return { text: taskText(task), task };
    },

    async *stream(text, options = {}) {
      const { messageId, ...callOptions } = options;
      const builder = new TaskBuilder();
      let reply = "";
      const events = backend.a2a.sendStreamingMessage(request(text, messageId), { ...defaults, ...callOptions });
      for await (const event of events) {
        const { delta, status } = builder.apply(event);
        // Known as soon as the server names them, so a caller can cancel a task still running.
        if (builder.task?.contextId) contextId = builder.task.contextId;
        if (builder.task?.id) taskId = builder.task.id;
        // A full task after chunks repeats text already yielded.
        if (delta && !(event.payload.case === "task" && reply !== "")) {
          reply += delta;
          yield { type: "delta", text: delta };
        }
        if (status && status.state !== TaskState.UNSPECIFIED) {
          yield { type: "status", state: status.state, text: partsText(status.message?.parts ?? []) };
        }
      }
      const task = builder.task;
      if (!task) throw new Error("SendStreamingMessage ended without a task, a status or a message");
      record(task);
      yield { type: "done", task, text: reply || taskText(task) };
    },

    async history(opts = {}) {
      const threads = requireThreads("history()");
      if (!contextId) throw new Error("history() needs a contextId: send a message first or pass contextId");
      return threads.getThreadHistory(
        {
          contextId,
          pageSize: opts.pageSize ?? 0,
          pageToken: opts.pageToken ?? "",
          order: opts.order === "oldest-first" ? HistoryOrder.OLDEST_FIRST : HistoryOrder.NEWEST_FIRST,
        },
        defaults,
      );
    },

    async list(opts = {}) {
      const threads = requireThreads("list()");
      return threads.listThreads({ pageSize: opts.pageSize ?? 0, pageToken: opts.pageToken ?? "" }, defaults);
    },
  };
}
