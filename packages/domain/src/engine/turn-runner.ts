import { randomUUID } from "node:crypto";
import { create, type JsonObject, type MessageInitShape, toBinary } from "@bufbuild/protobuf";
import {
  ArtifactSchema,
  extensionUris,
  type Message,
  MessageSchema,
  type Part,
  PartSchema,
  Role,
  type StreamResponse,
  TaskState,
} from "@parley/proto";
import { StoreError, type TaskRecord } from "@parley/store";
import type { FencedThreadStore, WriteOptions } from "@parley/store/backends";
import type { Logger } from "pino";
import type { Agent, AgentEvent, AgentTurn } from "../agent/agent.js";
import { withChainReport } from "../chain/chain-budget.js";
import { ChainRefusedError } from "../chain/chain-refusal.js";
import { messageText } from "../thread/history.js";
import { parleyMetadataKey } from "../thread/parley-metadata.js";
import { endsHidden, outcomeRecord, shownWhileEnding } from "./hidden-turn.js";
import { rememberAppended } from "./history-read.js";
import type { ReplicaCoordinator } from "./replica-coordinator.js";
import type { TurnHold } from "./send-claim.js";
import {
  agentMessage,
  announce,
  appendArtifact,
  interruptedStatus,
  publishArtifact,
  setStatus,
  statusEvent,
} from "./task-model.js";
import { RunStop, type TaskRun } from "./task-run.js";
import { partsArtifact, partsMessage, streamResponse, taskStatus, textPart, timestampNow } from "./turn-messages.js";

/** An agent's part as a message (create returns one that already is). */
const asPart = (part: MessageInitShape<typeof PartSchema>): Part => create(PartSchema, part);

/** What running a turn needs from the engine. */
export interface TurnContext {
  readonly store: FencedThreadStore;
  readonly coordinator: ReplicaCoordinator;
  readonly logger: Logger;
  /** limits.agentStepTimeoutMs */
  readonly agentStepTimeoutMs: number;
}

/**
 * Runs one turn of an agent to its end: publishes the task's events as the
 * agent produces them, stores the outcome (reply and final task in one
 * batch), frees the busy guard, then publishes the final event and ends the run
 * (`hold.end`: the lease too). Never throws: every failure ends the task FAILED
 * (or CANCELED on request).
 */
export async function runTurn(ctx: TurnContext, agent: Agent, hold: TurnHold, turn: AgentTurn): Promise<void> {
  const run = hold.run;
  const timeoutMs = ctx.agentStepTimeoutMs;
  const timer = setTimeout(
    () => run.abort(new Error(`agent ${agent.name} did not finish within ${timeoutMs} ms (limits.agentStepTimeoutMs)`)),
    timeoutMs,
  );
  timer.unref();
  const task = run.task;
  const artifactId = `reply-${task.history.length}`;
  let working = false;
  let replyText = "";
  let textChunks = 0;
  let finalState: TaskState = TaskState.COMPLETED;
  let statusText: string | undefined;
  let directReply: Message | undefined;
  let silent = false;
  let refused: string | undefined;
  // The agent was stopped or threw: the status was written by the catch below.
  let stopped = false;

  // WORKING is announced only once the agent does work (or says it is working), so a
  // turn that goes straight to its final state publishes SUBMITTED -> final and nothing else. The task
  // snapshot may have gone out before the agent ran (a stream, a subscriber: task-model's announce).
  const start = (asWorking: boolean) => {
    announce(run);
    if (asWorking && !working) {
      working = true;
      setStatus(task, TaskState.WORKING);
      run.publish(statusEvent(task));
    }
  };

  try {
    for await (const event of agent.run(turn)) {
      if (run.aborted) break;
      if (event.type === "state" && event.state === TaskState.WORKING) {
        start(true);
        continue;
      }
      if (event.type === "silent") {
        silent = true;
        break;
      }
      // A Message is the whole answer only while nobody was shown the task; after its snapshot it is the task's end.
      if (event.type === "message" && run.events.length === 0) {
        directReply = partsMessage(randomUUID(), task.contextId, "", Role.AGENT, event.parts.map(asPart));
        break;
      }
      start(event.type !== "state");
      applyEvent(run, event, artifactId, textChunks === 0);
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
    if (run.aborted) throw run.abortReason;
  } catch (error) {
    const stop = run.aborted ? run.abortReason : undefined;
    // An agent may say where a deadline found it (an Error whose cause is the stop); a cancel or shutdown is told as is.
    const elaborated =
      stop !== undefined && !(stop instanceof RunStop) && error instanceof Error && error.cause === stop;
    const reason = stop === undefined || elaborated ? error : stop;
    const partial = partialNote(textChunks, replyText);
    stopped = true;
    if (reason instanceof RunStop && reason.kind === "cancel") {
      finalState = TaskState.CANCELED;
      statusText = `canceled on request${partial}`;
    } else {
      const shutdown = reason instanceof RunStop;
      finalState = TaskState.FAILED;
      if (reason instanceof ChainRefusedError) refused = reason.reason;
      statusText = shutdown
        ? interruptedStatus(
            `interrupted: ${reason.message} while agent ${agent.name} was answering${partial}`,
            run.contextId,
          )
        : `agent ${agent.name} failed: ${reason instanceof Error ? reason.message : String(reason)}${partial}`;
    }
    ctx.logger.warn(
      { taskId: run.taskId, contextId: run.contextId, agent: agent.name, chunks: textChunks, err: reason },
      `turn did not finish: ${statusText}`,
    );
  } finally {
    clearTimeout(timer);
  }
  // A turn that did not finish keeps none of its reply (see cutShort): the status says why and what was dropped.
  if (cutShort(finalState) && textChunks > 0) {
    // A stop or a throw (above) already said it; an agent that ended its own turn FAILED or CANCELED did not.
    if (!stopped)
      statusText = `${statusText ?? `the agent ended the turn ${TaskState[finalState]}`}${partialNote(textChunks, replyText)}`;
    task.artifacts = task.artifacts.filter((a) => a.artifactId !== artifactId);
    replyText = "";
    textChunks = 0;
  }

  try {
    // Every reply reports what is left of the chain's budget, so the hop that forwarded here can charge it.
    const report = withChainReport(task.metadata, turn.chain);
    if (refused !== undefined) (report[extensionUris.chain] as JsonObject).refused = refused;
    task.metadata = report;
    if (silent) task.metadata[parleyMetadataKey] = { silent: true };
    if (directReply) {
      directReply.metadata = withChainReport(directReply.metadata, turn.chain);
      await recordEnd(ctx, hold, messageOutcome(ctx, run, directReply));
      return;
    }
    start(false);
    if (silent) {
      // The silence guard streams nothing of a reply that is only a token: no text artifact, no stored reply.
      task.artifacts = task.artifacts.filter((a) => a.artifactId !== artifactId);
      replyText = "";
      textChunks = 0;
    }
    if (textChunks > 0) {
      publishArtifact(run, partsArtifact(artifactId, "", [textPart("")]), true, true);
    }
    // A failure is the task's status, never the agent's reply: its text stays out of the thread.
    const replyBody = replyText !== "" ? replyText : cutShort(finalState) ? undefined : statusText;
    const reply = replyBody !== undefined && replyBody !== "" ? agentMessage(task, replyBody) : undefined;
    if (reply) task.history.push(reply);
    setStatus(task, finalState, statusText);
    const final = statusEvent(task);
    if (final.payload.case === "statusUpdate") final.payload.value.metadata = task.metadata;
    // The final event is logged with the outcome where the store can (one batch), and published once it landed.
    await recordEnd(ctx, hold, {
      last: final,
      persist: (retry) => persistOutcome(ctx, run, reply, false, retry, final),
    });
  } catch (error) {
    ctx.logger.error({ taskId: run.taskId, err: error }, "could not record the end of a task");
    // Its waiters must not see the outcome that was not stored (a restart finds the task unfinished and fails it).
    const cause = error instanceof StoreError ? error.message : "a store failure (the cause is in the server log)";
    setStatus(task, TaskState.FAILED, `the end of this task could not be stored: ${cause}`);
    hold.leave();
    run.publish(statusEvent(task));
  } finally {
    // The run's last event is durable and its context free before anyone sees it end.
    await hold.end();
  }
}

/**
 * Whether a turn ending in `state` did not finish (it failed, was canceled, was interrupted): the thread then
 * keeps none of the agent's partial reply, so no later turn reads cut-off text as a complete answer. Not kept
 * rather than kept marked: a crash keeps nothing either, and a marked fragment would still be model input.
 */
export function cutShort(state: TaskState): boolean {
  return state === TaskState.FAILED || state === TaskState.CANCELED;
}

/** What a cut-off turn's status adds about the reply text that was streamed and then not kept. */
function partialNote(chunks: number, text: string): string {
  return chunks > 0 ? `; its partial reply (${chunks} chunks, ${text.length} characters) was not kept` : "";
}

/** What ends a run: its final event, and the write that stores it (`retry`: an earlier try may have landed). */
interface Outcome {
  readonly last: StreamResponse;
  persist(retry: boolean): Promise<void>;
}

/**
 * Stores the run's outcome, then publishes its final event. A write that fails is tried again while the run may
 * still hold its context (the database away, for up to the coordinator's outage tolerance); past that the end is
 * left to whoever takes the context over (the task ends FAILED), and the run's streams get the stored end once it
 * is there. So no run leaves its task unfinished, whatever the database did.
 */
async function recordEnd(ctx: TurnContext, hold: TurnHold, outcome: Outcome): Promise<void> {
  const run = hold.run;
  let failingSince: number | undefined;
  for (let attempt = 1; ; attempt++) {
    try {
      await outcome.persist(attempt > 1);
      hold.leave();
      run.publish(outcome.last);
      return;
    } catch (error) {
      failingSince ??= Date.now();
      if (!run.interrupted && ctx.coordinator.mayRetryEnd(run, error, attempt, Date.now() - failingSince)) {
        ctx.logger.warn({ taskId: run.taskId, attempt, err: error }, "could not record the end of a task; retrying");
        await new Promise((resolve) => setTimeout(resolve, Math.min(100 * 2 ** (attempt - 1), 1_000)));
        continue;
      }
      // The store itself refused (a fault such as a full disk, not a lost lease or an absent database): the caller
      // learns at once (the catch in runTurn answers FAILED, not stored) and the context is freed as before.
      if (error instanceof StoreError && error.code !== "FENCED") throw error;
      // Nobody may read the outcome that was not stored while the task's end is awaited.
      setStatus(
        run.task,
        TaskState.FAILED,
        "the end of this task could not be stored; it is ended by the replica that takes its context over",
      );
      const stored = await ctx.coordinator.abandon(run, error, () => run.interrupted);
      if (stored?.status) run.task.status = stored.status;
      hold.leave();
      run.publish(statusEvent(run.task));
      return;
    }
  }
}

function messageOutcome(ctx: TurnContext, run: TaskRun, reply: Message): Outcome {
  const task = run.task;
  reply.taskId = "";
  task.history.push(reply);
  task.status = taskStatus(TaskState.COMPLETED, timestampNow(), reply);
  // Nobody was shown the task: it ends with the reply (its turn-in-flight record removed), and a retry
  // of the message is answered with the reply from the thread.
  const hidden = endsHidden(run);
  const last = streamResponse({ case: "message", value: reply });
  return {
    last,
    async persist(retry) {
      // A hidden task's reply is never logged (nobody can follow the task); a visible one's is, with the outcome.
      await persistOutcome(ctx, run, reply, hidden, retry, hidden ? undefined : last);
      // Someone asked for the task while its end was being written: it stays, COMPLETED.
      const kept = shownWhileEnding(run, hidden);
      if (kept) await ctx.store.putTask(kept, ctx.coordinator.writeOptions(run));
    },
  };
}

/**
 * Stores the turn's outcome: the reply appended to the thread with the final task, or the task alone; with
 * `last` (the run's final event, published after this) through the coordinator's final write.
 */
async function persistOutcome(
  ctx: TurnContext,
  run: TaskRun,
  reply: Message | undefined,
  hidden: boolean,
  retry: boolean,
  last?: StreamResponse,
): Promise<void> {
  const record = outcomeRecord(run, hidden);
  if (!last) return writeOutcome(ctx, run, reply, record, retry, ctx.coordinator.writeOptions(run));
  return ctx.coordinator.finalWrite(run, last, (fenced) => writeOutcome(ctx, run, reply, record, retry, fenced));
}

async function writeOutcome(
  ctx: TurnContext,
  run: TaskRun,
  reply: Message | undefined,
  record: TaskRecord,
  retry: boolean,
  fenced: WriteOptions | undefined,
): Promise<void> {
  if (reply) {
    const appended = await ctx.store.append(
      { tenant: run.tenant, contextId: run.contextId },
      {
        messageId: reply.messageId,
        provenance: "agent",
        taskId: run.taskId,
        payload: toBinary(MessageSchema, reply),
        // The engine minted this messageId just now: no retry of it can exist, unless an earlier try of this
        // write failed without its answer (it may have landed: the store then finds it by its messageId).
        fresh: !retry,
      },
      record,
      fenced,
    );
    // The thread's next turn reads the reply back into its history without decoding it.
    rememberAppended(appended.message, reply);
  } else {
    await ctx.store.putTask(record, fenced);
  }
}

function applyEvent(run: TaskRun, event: AgentEvent, artifactId: string, firstText: boolean): void {
  const task = run.task;
  switch (event.type) {
    case "text": {
      const part = textPart(event.text);
      appendArtifact(task, artifactId, [part], !firstText);
      publishArtifact(run, partsArtifact(artifactId, "reply", [part]), !firstText, false);
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
