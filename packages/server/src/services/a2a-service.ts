import { clone, fromBinary, type MessageInitShape } from "@bufbuild/protobuf";
import { timestampMs } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, type HandlerContext, type ServiceImpl } from "@connectrpc/connect";
import type { Engine, SendOptions, TaskRun } from "@parley/domain";
import { createTypedError, invalidArgument, taskNotFound } from "@parley/domain";
import { deadlinePassed, fromStore, type Resumable, subscribeFromLog } from "@parley/domain/internal";
import {
  type A2AService,
  type AgentCard,
  headers,
  type SendMessageRequest,
  type SendMessageResponse,
  type StreamResponse,
  type StreamResponseSchema,
  type Task,
  TaskSchema,
  TaskState,
} from "@parley/proto";
import { onAbort } from "@parley/serving";
import type { ThreadStore } from "@parley/store";
import type { ParleyConfig } from "../config.js";
import { callerOf } from "../interceptors/caller-interceptor.js";
import type { PushConfigs } from "../push/push-configs.js";
import { lazyStream, oneValue } from "./lazy-stream.js";

type StreamResponseInit = MessageInitShape<typeof StreamResponseSchema>;

export interface A2AServiceDeps {
  readonly engine: Engine;
  readonly store: ThreadStore;
  readonly config: ParleyConfig;
  /** The extended card of an agent, for GetExtendedAgentCard. */
  readonly extendedCard: (agent: string) => AgentCard;
  /** Push notification configs; required for the push RPCs when capabilities.pushNotifications is on. */
  readonly push?: PushConfigs;
  /** The task event log (PostgreSQL's, or the LevelDB server's): SubscribeToTask replays and follows it. */
  readonly resumable: Resumable;
}

/** Copies a task with its history cut to the last `length` messages (unset: all; 0: none). */
function withHistoryLength(task: Task, length: number | undefined): Task {
  if (length === undefined) return task;
  if (length < 0) throw invalidArgument(`historyLength must be 0 or more, got ${length}`);
  const copy = clone(TaskSchema, task);
  copy.history = length === 0 ? [] : copy.history.slice(-length);
  return copy;
}

/** The outcome of a run that has settled, as SendMessage answers it. */
function settledResponse(run: TaskRun, historyLength: number | undefined): SendMessageResponse["payload"] {
  const last = run.events[run.events.length - 1];
  if (last?.payload.case === "message") return { case: "message", value: last.payload.value };
  return { case: "task", value: withHistoryLength(run.task, historyLength) };
}

/** Waits for the run to settle; a caller that goes away first stops waiting (its call fails), not the run. */
function settledOrGone(run: TaskRun, ctx: HandlerContext): Promise<void> {
  if (run.finished) return Promise.resolve();
  // One promise and one listener (Promise.race made two more promises and a reaction on each); onAbort, not
  // ctx.signal, so an in-process call makes no signal for it.
  return new Promise((resolve, reject) => {
    // The signal is read only now that the call is over: it then carries why (a lean context makes it on this read).
    const stop = onAbort(ctx, () => reject(deadlinePassed(run.taskId, ctx.signal.reason) ?? callerGone()));
    void run.settled.then(() => {
      stop();
      resolve();
    });
  });
}

function callerGone(): ConnectError {
  return new ConnectError("the caller went away; the task runs on", Code.Canceled);
}

/** A request's `id` (the task id) is REQUIRED: an empty one is the caller's mistake, not an unknown task. */
function requireTaskId(id: string): void {
  if (id === "") throw invalidArgument("id (the task id) is required");
}

/** The options of a send without a push config: one object for all of them. */
const noSendOptions: SendOptions = Object.freeze({});

/**
 * Counts each tenant's open streams so one tenant cannot hold every
 * connection; the count is returned when the stream ends however it ends.
 */
function createStreamCounter(limit: number) {
  const open = new Map<string, number>();
  return {
    acquire(tenant: string): () => void {
      const count = open.get(tenant) ?? 0;
      if (count >= limit) {
        throw createTypedError("LIMIT_EXCEEDED", `tenant has ${count} open streams; the limit is ${limit}`, {
          limit: "maxOpenStreamsPerTenant",
        });
      }
      open.set(tenant, count + 1);
      let released = false;
      return () => {
        if (released) return;
        released = true;
        const now = (open.get(tenant) ?? 1) - 1;
        if (now === 0) open.delete(tenant);
        else open.set(tenant, now);
      };
    },
  };
}

export function createA2AServiceImpl(deps: A2AServiceDeps): ServiceImpl<typeof A2AService> {
  const { engine, store, config } = deps;
  const streams = createStreamCounter(config.limits.maxOpenStreamsPerTenant);
  const maxLag = config.limits.subscriberBufferEvents;

  const requireStreaming = () => {
    if (!config.capabilities.streaming) {
      throw createTypedError(
        "UNSUPPORTED_OPERATION",
        "streaming is switched off on this agent (capabilities.streaming)",
      );
    }
  };
  const requirePush = (): PushConfigs => {
    if (!config.capabilities.pushNotifications || !deps.push) {
      throw createTypedError(
        "PUSH_NOTIFICATION_NOT_SUPPORTED",
        "push notifications are not supported by this agent (capabilities.pushNotifications is false)",
      );
    }
    return deps.push;
  };
  /** The task must exist for its configs to be read or written; configs of another tenant's task stay invisible. */
  const requireTask = async (tenant: string, taskId: string) => {
    if (taskId === "") throw invalidArgument("taskId is required");
    if (!(await engine.getTask(tenant, taskId))) throw taskNotFound(taskId);
  };
  /** Registers the push config a send carries for the task it creates or continues, before the agent runs. */
  const sendOptions = (req: SendMessageRequest, tenant: string): SendOptions => {
    const pushConfig = req.configuration?.taskPushNotificationConfig;
    if (!pushConfig) return noSendOptions;
    const push = requirePush();
    push.validate(pushConfig);
    return { beforeRun: async (run) => void (await push.register(tenant, run.taskId, pushConfig)) };
  };

  /** The run's events to the caller. Its going away ends only the stream: the task runs on (CancelTask stops it). */
  function follow(run: TaskRun, ctx: HandlerContext): AsyncIterator<StreamResponse> {
    return run.follow(
      0,
      // A stream whose deadline passed ends DEADLINE_EXCEEDED naming the task, as a blocking send does.
      (gone) => onAbort(ctx, () => gone(deadlinePassed(run.taskId, ctx.signal.reason))),
      maxLag,
      () => streams.acquire(callerOf(ctx).tenant),
    );
  }

  return {
    async sendMessage(req, ctx) {
      const caller = callerOf(ctx);
      const outcome = await engine.send(caller, req, sendOptions(req, caller.tenant));
      const historyLength = req.configuration?.historyLength;
      if (outcome.kind === "stored")
        return { payload: { case: "task", value: withHistoryLength(outcome.task, historyLength) } };
      if (outcome.kind === "reply") return { payload: { case: "message", value: outcome.message } };
      const { run } = outcome;
      if (req.configuration?.returnImmediately) {
        return { payload: { case: "task", value: withHistoryLength(clone(TaskSchema, run.task), historyLength) } };
      }
      // A caller that goes away stops waiting, not the task: it can be read back with GetTask or SubscribeToTask.
      await settledOrGone(run, ctx);
      return { payload: settledResponse(run, historyLength) };
    },

    sendStreamingMessage(req, ctx) {
      // Not a generator: the open stream is the run's follower behind one LazyStream, no yield* layers.
      return lazyStream<StreamResponseInit>(async () => {
        requireStreaming();
        const caller = callerOf(ctx);
        const outcome = await engine.send(caller, req, { ...sendOptions(req, caller.tenant), streaming: true });
        if (outcome.kind === "stored")
          return oneValue<StreamResponseInit>({ payload: { case: "task", value: outcome.task } });
        if (outcome.kind === "reply") {
          return oneValue<StreamResponseInit>({ payload: { case: "message", value: outcome.message } });
        }
        ctx.responseHeader.set(headers.streamStart, String(deps.resumable.coordinator.streamStart(outcome.run)));
        return follow(outcome.run, ctx);
      });
    },

    async getTask(req, ctx) {
      requireTaskId(req.id);
      const task = await engine.getTask(callerOf(ctx).tenant, req.id);
      if (!task) throw taskNotFound(req.id);
      return withHistoryLength(task, req.historyLength);
    },

    async listTasks(req, ctx) {
      const tenant = callerOf(ctx).tenant;
      const pageSize = req.pageSize ?? 50;
      if (pageSize < 1 || pageSize > 100) throw invalidArgument(`pageSize must be between 1 and 100, got ${pageSize}`);
      // Enums are open on the wire: an unknown number reaches here and the store would refuse it as a fault.
      if (TaskState[req.status] === undefined) throw invalidArgument(`status must be a TaskState, got ${req.status}`);
      // Running tasks nobody was shown yet (their turn may end with a Message) are listed like the others.
      await engine.revealRunning(tenant, req.contextId !== "" ? req.contextId : undefined);
      const page = await fromStore(
        store.listTasks(tenant, {
          limit: pageSize,
          ...(req.contextId !== "" ? { contextId: req.contextId } : {}),
          ...(req.status !== TaskState.UNSPECIFIED ? { state: req.status } : {}),
          ...(req.statusTimestampAfter ? { updatedAfter: timestampMs(req.statusTimestampAfter) } : {}),
          ...(req.pageToken !== "" ? { cursor: req.pageToken } : {}),
        }),
      );
      const tasks = page.tasks.map((record) => {
        const live = engine.liveRun(tenant, record.taskId);
        const task = live ? clone(TaskSchema, live.task) : fromBinary(TaskSchema, record.payload);
        if (!req.includeArtifacts) task.artifacts = [];
        return withHistoryLength(task, req.historyLength);
      });
      return { tasks, nextPageToken: page.nextCursor ?? "", pageSize, totalSize: page.totalSize };
    },

    async cancelTask(req, ctx) {
      requireTaskId(req.id);
      return engine.cancel(callerOf(ctx).tenant, req.id);
    },

    async *subscribeToTask(req, ctx) {
      requireStreaming();
      requireTaskId(req.id);
      const tenant = callerOf(ctx).tenant;
      const release = streams.acquire(tenant);
      try {
        yield* subscribeFromLog(deps.resumable, engine, tenant, req.id, ctx);
      } finally {
        release();
      }
    },

    async createTaskPushNotificationConfig(req, ctx) {
      const push = requirePush();
      const tenant = callerOf(ctx).tenant;
      push.validate(req);
      await requireTask(tenant, req.taskId);
      return push.register(tenant, req.taskId, req);
    },

    async getTaskPushNotificationConfig(req, ctx) {
      const push = requirePush();
      const tenant = callerOf(ctx).tenant;
      await requireTask(tenant, req.taskId);
      return push.get(tenant, req.taskId, req.id);
    },

    async listTaskPushNotificationConfigs(req, ctx) {
      const push = requirePush();
      const tenant = callerOf(ctx).tenant;
      await requireTask(tenant, req.taskId);
      return push.list(tenant, req.taskId, req.pageSize, req.pageToken);
    },

    async deleteTaskPushNotificationConfig(req, ctx) {
      const push = requirePush();
      const tenant = callerOf(ctx).tenant;
      await requireTask(tenant, req.taskId);
      await push.delete(tenant, req.taskId, req.id);
      return {};
    },

    async getExtendedAgentCard(_req, ctx) {
      // Sections 3.3.4 and 13.3: an agent that does not declare the capability answers UnsupportedOperationError.
      // With it on, the config requires API keys, so the caller interceptor has authenticated this caller.
      if (!config.capabilities.extendedAgentCard) {
        throw createTypedError(
          "UNSUPPORTED_OPERATION",
          "this agent has no extended agent card (capabilities.extendedAgentCard is false)",
        );
      }
      // A config built without the loader's check: open mode has no one to authenticate, so no one gets it.
      if (Object.keys(config.apiKeys).length === 0) {
        throw new ConnectError(
          "the extended agent card requires authentication, and this server has no API keys (apiKeys)",
          Code.Unauthenticated,
        );
      }
      return deps.extendedCard(callerOf(ctx).agent);
    },
  };
}
