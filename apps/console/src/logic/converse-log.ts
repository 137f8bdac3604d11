import type { Timestamp } from "@bufbuild/protobuf/wkt";
import { type ConverseEvent, Phase, type Speaker, StopReason } from "@parley/proto";

/** One step of an agent-to-agent conversation as the console lists it. */
export interface ConverseStep {
  readonly sequence: number;
  readonly phase: Phase;
  readonly turn: number;
  readonly speaker: Speaker;
  readonly text: string;
  readonly silent: boolean;
  readonly time: Timestamp | undefined;
}

export interface ConverseLog {
  readonly conversationId: string;
  readonly requesterContextId: string;
  readonly targetContextId: string;
  readonly maxTurns: number;
  /** The latest phase seen. */
  readonly phase: Phase;
  readonly steps: readonly ConverseStep[];
  /** Set by the last event. */
  readonly stopReason: StopReason;
  readonly detail: string;
  readonly announcedText: string;
}

export const emptyConverseLog: ConverseLog = {
  conversationId: "",
  requesterContextId: "",
  targetContextId: "",
  maxTurns: 0,
  phase: Phase.UNSPECIFIED,
  steps: [],
  stopReason: StopReason.UNSPECIFIED,
  detail: "",
  announcedText: "",
};

/**
 * Folds one event in. Events carry a sequence number (1, 2, ...), so a
 * watch that replays from the first after a reconnect adds nothing twice.
 */
export function reduceConverse(log: ConverseLog, event: ConverseEvent): ConverseLog {
  const sequence = Number(event.sequence);
  if (log.steps.some((s) => s.sequence === sequence)) return log;
  const step: ConverseStep = {
    sequence,
    phase: event.phase,
    turn: event.turn,
    speaker: event.speaker,
    text: event.text,
    silent: event.silent,
    time: event.time,
  };
  const steps = [...log.steps, step].sort((a, b) => a.sequence - b.sequence);
  const latest = steps[steps.length - 1]!;
  const done = event.phase === Phase.DONE;
  return {
    conversationId: event.conversationId || log.conversationId,
    requesterContextId: event.requesterContextId || log.requesterContextId,
    targetContextId: event.targetContextId || log.targetContextId,
    maxTurns: event.maxTurns || log.maxTurns,
    phase: latest.phase,
    steps,
    stopReason: done ? event.stopReason : log.stopReason,
    detail: done ? event.detail : log.detail,
    announcedText: done ? event.announcedText : log.announcedText,
  };
}

export function converseDone(log: ConverseLog): boolean {
  return log.phase === Phase.DONE;
}

/** The phases in the order a conversation passes them, each with whether it was reached. */
export function phaseProgress(log: ConverseLog): { readonly phase: Phase; readonly reached: boolean }[] {
  const order = [Phase.ACCEPTED, Phase.ROUND_ONE, Phase.PING_PONG, Phase.ANNOUNCE, Phase.DONE];
  const seen = new Set(log.steps.map((s) => s.phase));
  return order.map((phase) => ({ phase, reached: seen.has(phase) }));
}
