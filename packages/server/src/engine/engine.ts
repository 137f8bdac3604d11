import { randomUUID } from "node:crypto";
import { clone, create, fromBinary, type MessageInitShape, toBinary } from "@bufbuild/protobuf";
import { timestampMs, timestampNow } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import {
  type Artifact,
  ArtifactSchema,
  type Message,
  MessageSchema,
  PartSchema,
  Role,
  type SendMessageRequest,
  type StreamResponse,
  StreamResponseSchema,
  type Task,
  TaskSchema,
  TaskState,
  TaskStatusSchema,
} from "@parley/proto";
import {
  type FencedThreadStore,
  idLimits,
  type Provenance,
  type StoredMessage,
  StoreError,
  type TaskRecord,
  type ThreadKey,
  type ThreadStore,
  terminalTaskStates,
} from "@parley/store";
import type { Logger } from "pino";
import type { Agent, AgentEvent, AgentTurn } from "../agents/agent.js";
import type { ParleyConfig } from "../config.js";
import { createTypedError, invalidArgument } from "../errors.js";
import type { Distributed } from "../scale/distributed.js";
import { formatHistory, type HistoryEntry, messageText } from "./history.js";
import { encodeMessage, encodeTask } from "./task-encoding.js";
import { TaskRun } from "./task-run.js";

/** Who is calling, as established by the interceptors. */
export interface Caller {
  readonly tenant: string;
  /** The agent that answers (already resolved to a hosted agent's name). */
  readonly agent: string;
}

/** Metadata key under which Parley keeps its own annotations on messages. */
export const parleyMetadataKey = "parley";

/** What a send turned into. */
export type SendOutcome =
  /** attached: a true retry of the message that started a task still running. */
  | { readonly kind: "run"; readonly run: TaskRun; readonly attached: boolean }
  /** A true retry of a message whose task already ended: answered from the store. */
  | { readonly kind: "stored"; readonly task: Task };

const interruptedStates: ReadonlySet<number> = new Set([TaskState.INPUT_REQUIRED, TaskState.AUTH_REQUIRED]);

export function isTerminal(state: TaskState): boolean {
  return terminalTaskStates.has(state);
}

/** Tasks that wait for the client rather than for an agent. */
export function isInterrupted(state: TaskState): boolean {
  return interruptedStates.has(state);
}

export interface EngineOptions {
  readonly store: ThreadStore;
  readonly agents: ReadonlyMap<string, Agent>;
  readonly config: ParleyConfig;
  readonly logger: Logger;
  /**
   * Sees every task event in publish order (push delivery). Left unset, the
   * publish path does no extra work. It must only enqueue: it runs inside publish.
   */
  readonly onEvent?: (source: TaskEventSource, event: StreamResponse) => void;
  /** Set when replicas share the backend: context leases, fenced writes and the shared event log. */
  readonly distributed?: Distributed;
}

/** The task an event belongs to; a TaskRun is one. */
export interface TaskEventSource {
  readonly tenant: string;
  readonly contextId: string;
  readonly taskId: string;
}

export interface SendOptions {
  /**
   * Runs once the task exists and before its agent starts, so whatever it
   * sets up (a push config) sees the task's first event. A throw fails the task.
   */
  readonly beforeRun?: (run: TaskRun) => Promise<void>;
  /** The caller watches the task as a stream (SendStreamingMessage); agents may answer differently. */
  readonly streaming?: boolean;
}

class ShutdownReason extends Error {}
class CancelReason extends Error {}

/**
 * The conversation engine: persists every inbound message before anything
 * else, reads the thread's history back into the agent's input, allows one
 * running task per (tenant, contextId), and fans each task's events out to
 * any number of subscribers.
 */
export class Engine {
  private readonly store: ThreadStore;
  private readonly agents: ReadonlyMap<string, Agent>;
  private readonly config: ParleyConfig;
  private readonly logger: Logger;
  private readonly listener: ((source: TaskEventSource, event: StreamResponse) => void) | undefined;
  /** Running tasks by tenant + taskId. */
  private readonly runs = new Map<string, TaskRun>();
  /** The running task of each (tenant, contextId): the busy guard. */
  private readonly busy = new Map<string, TaskRun>();
  private accepting = true;
  private readonly distributed: Distributed | undefined;
  /** What each run reports its events to: push delivery and, across replicas, the shared log. */
  private readonly runListener: ((run: TaskRun, event: StreamResponse) => void) | undefined;

  constructor(options: EngineOptions) {
    this.store = options.store;
    this.agents = options.agents;
    this.config = options.config;
    this.logger = options.logger;
    const onEvent = options.onEvent;
    this.listener = onEvent
      ? (source, event) => {
          try {
            onEvent(source, event);
          } catch (error) {
            this.logger.error({ taskId: source.taskId, err: error }, "task event listener failed");
          }
        }
      : undefined;
    const distributed = options.distributed;
    this.distributed = distributed;
    const listener = this.listener;
    this.runListener = distributed
      ? (run, event) => {
          listener?.(run, event);
          distributed.onPublish(run, event);
        }
      : listener;
    distributed?.bind(this);
  }

  /** Marks tasks that were running when the process last stopped as FAILED, freeing their contexts. */
  async recover(): Promise<number> {
    let failed = 0;
    for (const record of await this.store.listUnfinishedTasks()) {
      if (record.state !== TaskState.SUBMITTED && record.state !== TaskState.WORKING) continue;
      const task = fromBinary(TaskSchema, record.payload);
      task.status = create(TaskStatusSchema, {
        state: TaskState.FAILED,
        timestamp: timestampNow(),
        message: agentMessage(task, "interrupted: the server stopped while this task was running"),
      });
      await this.store.putTask(taskRecord(record.tenant, task));
      failed++;
    }
    if (failed > 0) this.logger.warn({ failed }, "marked tasks interrupted by the last shutdown as FAILED");
    return failed;
  }

  /** The running task of a tenant, if any. */
  liveRun(tenant: string, taskId: string): TaskRun | undefined {
    return this.runs.get(runKey(tenant, taskId));
  }

  /** The running task of a context, if any. */
  busyRun(tenant: string, contextId: string): TaskRun | undefined {
    return this.busy.get(contextKey(tenant, contextId));
  }

  get runningCount(): number {
    return this.runs.size;
  }

  async send(caller: Caller, request: SendMessageRequest, options: SendOptions = {}): Promise<SendOutcome> {
    if (!this.accepting)
      throw new ConnectError("the server is shutting down; retry on another instance", Code.Unavailable);
    const inbound = request.message;
    if (!inbound) throw invalidArgument("message is required");
    this.validateMessage(inbound);
    const agent = this.agents.get(caller.agent);
    if (!agent) throw new ConnectError(`no agent named ${JSON.stringify(caller.agent)}`, Code.NotFound);

    let payload: Uint8Array;
    try {
      payload = toBinary(MessageSchema, inbound);
    } catch (error) {
      // A string with a lone surrogate (JSON and in-process callers can carry one; protobuf cannot store it).
      throw invalidArgument(`message cannot be stored: ${error instanceof Error ? error.message : String(error)}`);
    }
    let existing: Task | undefined;
    let contextId = inbound.contextId;
    if (inbound.taskId !== "") {
      existing = await this.continuableTask(caller.tenant, inbound.taskId, contextId);
      contextId = existing.contextId;
    }
    if (contextId === "") contextId = `ctx-${randomUUID()}`;

    const guardKey = contextKey(caller.tenant, contextId);
    const running = this.busy.get(guardKey);
    if (running) {
      if (running.trigger.messageId === inbound.messageId && bytesEqual(running.trigger.payload, payload)) {
        return { kind: "run", run: running, attached: true };
      }
      throw createTypedError(
        "CONTEXT_BUSY",
        `context ${JSON.stringify(contextId)} is busy: task ${running.taskId} is still running; wait for it to finish or cancel it`,
        { taskId: running.taskId, contextId },
      );
    }

    const taskId = existing?.id ?? randomUUID();
    const stored = withIds(inbound, contextId, taskId);
    const task =
      existing ??
      create(TaskSchema, {
        id: taskId,
        contextId,
        history: [],
        artifacts: [],
      });
    task.history.push(stored);
    task.status = create(TaskStatusSchema, { state: TaskState.SUBMITTED, timestamp: timestampNow() });
    const run = new TaskRun(
      caller.tenant,
      contextId,
      task,
      { messageId: inbound.messageId, payload },
      this.runListener,
    );
    // Taken before the first await below, so concurrent sends see it at once.
    this.busy.set(guardKey, run);
    if (this.distributed) {
      // Across replicas the local map only guards this process; the shared lease decides.
      try {
        await this.distributed.acquire(run, existing !== undefined);
      } catch (error) {
        this.busy.delete(guardKey);
        throw storeFailure(error);
      }
    }
    const key: ThreadKey = { tenant: caller.tenant, contextId };
    let appended: Awaited<ReturnType<ThreadStore["append"]>>;
    try {
      appended = await (this.store as FencedThreadStore).append(
        key,
        { messageId: inbound.messageId, provenance: provenanceOf(inbound), taskId, payload },
        // A new task's id was minted above, so the store need not look for an earlier record of it.
        existing ? taskRecord(caller.tenant, task) : { ...taskRecord(caller.tenant, task), created: true },
        this.distributed?.writeOptions(run),
      );
    } catch (error) {
      this.busy.delete(guardKey);
      await this.distributed?.abandon(run);
      throw storeFailure(error);
    }
    if (appended.duplicate) {
      this.busy.delete(guardKey);
      await this.distributed?.abandon(run);
      const earlier = appended.message.taskId ? await this.getTask(caller.tenant, appended.message.taskId) : undefined;
      if (!earlier)
        throw createTypedError("TASK_NOT_FOUND", `the task of retried message ${inbound.messageId} is gone`);
      return { kind: "stored", task: earlier };
    }

    this.runs.set(runKey(caller.tenant, taskId), run);
    if (options.beforeRun) {
      try {
        await options.beforeRun(run);
      } catch (error) {
        await this.failBeforeStart(run, error);
        throw error;
      }
    }
    let history: HistoryEntry[];
    try {
      history = await this.readHistory(key, appended.message.sequence);
    } catch (error) {
      this.release(run);
      await this.distributed?.abandon(run);
      throw storeFailure(error);
    }
    const text = messageText(inbound);
    const turn: AgentTurn = {
      tenant: caller.tenant,
      contextId,
      taskId,
      message: stored,
      text,
      framedText: formatHistory(history, text, { maxChars: this.config.history.maxChars }),
      history,
      hops: hopsOf(inbound),
      signal: run.controller.signal,
      streaming: options.streaming === true,
    };
    void this.execute(agent, run, turn);
    return { kind: "run", run, attached: false };
  }

  /** Ends a task whose setup failed before its agent ran, so it does not stay SUBMITTED. */
  private async failBeforeStart(run: TaskRun, error: unknown): Promise<void> {
    const task = run.task;
    task.status = create(TaskStatusSchema, {
      state: TaskState.FAILED,
      timestamp: timestampNow(),
      message: agentMessage(
        task,
        `the task could not start: ${error instanceof Error ? error.message : String(error)}`,
      ),
    });
    await (this.store as FencedThreadStore)
      .putTask(taskRecord(run.tenant, task), this.distributed?.writeOptions(run))
      .catch((cause: unknown) => {
        this.logger.error({ taskId: run.taskId, err: cause }, "could not record a task that failed to start");
      });
    this.release(run);
    await this.distributed?.finish(run);
    run.end();
  }

  /** Earlier messages of the thread (before `beforeSequence`), oldest first. */
  private async readHistory(key: ThreadKey, beforeSequence: number): Promise<HistoryEntry[]> {
    const max = this.config.history.maxMessages;
    // The first message of a thread has no history: skip the read.
    if (max <= 0 || beforeSequence <= 1) return [];
    const tail = await this.store.tail(key, max + 1);
    return tail
      .filter((m) => m.sequence < beforeSequence)
      .slice(-max)
      .map(historyEntry);
  }

  private async continuableTask(tenant: string, taskId: string, contextId: string): Promise<Task> {
    const live = this.liveRun(tenant, taskId);
    const task = live?.task ?? (await this.getTask(tenant, taskId));
    if (!task) throw createTypedError("TASK_NOT_FOUND", `task ${JSON.stringify(taskId)} was not found`, { taskId });
    if (contextId !== "" && contextId !== task.contextId) {
      throw invalidArgument(
        `message.contextId ${JSON.stringify(contextId)} does not match the contextId of task ${taskId} (${JSON.stringify(task.contextId)})`,
      );
    }
    const state = task.status?.state ?? TaskState.UNSPECIFIED;
    if (isTerminal(state)) {
      throw createTypedError(
        "UNSUPPORTED_OPERATION",
        `task ${taskId} is ${TaskState[state]} (terminal) and cannot take more messages; send without taskId to start a new task in the same context`,
        { taskId },
      );
    }
    if (live && !live.finished) {
      throw createTypedError("CONTEXT_BUSY", `task ${taskId} is still running; wait for it to finish or cancel it`, {
        taskId,
        contextId: task.contextId,
      });
    }
    return clone(TaskSchema, task);
  }

  private validateMessage(message: Message): void {
    if (message.messageId === "") throw invalidArgument("message.messageId is required");
    if (message.parts.length === 0) throw invalidArgument("message.parts must hold at least one part");
    const limits = this.config.limits;
    if (message.parts.length > limits.maxPartsPerMessage) {
      throw createTypedError(
        "LIMIT_EXCEEDED",
        `message has ${message.parts.length} parts; the limit is ${limits.maxPartsPerMessage}`,
        { limit: "maxPartsPerMessage" },
      );
    }
    for (const [i, part] of message.parts.entries()) {
      if (part.content.case === undefined)
        throw invalidArgument(`message.parts[${i}] has no content (text, raw, url or data)`);
      if (part.content.case === "text" && part.content.value.length > limits.maxTextChars) {
        throw createTypedError(
          "LIMIT_EXCEEDED",
          `message.parts[${i}].text has ${part.content.value.length} characters; the limit is ${limits.maxTextChars}`,
          { limit: "maxTextChars" },
        );
      }
    }
    for (const [name, value] of [
      ["messageId", message.messageId],
      ["contextId", message.contextId],
      ["taskId", message.taskId],
    ] as const) {
      if (Buffer.byteLength(value) > idLimits[name]) {
        throw invalidArgument(`message.${name} is ${Buffer.byteLength(value)} bytes; the limit is ${idLimits[name]}`);
      }
    }
  }

  private async execute(agent: Agent, run: TaskRun, turn: AgentTurn): Promise<void> {
    const timeoutMs = this.config.limits.agentStepTimeoutMs;
    const timer = setTimeout(
      () =>
        run.controller.abort(
          new Error(`agent ${agent.name} did not finish within ${timeoutMs} ms (limits.agentStepTimeoutMs)`),
        ),
      timeoutMs,
    );
    timer.unref();
    const task = run.task;
    const artifactId = `reply-${task.history.length}`;
    let started = false;
    let working = false;
    let replyText = "";
    let textChunks = 0;
    let finalState: TaskState = TaskState.COMPLETED;
    let statusText: string | undefined;
    let directReply: Message | undefined;

    // WORKING is announced only once the agent does work (or says it is working), so a
    // turn that goes straight to its final state publishes SUBMITTED -> final and nothing else.
    const start = (asWorking: boolean) => {
      if (!started) {
        started = true;
        run.publish(streamEvent({ case: "task", value: clone(TaskSchema, task) }));
      }
      if (asWorking && !working) {
        working = true;
        this.updateStatus(run, TaskState.WORKING);
      }
    };

    try {
      for await (const event of agent.run(turn)) {
        if (run.controller.signal.aborted) break;
        if (event.type === "state" && event.state === TaskState.WORKING) {
          start(true);
          continue;
        }
        if (event.type === "message" && !started) {
          directReply = create(MessageSchema, {
            messageId: randomUUID(),
            contextId: task.contextId,
            role: Role.AGENT,
            parts: event.parts,
          });
          break;
        }
        start(event.type !== "state");
        this.applyEvent(run, event, artifactId, textChunks === 0);
        if (event.type === "text") {
          replyText += event.text;
          textChunks++;
        } else if (event.type === "state") {
          finalState = event.state;
          statusText = event.text;
        } else if (event.type === "message") {
          statusText = messageText(create(MessageSchema, { parts: event.parts }));
        }
      }
      if (run.controller.signal.aborted) throw run.controller.signal.reason;
    } catch (error) {
      const reason = run.controller.signal.aborted ? run.controller.signal.reason : error;
      if (reason instanceof CancelReason) {
        finalState = TaskState.CANCELED;
        statusText = "canceled on request";
      } else {
        finalState = TaskState.FAILED;
        statusText =
          reason instanceof ShutdownReason
            ? "interrupted: the server shut down before this task finished"
            : `agent ${agent.name} failed: ${reason instanceof Error ? reason.message : String(reason)}`;
        if (!(reason instanceof ShutdownReason)) {
          this.logger.warn({ taskId: run.taskId, err: reason }, "agent failed");
        }
      }
    } finally {
      clearTimeout(timer);
    }

    try {
      if (directReply) {
        await this.finishWithMessage(run, directReply);
        return;
      }
      start(false);
      if (textChunks > 0) {
        publishArtifact(run, { artifactId, parts: [{ content: { case: "text", value: "" } }] }, true, true);
      }
      const replyBody = replyText !== "" ? replyText : statusText;
      const reply = replyBody !== undefined && replyBody !== "" ? agentMessage(task, replyBody) : undefined;
      if (reply) task.history.push(reply);
      task.status = create(TaskStatusSchema, {
        state: finalState,
        timestamp: timestampNow(),
        ...(statusText !== undefined ? { message: agentMessage(task, statusText) } : {}),
      });
      await this.persistOutcome(run, reply);
      this.release(run);
      run.publish(
        streamEvent({
          case: "statusUpdate",
          value: { taskId: task.id, contextId: task.contextId, status: clone(TaskStatusSchema, task.status) },
        }),
      );
    } catch (error) {
      this.logger.error({ taskId: run.taskId, err: error }, "could not record the end of a task");
      this.release(run);
    } finally {
      // The run's last event is durable and its context free before anyone sees it end.
      await this.distributed?.finish(run);
      run.end();
    }
  }

  private async finishWithMessage(run: TaskRun, reply: Message): Promise<void> {
    const task = run.task;
    reply.taskId = "";
    task.history.push(reply);
    task.status = create(TaskStatusSchema, {
      state: TaskState.COMPLETED,
      timestamp: timestampNow(),
      message: reply,
    });
    await this.persistOutcome(run, reply);
    this.release(run);
    run.publish(streamEvent({ case: "message", value: reply }));
  }

  private async persistOutcome(run: TaskRun, reply: Message | undefined): Promise<void> {
    const record = taskRecord(run.tenant, run.task);
    const fenced = this.distributed?.writeOptions(run);
    if (reply) {
      await (this.store as FencedThreadStore).append(
        { tenant: run.tenant, contextId: run.contextId },
        {
          messageId: reply.messageId,
          provenance: "agent",
          taskId: run.taskId,
          payload: encodeMessage(reply),
          // The engine minted this messageId just now: no retry of it can exist.
          fresh: true,
        },
        record,
        fenced,
      );
    } else {
      await (this.store as FencedThreadStore).putTask(record, fenced);
    }
  }

  private applyEvent(run: TaskRun, event: AgentEvent, artifactId: string, firstText: boolean): void {
    const task = run.task;
    switch (event.type) {
      case "text": {
        const part: MessageInitShape<typeof PartSchema> = { content: { case: "text", value: event.text } };
        appendArtifact(task, artifactId, [part], !firstText);
        publishArtifact(run, { artifactId, name: "reply", parts: [part] }, !firstText, false);
        return;
      }
      case "artifact": {
        const artifact = create(ArtifactSchema, event.artifact);
        if (artifact.artifactId === "") artifact.artifactId = randomUUID();
        appendArtifact(task, artifact.artifactId, artifact.parts, event.append ?? false, artifact);
        publishArtifact(run, artifact, event.append ?? false, event.lastChunk ?? false);
        return;
      }
      default:
        return;
    }
  }

  private updateStatus(run: TaskRun, state: TaskState): void {
    const task = run.task;
    task.status = create(TaskStatusSchema, { state, timestamp: timestampNow() });
    run.publish(
      streamEvent({
        case: "statusUpdate",
        value: { taskId: task.id, contextId: task.contextId, status: clone(TaskStatusSchema, task.status) },
      }),
    );
  }

  private release(run: TaskRun): void {
    const guardKey = contextKey(run.tenant, run.contextId);
    if (this.busy.get(guardKey) === run) this.busy.delete(guardKey);
    this.runs.delete(runKey(run.tenant, run.taskId));
  }

  async getTask(tenant: string, taskId: string): Promise<Task | undefined> {
    const live = this.liveRun(tenant, taskId);
    if (live) return clone(TaskSchema, live.task);
    if (taskId === "" || Buffer.byteLength(taskId) > idLimits.taskId) return undefined;
    const record = await this.store.getTask(tenant, taskId).catch((error: unknown) => {
      throw storeFailure(error);
    });
    return record ? fromBinary(TaskSchema, record.payload) : undefined;
  }

  /** Stops a task: a running one is aborted, a waiting one is closed. */
  async cancel(tenant: string, taskId: string): Promise<Task> {
    const live = this.liveRun(tenant, taskId);
    if (live && !live.finished) {
      live.controller.abort(new CancelReason("canceled"));
      await live.settled;
      return clone(TaskSchema, live.task);
    }
    const task = await this.getTask(tenant, taskId);
    if (!task) throw createTypedError("TASK_NOT_FOUND", `task ${JSON.stringify(taskId)} was not found`, { taskId });
    const state = task.status?.state ?? TaskState.UNSPECIFIED;
    if (isTerminal(state)) {
      throw createTypedError("TASK_NOT_CANCELABLE", `task ${taskId} is already ${TaskState[state]}`, { taskId });
    }
    if (this.distributed && !isInterrupted(state)) {
      // Running on another replica: only the lease holder can stop its agent.
      const ended = await this.distributed.cancelRemote(tenant, task).catch((error: unknown) => {
        throw storeFailure(error);
      });
      if (ended) return ended;
    }
    task.status = create(TaskStatusSchema, {
      state: TaskState.CANCELED,
      timestamp: timestampNow(),
      message: agentMessage(task, "canceled on request"),
    });
    await this.store.putTask(taskRecord(tenant, task));
    this.listener?.(
      { tenant, contextId: task.contextId, taskId },
      streamEvent({
        case: "statusUpdate",
        value: { taskId, contextId: task.contextId, status: clone(TaskStatusSchema, task.status) },
      }),
    );
    return task;
  }

  /** Cancels the run when its only reason to exist (the caller that started it) went away. */
  abandon(run: TaskRun): void {
    if (!run.finished) run.controller.abort(new CancelReason("the client disconnected"));
  }

  /**
   * Stops accepting sends, lets running tasks finish within `graceMs`, then
   * ends the rest as FAILED (interrupted). Their outcome is persisted.
   */
  async shutdown(graceMs: number): Promise<void> {
    this.accepting = false;
    const pending = [...this.runs.values()];
    if (pending.length === 0) return;
    const all = Promise.all(pending.map((r) => r.settled));
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([all, new Promise((resolve) => (timer = setTimeout(resolve, graceMs)))]);
    clearTimeout(timer);
    for (const run of this.runs.values()) run.controller.abort(new ShutdownReason("shutdown"));
    await all;
  }
}

function runKey(tenant: string, taskId: string): string {
  return `${tenant}\u0000${taskId}`;
}

function contextKey(tenant: string, contextId: string): string {
  return `${tenant}\u0000${contextId}`;
}

function bytesEqual(a: Uint8Array, b: Uint8Array): boolean {
  return a.byteLength === b.byteLength && Buffer.compare(a, b) === 0;
}

/** Publishes one append-only artifact update of the run's task. */
function publishArtifact(
  run: TaskRun,
  artifact: MessageInitShape<typeof ArtifactSchema>,
  append: boolean,
  lastChunk: boolean,
): void {
  run.publish(
    streamEvent({
      case: "artifactUpdate",
      value: { taskId: run.task.id, contextId: run.task.contextId, artifact, append, lastChunk },
    }),
  );
}

function streamEvent(payload: MessageInitShape<typeof StreamResponseSchema>["payload"]): StreamResponse {
  return create(StreamResponseSchema, { payload });
}

/** The message as stored in a task: the caller's message with the ids it belongs to filled in. */
function withIds(message: Message, contextId: string, taskId: string): Message {
  const copy = clone(MessageSchema, message);
  copy.contextId = contextId;
  copy.taskId = taskId;
  if (copy.role === Role.UNSPECIFIED) copy.role = Role.USER;
  return copy;
}

function agentMessage(task: Task, text: string): Message {
  return create(MessageSchema, {
    messageId: randomUUID(),
    contextId: task.contextId,
    taskId: task.id,
    role: Role.AGENT,
    parts: [{ content: { case: "text", value: text } }],
  });
}

function appendArtifact(
  task: Task,
  artifactId: string,
  parts: MessageInitShape<typeof PartSchema>[],
  append: boolean,
  whole?: Artifact,
): void {
  const existing = task.artifacts.find((a) => a.artifactId === artifactId);
  const created = parts.map((p) => create(PartSchema, p));
  if (existing && append) {
    // Consecutive text chunks fold into one part so the stored task reads as one reply.
    const last = existing.parts[existing.parts.length - 1];
    for (const part of created) {
      if (last && last.content.case === "text" && part.content.case === "text" && part.metadata === undefined) {
        last.content.value += part.content.value;
      } else {
        existing.parts.push(part);
      }
    }
    return;
  }
  const artifact = whole
    ? clone(ArtifactSchema, whole)
    : create(ArtifactSchema, { artifactId, name: "reply", parts: created });
  if (existing) task.artifacts.splice(task.artifacts.indexOf(existing), 1, artifact);
  else task.artifacts.push(artifact);
}

export function taskRecord(tenant: string, task: Task): TaskRecord {
  const stamp = task.status?.timestamp;
  return {
    tenant,
    taskId: task.id,
    contextId: task.contextId,
    state: task.status?.state ?? TaskState.UNSPECIFIED,
    updatedAt: stamp ? timestampMs(stamp) : Date.now(),
    payload: encodeTask(task),
  };
}

function provenanceOf(message: Message): Provenance {
  const meta = message.metadata?.[parleyMetadataKey];
  if (meta && typeof meta === "object" && !Array.isArray(meta) && (meta as Record<string, unknown>).interSession) {
    return "inter-session";
  }
  return "user";
}

/** The sessions a message passed through, from its Parley metadata. */
export function hopsOf(message: Message): string[] {
  const meta = message.metadata?.[parleyMetadataKey];
  if (!meta || typeof meta !== "object" || Array.isArray(meta)) return [];
  const hops = (meta as Record<string, unknown>).hops;
  return Array.isArray(hops) ? hops.filter((h): h is string => typeof h === "string") : [];
}

/**
 * History entries of stored messages already decoded: a store may hand back
 * the same StoredMessage objects turn after turn (LevelDB keeps a thread's
 * recent tail in memory), and a stored message never changes.
 */
const decodedHistory = new WeakMap<StoredMessage, HistoryEntry>();

function historyEntry(stored: StoredMessage): HistoryEntry {
  let entry = decodedHistory.get(stored);
  if (entry === undefined) {
    entry = decodeHistoryEntry(stored);
    decodedHistory.set(stored, entry);
  }
  return entry;
}

function decodeHistoryEntry(stored: StoredMessage): HistoryEntry {
  const message = fromBinary(MessageSchema, stored.payload);
  const meta = message.metadata?.[parleyMetadataKey];
  const source =
    meta &&
    typeof meta === "object" &&
    !Array.isArray(meta) &&
    typeof (meta as Record<string, unknown>).source === "string"
      ? ((meta as Record<string, unknown>).source as string)
      : undefined;
  return {
    sequence: stored.sequence,
    provenance: stored.provenance,
    text: messageText(message),
    ...(source !== undefined ? { source } : {}),
  };
}

/** Maps a store failure to the RPC error a caller should see. */
export function storeFailure(error: unknown): ConnectError {
  if (error instanceof ConnectError) return error;
  if (error instanceof StoreError) {
    switch (error.code) {
      case "INVALID_ID":
      case "INVALID_CURSOR":
        return new ConnectError(error.message, Code.InvalidArgument);
      case "CLOSED":
        return new ConnectError(`storage is closed: ${error.message}`, Code.Unavailable);
      default:
        return new ConnectError(error.message, Code.Internal);
    }
  }
  return ConnectError.from(error, Code.Internal);
}
