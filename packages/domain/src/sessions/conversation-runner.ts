import { type JsonObject, toBinary } from "@bufbuild/protobuf";
import { extensionUris, Role as MessageRole, MessageSchema, Phase, Speaker, StopReason } from "@parley/proto";
import type { ThreadStore } from "@parley/store";
import type { Logger } from "pino";
import type { ChainLedger } from "../chain/chain-budget.js";
import type { Engine } from "../engine/engine.js";
import type { ConversationLog } from "./conversation-log.js";
import type { CallPeer } from "./session-peer.js";
import type { ResolvedSession } from "./session-ref.js";
import { type SessionStep, type StepPhase, stepMetadata } from "./session-step.js";
import { isSilentReply, replyDigest } from "./silence.js";
import { runLocalStep, runPeerStep, type StepResult, stepMessage } from "./step-runner.js";

/** Everything a conversation needs to run, settled before its first event. */
export interface ConversationPlan {
  readonly log: ConversationLog;
  readonly tenant: string;
  readonly requester: ResolvedSession;
  readonly target: ResolvedSession;
  readonly text: string;
  readonly maxTurns: number;
  readonly stepTimeoutMs: number;
  readonly stepBudget: number;
  /** The hop trace up to and including the requester. */
  readonly trace: readonly string[];
  /** Set when the hop guard refuses the conversation. */
  readonly hopViolation?: string;
  /** The chain the conversation belongs to: every step is handed what is left of its budget. */
  readonly chain: ChainLedger;
}

type Role = "requester" | "target";

interface Reply {
  readonly role: Role;
  readonly text: string;
  readonly digest: string;
  readonly where: string;
}

interface Stop {
  readonly reason: StopReason;
  readonly detail: string;
  readonly turn?: number;
  readonly speaker?: Speaker;
}

const speakerOf = { requester: Speaker.REQUESTER, target: Speaker.TARGET } as const;
/** Stops after which the target still gets its announce step; the others end the conversation at once. */
const announcing: ReadonlySet<StopReason> = new Set([
  StopReason.SILENCE,
  StopReason.EMPTY_REPLY,
  StopReason.TURN_LIMIT,
  StopReason.LOOP_DETECTED,
]);

/** How a refused step ends the conversation. */
const refusalStops = {
  LOOP_DETECTED: StopReason.LOOP_DETECTED,
  HOP_LIMIT: StopReason.HOP_LIMIT,
  BUDGET_EXHAUSTED: StopReason.STEP_BUDGET,
} as const;

function withChain(chain: JsonObject, metadata: JsonObject): JsonObject {
  return { ...metadata, [extensionUris.chain]: chain };
}

/**
 * Runs the three phases of an agent-to-agent conversation: round one (the
 * target answers the request), ping-pong (the requester answers first, then
 * the two alternate), announce (the target decides whether to post a result
 * to its own thread). Every step is a message into one session's thread,
 * marked inter-session with the other session as its source; the reply the
 * step produces is stored by that session's engine as its own message, so
 * each said thing ends up in both threads exactly once.
 */
export class ConversationRunner {
  constructor(
    private readonly deps: {
      readonly engine: Engine;
      readonly store: ThreadStore;
      readonly tokens: ReadonlySet<string>;
      readonly logger: Logger;
      /** How a step reaches a remote peer. */
      readonly callPeer: CallPeer;
    },
  ) {}

  async run(plan: ConversationPlan): Promise<void> {
    try {
      // A refused conversation leaves no trace in either thread, like any refused request.
      if (plan.hopViolation === undefined) {
        await this.record(plan, "request", plan.text, { provenance: "agent", steps: 0 });
      }
      await this.phases(plan);
      if (plan.hopViolation === undefined) await this.recordOutcome(plan);
    } catch (error) {
      this.deps.logger.error({ conversationId: plan.log.id, err: error }, "conversation failed");
      if (!plan.log.finished) {
        plan.log.finish({
          phase: Phase.DONE,
          maxTurns: plan.maxTurns,
          stopReason: StopReason.AGENT_FAILED,
          detail: `the conversation broke off: ${error instanceof Error ? error.message : String(error)}`,
        });
      }
    }
  }

  private async phases(plan: ConversationPlan): Promise<void> {
    const { log, maxTurns } = plan;
    const finish = (stop: Stop, announced = "", extra = "") =>
      log.finish({
        phase: Phase.DONE,
        maxTurns,
        turn: stop.turn ?? 0,
        speaker: stop.speaker ?? Speaker.UNSPECIFIED,
        stopReason: stop.reason,
        detail: extra === "" ? stop.detail : `${stop.detail}; ${extra}`,
        announcedText: announced,
      });
    if (plan.hopViolation !== undefined) {
      finish({ reason: StopReason.HOP_LIMIT, detail: plan.hopViolation });
      return;
    }

    const hops = [...plan.trace, plan.target.id];
    const replies: Reply[] = [];
    let steps = 0;
    const budgetStop = (turn: number, role: Role): Stop => ({
      reason: StopReason.STEP_BUDGET,
      detail:
        steps >= plan.stepBudget
          ? `the conversation used its budget of ${plan.stepBudget} agent steps`
          : `chain ${plan.chain.id} has no agent steps left (the whole chain's budget, shared by every hop and nested conversation, is used up)`,
      turn,
      speaker: speakerOf[role],
    });
    const outOfBudget = () => steps >= plan.stepBudget || plan.chain.stepsLeft <= 0;

    const step = async (
      role: Role,
      phase: StepPhase,
      turn: number,
      text: string,
      suppress: readonly string[],
      extra: Partial<SessionStep> = {},
    ): Promise<StepResult> => {
      steps++;
      const hand = plan.chain.hand();
      const receiver = role === "requester" ? plan.requester : plan.target;
      const other = role === "requester" ? plan.target : plan.requester;
      const message = stepMessage({
        // Deterministic per conversation and step: a step retried into the same thread is stored once.
        messageId: `${log.id}/${steps}/${phase}`,
        contextId: receiver.contextId,
        text,
        metadata: withChain(
          hand.metadata,
          stepMetadata(
            {
              conversationId: log.id,
              phase,
              turn,
              maxTurns,
              role,
              self: receiver.id,
              other: other.id,
              suppress,
              ...extra,
            },
            other.id,
            hops,
          ),
        ),
      });
      const outcome =
        receiver.kind === "local"
          ? await runLocalStep(
              this.deps.engine,
              { tenant: plan.tenant, agent: receiver.agent },
              message,
              plan.stepTimeoutMs,
            )
          : await runPeerStep(this.deps.callPeer, receiver.peer, message, plan.stepTimeoutMs);
      hand.settle(outcome.metadata);
      const result = outcome.result;
      // A peer that is not Parley withholds nothing itself; judge its reply here as well.
      if (result.kind !== "reply") return result;
      if (isSilentReply(result.text, this.deps.tokens)) return { kind: "silent" };
      const repeated = suppress.indexOf(replyDigest(result.text));
      return repeated >= 0 ? { kind: "repeat", of: repeated } : result;
    };

    const stopOf = (result: StepResult, role: Role, where: string, turn: number): Stop | undefined => {
      const speaker = speakerOf[role];
      switch (result.kind) {
        case "reply":
          return undefined;
        case "silent":
          return { reason: StopReason.SILENCE, detail: `the ${role} stayed silent ${where}`, turn, speaker };
        case "empty":
          return { reason: StopReason.EMPTY_REPLY, detail: `the ${role}'s reply ${where} was empty`, turn, speaker };
        case "repeat": {
          const earlier = replies[result.of];
          return {
            reason: StopReason.LOOP_DETECTED,
            detail: `the ${role}'s reply ${where} repeated ${earlier ? `the ${earlier.role}'s reply ${earlier.where}` : "an earlier reply"}, so it was not delivered`,
            turn,
            speaker,
          };
        }
        case "timeout":
          return {
            reason: StopReason.STEP_TIMEOUT,
            detail: `the ${role} did not reply within ${plan.stepTimeoutMs} ms ${where}`,
            turn,
            speaker,
          };
        case "failed":
          return {
            reason: StopReason.AGENT_FAILED,
            detail: `the ${role} failed ${where}: ${result.detail}`,
            turn,
            speaker,
          };
        case "canceled":
          return {
            reason: StopReason.CANCELED,
            detail: `the ${role}'s step ${where} was canceled: ${result.detail}`,
            turn,
            speaker,
          };
        case "refused":
          return {
            reason: refusalStops[result.reason],
            detail: `the ${role} refused the step ${where} (${result.reason}): ${result.detail}`,
            turn,
            speaker,
          };
      }
    };

    const report = (phase: Phase, role: Role, turn: number, result: StepResult) => {
      if (result.kind === "reply") log.append({ phase, turn, maxTurns, speaker: speakerOf[role], text: result.text });
      else if (result.kind === "silent" || result.kind === "repeat" || result.kind === "empty")
        log.append({ phase, turn, maxTurns, speaker: speakerOf[role], silent: result.kind !== "empty" });
    };

    // Round one.
    if (outOfBudget()) return finish(budgetStop(0, "target"));
    const first = await step("target", "round-one", 0, plan.text, []);
    report(Phase.ROUND_ONE, "target", 0, first);
    const firstStop = stopOf(first, "target", "in round one", 0);
    if (firstStop || first.kind !== "reply") return finish(firstStop!);
    const roundOne: Reply = {
      role: "target",
      text: first.text,
      digest: replyDigest(first.text),
      where: "in round one",
    };
    replies.push(roundOne);

    // Ping-pong: the requester answers the round-one reply first.
    let latest = roundOne;
    let undelivered: Reply | undefined = roundOne;
    let stop: Stop | undefined;
    for (let turn = 1; turn <= maxTurns && !stop; turn++) {
      const role: Role = turn % 2 === 1 ? "requester" : "target";
      if (outOfBudget()) {
        stop = budgetStop(turn, role);
        break;
      }
      const where = `at turn ${turn} of ${maxTurns}`;
      const result = await step(
        role,
        "ping-pong",
        turn,
        latest.text,
        replies.map((r) => r.digest),
      );
      undelivered = undefined;
      report(Phase.PING_PONG, role, turn, result);
      stop = stopOf(result, role, where, turn);
      if (result.kind === "reply") {
        latest = { role, text: result.text, digest: replyDigest(result.text), where };
        replies.push(latest);
        undelivered = latest;
      }
    }
    stop ??= {
      reason: StopReason.TURN_LIMIT,
      detail:
        maxTurns === 0 ? "no ping-pong turns were allowed (max_turns 0)" : `all ${maxTurns} ping-pong turns were used`,
      turn: maxTurns,
      speaker: speakerOf[latest.role],
    };

    // The last reply nobody answered still belongs in the listener's thread.
    if (undelivered) await this.deliver(plan, undelivered, hops, steps);

    if (!announcing.has(stop.reason)) return finish(stop);
    if (outOfBudget()) return finish(stop, "", "no step budget was left for the announce step");
    const announce = await step(
      "target",
      "announce",
      0,
      `Agent-to-agent conversation ${log.id} with ${plan.requester.id} ended: ${stop.detail}.`,
      replies.filter((r) => r.role === "target").map((r) => r.digest),
      { request: plan.text, roundOne: roundOne.text, latest: latest.text },
    );
    report(Phase.ANNOUNCE, "target", 0, announce);
    switch (announce.kind) {
      case "reply":
        return finish(stop, announce.text, "the target posted a result to its thread");
      case "silent":
      case "empty":
        return finish(stop, "", "the target chose not to announce anything");
      case "repeat":
        return finish(stop, "", "the target's announcement repeated its own earlier reply, so it was not posted again");
      default:
        return finish(
          stop,
          "",
          `the announce step did not complete: ${stopOf(announce, "target", "at the announce step", 0)?.detail}`,
        );
    }
  }

  /** Appends a reply to the other session's thread without asking it to answer (local sessions only). */
  private async deliver(plan: ConversationPlan, reply: Reply, hops: readonly string[], steps: number): Promise<void> {
    const listener = reply.role === "requester" ? "target" : "requester";
    await this.record(plan, "delivery", reply.text, { to: listener, hops, steps });
  }

  /**
   * Tells the requester's thread how the conversation ended: why it stopped,
   * and what the target announced or that it announced nothing.
   */
  private async recordOutcome(plan: ConversationPlan): Promise<void> {
    const done = plan.log.events[plan.log.events.length - 1];
    if (!done || done.phase !== Phase.DONE) return;
    const reason = StopReason[done.stopReason] ?? String(done.stopReason);
    const announced =
      done.announcedText !== "" ? `${plan.target.id} announced: ${done.announcedText}` : "nothing was announced";
    const text = `Agent-to-agent conversation ${plan.log.id} with ${plan.target.id} ended (${reason}): ${done.detail}. Outcome: ${announced}.`;
    await this.record(plan, "outcome", text, { steps: plan.log.events.length });
  }

  /**
   * Stores a message in a local session's thread without asking it to answer:
   * the requester's own request (AGENT: the requester sent it), a reply
   * nobody answered, or the outcome (INTER_SESSION, from the other session).
   */
  private async record(
    plan: ConversationPlan,
    phase: "delivery" | "request" | "outcome",
    text: string,
    options: {
      readonly to?: "requester" | "target";
      readonly provenance?: "agent" | "inter-session";
      readonly hops?: readonly string[];
      readonly steps: number;
    },
  ): Promise<void> {
    const role = options.to ?? "requester";
    const listener = role === "requester" ? plan.requester : plan.target;
    const other = role === "requester" ? plan.target : plan.requester;
    if (listener.kind !== "local") return;
    const provenance = options.provenance ?? "inter-session";
    const message = stepMessage({
      messageId: `${plan.log.id}/${options.steps}/${phase}`,
      contextId: listener.contextId,
      text,
      role: provenance === "agent" ? MessageRole.AGENT : MessageRole.USER,
      metadata: stepMetadata(
        {
          conversationId: plan.log.id,
          phase,
          turn: 0,
          maxTurns: plan.maxTurns,
          role,
          self: listener.id,
          other: other.id,
          suppress: [],
        },
        provenance === "agent" ? listener.id : other.id,
        options.hops ?? [...plan.trace, plan.target.id],
      ),
    });
    try {
      await this.deps.store.append(
        { tenant: plan.tenant, contextId: listener.contextId },
        { messageId: message.messageId, provenance, payload: toBinary(MessageSchema, message) },
      );
    } catch (error) {
      this.deps.logger.warn({ conversationId: plan.log.id, phase, err: error }, "could not record a conversation step");
    }
  }
}
