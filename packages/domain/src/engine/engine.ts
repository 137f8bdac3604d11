import { randomUUID } from "node:crypto";
import { clone, fromBinary } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import {
  endsTurn,
  isInterruptedState,
  isTerminalState,
  type Message,
  type SendMessageRequest,
  type StreamResponse,
  type Task,
  TaskSchema,
  TaskState,
} from "@parley/proto";
import { idLimits, type ThreadKey } from "@parley/store";
import type { FencedThreadStore } from "@parley/store/backends";
import type { Logger } from "pino";
import type { Agent } from "../agent/agent.js";
import type { ChainGuard } from "../chain/chain-guard.js";
import {
  contextBusy,
  fromStore,
  invalidArgument,
  storeFailure,
  taskNotCancelable,
  taskNotFound,
  terminalTask,
} from "../errors.js";
import { messageText } from "../thread/history.js";
import { parleyMetadataOf } from "../thread/parley-metadata.js";
import type { Caller } from "./caller.js";
import type { EngineConfig } from "./engine-config.js";
import { EngineTurn } from "./engine-turn.js";
import { inboundRecord, markStart, reveal, revealStored } from "./hidden-turn.js";
import { readHistory, rememberAppended } from "./history-read.js";
import { createInputModeCheck } from "./input-modes.js";
import { encodeInbound, storedInbound, validateMessage } from "./message-validation.js";
import type { ReplicaCoordinator } from "./replica-coordinator.js";
import { answerOfRetry, type RetryAnswer } from "./retry-answer.js";
import { contextIdOfNewConversation } from "./retry-context.js";
import { RunTable, startedBy } from "./run-table.js";
import { createSendClaim, type SendClaim, type SendClaimDeps } from "./send-claim.js";
import { announce, setStatus, statusEvent } from "./task-model.js";
import { failInterruptedTasks } from "./task-recovery.js";
import { type TaskEventSource, TaskRun } from "./task-run.js";
import { emptyTask } from "./turn-messages.js";
import { runTurn, type TurnContext } from "./turn-runner.js";

/** What a send turned into. */
export type SendOutcome =
  /** attached: a true retry of the message that started a task still running. */
  | { readonly kind: "run"; readonly run: TaskRun; readonly attached: boolean }
  /** A true retry of a message whose turn has ended: the task, or the Message it was answered with. */
  | RetryAnswer;

export interface EngineOptions {
  readonly store: FencedThreadStore;
  readonly agents: ReadonlyMap<string, Agent>;
  readonly config: EngineConfig;
  readonly logger: Logger;
  /**
   * Sees every task event in publish order (push delivery). Left unset, the
   * publish path does no extra work. It must only enqueue: it runs inside publish.
   */
  readonly onEvent?: (source: TaskEventSource, event: StreamResponse) => void;
  /** Leases, fenced writes and the task event log (LeaseCoordinator, on either backend). */
  readonly coordinator: ReplicaCoordinator;
  /** Runs each turn (agent run and reply append) inside `work`: the tracing span of the turn. */
  readonly wrapTurn?: (run: TaskRun, agent: string, work: () => Promise<void>) => Promise<void>;
  /** The ingress check of agent-to-agent chains (loops, hop limit, budget). */
  readonly chains: ChainGuard;
  /** Refuses a request that is a silence token; it throws with the reason. */
  readonly refuseSilentRequest: (message: Message, agent: string) => void;
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

/**
 * The conversation engine: persists every inbound message before anything
 * else, reads the thread's history back into the agent's input, allows one
 * running task per (tenant, contextId), and fans each task's events out to
 * any number of subscribers.
 */
export class Engine {
  private readonly store: FencedThreadStore;
  private readonly agents: ReadonlyMap<string, Agent>;
  private readonly config: EngineConfig;
  private readonly logger: Logger;
  private readonly coordinator: ReplicaCoordinator;
  private readonly listener: ((source: TaskEventSource, event: StreamResponse) => void) | undefined;
  /** Running tasks by task and by context (the busy guard). */
  private readonly table = new RunTable();
  /** What each send's claim on its context frees through. */
  private readonly claimDeps: SendClaimDeps;
  private accepting = true;
  private readonly wrapTurn: EngineOptions["wrapTurn"];
  /** What each run reports its events to: push delivery and the coordinator. */
  private readonly runListener: ((run: TaskRun, event: StreamResponse) => void) | undefined;
  private readonly turn: TurnContext;
  private readonly chains: ChainGuard;
  private readonly refuseSilentRequest: EngineOptions["refuseSilentRequest"];
  /** Refuses a part whose media type the card's input modes do not name. */
  private readonly checkInputModes: (message: Message) => void;

  constructor(options: EngineOptions) {
    this.chains = options.chains;
    this.refuseSilentRequest = options.refuseSilentRequest;
    this.store = options.store;
    this.agents = options.agents;
    this.config = options.config;
    this.checkInputModes = createInputModeCheck(options.config.card.inputModes);
    this.logger = options.logger;
    this.coordinator = options.coordinator;
    const onEvent = options.onEvent;
    const listener = onEvent
      ? (source: TaskEventSource, event: StreamResponse) => {
          try {
            onEvent(source, event);
          } catch (error) {
            this.logger.error({ taskId: source.taskId, err: error }, "task event listener failed");
          }
        }
      : undefined;
    this.listener = listener;
    const onPublish = this.coordinator.onPublish;
    this.runListener =
      onPublish && listener
        ? (run, event) => {
            listener(run, event);
            onPublish(run, event);
          }
        : (onPublish ?? listener);
    this.turn = {
      store: this.store,
      coordinator: this.coordinator,
      logger: this.logger,
      agentStepTimeoutMs: this.config.limits.agentStepTimeoutMs,
    };
    this.claimDeps = { table: this.table, store: this.store, coordinator: this.coordinator, logger: this.logger };
    this.wrapTurn = options.wrapTurn;
  }

  /** Marks tasks that were running when the process last stopped as FAILED, freeing their contexts. */
  recover(): Promise<number> {
    return failInterruptedTasks({ store: this.store, coordinator: this.coordinator, logger: this.logger });
  }

  /** The running task of a tenant, if any. */
  liveRun(tenant: string, taskId: string): TaskRun | undefined {
    return this.table.live(tenant, taskId);
  }

  /** How many tasks run in this process now (the running tasks gauge). */
  get runningCount(): number {
    return this.table.size;
  }

  /** The running task of a context, if any. */
  busyRun(tenant: string, contextId: string): TaskRun | undefined {
    return this.table.busyRun(tenant, contextId);
  }

  async send(caller: Caller, request: SendMessageRequest, options: SendOptions = {}): Promise<SendOutcome> {
    if (!this.accepting)
      throw new ConnectError("the server is shutting down; retry on another instance", Code.Unavailable);
    const inbound = request.message;
    if (!inbound) throw invalidArgument("message is required");
    validateMessage(inbound, this.config.limits);
    this.checkInputModes(inbound);
    const agent = this.agents.get(caller.agent);
    if (!agent) throw new ConnectError(`no agent named ${JSON.stringify(caller.agent)}`, Code.NotFound);
    // Before the busy guard and before anything is stored: a ring that comes back here is a loop, not a busy context.
    const chain = this.chains.admit(inbound, caller.agent);
    this.refuseSilentRequest(inbound, caller.agent);

    const payload = encodeInbound(inbound);
    let existing: Task | undefined;
    let contextId = inbound.contextId;
    if (inbound.taskId !== "") {
      existing = await this.continuableTask(caller.tenant, inbound.taskId, contextId);
      contextId = existing.contextId;
    }
    // Derived, not random: a retry of this exact message finds the first send's context and task.
    if (contextId === "") contextId = contextIdOfNewConversation(caller.tenant, inbound.messageId, payload);

    // The caller is handed the task at once (a stream, returnImmediately, a push config); a new task that is not
    // (a blocking send) may end as a Message: until someone is shown it, the store keeps only its turn-in-flight record.
    const handedOver =
      options.streaming === true ||
      options.beforeRun !== undefined ||
      request.configuration?.returnImmediately === true;
    const trigger = { messageId: inbound.messageId, payload };
    for (
      let running = this.busyRun(caller.tenant, contextId);
      running;
      running = this.busyRun(caller.tenant, contextId)
    ) {
      if (startedBy(running, trigger)) {
        if (handedOver) reveal(running, this.coordinator);
        if (options.streaming === true) announce(running);
        return { kind: "run", run: running, attached: true };
      }
      // Its agent is done and its outcome is being written: GetTask already shows the end, so a caller that
      // saw it and sends at once waits for that write instead of failing busy (then looks again).
      if (!endsTurn(running.task.status?.state ?? TaskState.UNSPECIFIED)) throw contextBusy(contextId, running.taskId);
      await running.settled;
    }

    const taskId = existing?.id ?? randomUUID();
    const stored = storedInbound(inbound, contextId, taskId);
    const task = existing ?? emptyTask(taskId, contextId);
    task.history.push(stored);
    setStatus(task, TaskState.SUBMITTED);
    const run = new TaskRun(caller.tenant, contextId, task, trigger, this.runListener);
    const continued = existing !== undefined;
    markStart(run, { continued, handedOver, ownsUnfinishedTasks: this.coordinator.ownsUnfinishedTasks });
    // Taken before the first await below, so concurrent sends see it at once; released once, however the send ends.
    const claim = createSendClaim(this.claimDeps, run);
    const key: ThreadKey = { tenant: caller.tenant, contextId };
    const retried = await claim.hold(async () => {
      await claim.lease(continued);
      const meta = parleyMetadataOf(inbound);
      const appended = await this.store
        .append(
          key,
          { messageId: inbound.messageId, provenance: meta.interSession ? "inter-session" : "user", taskId, payload },
          inboundRecord(run, continued),
          this.coordinator.writeOptions(run),
        )
        .catch(rethrowStoreFailure);
      if (appended.duplicate) return appended.message;
      const text = messageText(inbound);
      rememberAppended(appended.message, inbound, text);
      claim.stored();
      await options.beforeRun?.(run);
      // A stream's first event is its task, before the history is read or the agent produces anything.
      if (options.streaming === true) announce(run);
      const { maxMessages, maxChars } = this.config.history;
      const history = await readHistory(this.store, key, appended.message.sequence, maxMessages).catch(
        rethrowStoreFailure,
      );
      const turn = new EngineTurn(
        run,
        {
          tenant: caller.tenant,
          contextId,
          taskId,
          message: stored,
          text,
          history,
          hops: meta.hops,
          chain,
          streaming: options.streaming === true,
        },
        maxChars,
      );
      this.startTurn(claim, agent, turn);
      return undefined;
    });
    // A true retry of a message whose turn has ended, answered once the claim is released.
    if (retried) return answerOfRetry(this.store, (id) => this.getTask(caller.tenant, id), key, retried);
    return { kind: "run", run, attached: false };
  }

  /** Runs the turn (inside wrapTurn's span): from its start, the turn's end releases the claim. */
  private startTurn(claim: SendClaim, agent: Agent, turn: EngineTurn): void {
    const work = () => runTurn(this.turn, agent, claim.handOver(), turn);
    const running = this.wrapTurn ? this.wrapTurn(claim.run, agent.name, work) : work();
    void running.catch((error: unknown) => {
      this.logger.error({ taskId: claim.run.taskId, err: error }, "a turn failed outside its agent");
    });
  }

  private async continuableTask(tenant: string, taskId: string, contextId: string): Promise<Task> {
    const live = this.liveRun(tenant, taskId);
    const task = live?.task ?? (await this.getTask(tenant, taskId));
    if (!task) throw taskNotFound(taskId);
    if (contextId !== "" && contextId !== task.contextId) {
      throw invalidArgument(
        `message.contextId ${JSON.stringify(contextId)} does not match the contextId of task ${taskId} (${JSON.stringify(task.contextId)})`,
      );
    }
    const state = task.status?.state ?? TaskState.UNSPECIFIED;
    if (isTerminalState(state)) {
      throw terminalTask(
        taskId,
        state,
        " and cannot take more messages; send without taskId to start a new task in the same context",
      );
    }
    if (live && !live.finished) {
      // Waiting for input and still writing that outcome (see send): the follow-up waits for the write.
      if (!endsTurn(state)) throw contextBusy(task.contextId, taskId);
      await live.settled;
    }
    return clone(TaskSchema, task);
  }

  /**
   * Makes the running tasks of a tenant (of one context, when given) that
   * the store holds only as turn-in-flight records (TaskRun.storedHidden)
   * visible, their records written before this resolves: a listing that
   * follows finds them, as it finds every other running task.
   */
  async revealRunning(tenant: string, contextId?: string): Promise<void> {
    const writes: Promise<void>[] = [];
    for (const run of this.table.values()) {
      if (run.tenant !== tenant || (contextId !== undefined && run.contextId !== contextId)) continue;
      const record = revealStored(run, this.coordinator);
      if (!record) continue;
      writes.push(
        this.store.putTask(record, this.coordinator.writeOptions(run)).catch((error: unknown) => {
          this.logger.warn({ taskId: run.taskId, err: error }, "could not record a running task for a listing");
        }),
      );
    }
    await Promise.all(writes);
  }

  /**
   * A task's state and context without copying or decoding the task: a live run's from memory, a stored task's
   * from its record's fields (the payload, history and artifacts, is not decoded). What SubscribeToTask checks
   * before it decides whether it needs the task itself, and the context its logged events leave out; undefined
   * when there is no such task.
   */
  async taskHead(tenant: string, taskId: string): Promise<{ state: TaskState; contextId: string } | undefined> {
    const live = this.liveRun(tenant, taskId);
    if (live) {
      // Named by id (SubscribeToTask): like getTask, this makes a hidden turn's task outlive it, so the
      // subscriber sees its end in the event log even when the agent answers with a Message; and its
      // task at once, even while the agent has produced nothing yet.
      reveal(live, this.coordinator);
      announce(live);
      return { state: live.task.status?.state ?? TaskState.UNSPECIFIED, contextId: live.contextId };
    }
    if (taskId === "" || Buffer.byteLength(taskId) > idLimits.taskId) return undefined;
    const record = await fromStore(this.store.getTask(tenant, taskId));
    return record ? { state: record.state as TaskState, contextId: record.contextId } : undefined;
  }

  async getTask(tenant: string, taskId: string): Promise<Task | undefined> {
    const live = this.liveRun(tenant, taskId);
    if (live) {
      // Asked for by id (GetTask, SubscribeToTask, a push config): the task outlives its turn whatever it answers.
      reveal(live, this.coordinator);
      return clone(TaskSchema, live.task);
    }
    if (taskId === "" || Buffer.byteLength(taskId) > idLimits.taskId) return undefined;
    const record = await fromStore(this.store.getTask(tenant, taskId));
    return record ? fromBinary(TaskSchema, record.payload) : undefined;
  }

  /** Stops a task: a running one is aborted, a waiting one is closed. */
  async cancel(tenant: string, taskId: string): Promise<Task> {
    const live = this.liveRun(tenant, taskId);
    if (live && !live.finished) {
      reveal(live, this.coordinator);
      live.cancel("canceled");
      await live.settled;
      return clone(TaskSchema, live.task);
    }
    const task = await this.getTask(tenant, taskId);
    if (!task) throw taskNotFound(taskId);
    const state = task.status?.state ?? TaskState.UNSPECIFIED;
    if (isTerminalState(state)) throw taskNotCancelable(taskId, state);
    if (!isInterruptedState(state)) {
      // Running on another replica: only the lease holder can stop its agent.
      const ended = await fromStore(this.coordinator.cancelRemote(tenant, task));
      if (ended) return ended;
    }
    setStatus(task, TaskState.CANCELED, "canceled on request");
    // The log's final event ends the streams that follow the waiting task.
    await fromStore(this.coordinator.endWaiting(tenant, task));
    this.listener?.({ tenant, contextId: task.contextId, taskId }, statusEvent(task));
    return task;
  }

  /**
   * Stops accepting sends, lets running tasks finish within `graceMs`, then
   * ends the rest as FAILED (interrupted). Their outcome is persisted.
   */
  async shutdown(graceMs: number): Promise<void> {
    this.accepting = false;
    const pending = [...this.table.values()];
    if (pending.length === 0) return;
    const all = Promise.all(pending.map((r) => r.settled));
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([all, new Promise((resolve) => (timer = setTimeout(resolve, graceMs)))]);
    clearTimeout(timer);
    for (const run of this.table.values())
      run.interrupt(`the server shut down and its grace of ${graceMs} ms (shutdownGraceMs) ran out`);
    await all;
  }
}

/** A store failure as the caller is told it. */
function rethrowStoreFailure(error: unknown): never {
  throw storeFailure(error);
}
