import { create } from "@bufbuild/protobuf";
import { ConverseEventSchema, Phase, Speaker, StopReason } from "@parley/proto";
import { describe, expect, it } from "vitest";
import { converseDone, emptyConverseLog, phaseProgress, reduceConverse } from "../src/logic/converse-log.js";

const event = (sequence: number, phase: Phase, extra: Record<string, unknown> = {}) =>
  create(ConverseEventSchema, { conversationId: "cv1", sequence: BigInt(sequence), phase, maxTurns: 2, ...extra });

describe("reduceConverse", () => {
  it("follows the phases in order, ignores a replayed step and keeps the stop reason", () => {
    const events = [
      event(1, Phase.ACCEPTED, { requesterContextId: "r", targetContextId: "t" }),
      event(2, Phase.ROUND_ONE, { speaker: Speaker.TARGET, text: "a0" }),
      event(3, Phase.PING_PONG, { turn: 1, speaker: Speaker.REQUESTER, text: "", silent: true }),
      event(2, Phase.ROUND_ONE, { speaker: Speaker.TARGET, text: "a0" }),
      event(4, Phase.ANNOUNCE, { speaker: Speaker.TARGET, text: "summary" }),
      event(5, Phase.DONE, {
        stopReason: StopReason.SILENCE,
        detail: "the requester stayed silent",
        announcedText: "summary",
      }),
    ];
    let log = emptyConverseLog;
    for (const e of events) log = reduceConverse(log, e);
    expect(log.steps.map((s) => s.sequence)).toEqual([1, 2, 3, 4, 5]);
    expect(log.steps[2]?.silent).toBe(true);
    expect(log.requesterContextId).toBe("r");
    expect(converseDone(log)).toBe(true);
    expect([log.stopReason, log.announcedText, log.detail]).toEqual([
      StopReason.SILENCE,
      "summary",
      "the requester stayed silent",
    ]);
    expect(phaseProgress(log).every((p) => p.reached)).toBe(true);
  });

  it("marks the phases not reached yet", () => {
    const log = reduceConverse(emptyConverseLog, event(1, Phase.ACCEPTED));
    expect(phaseProgress(log).map((p) => p.reached)).toEqual([true, false, false, false, false]);
    expect(converseDone(log)).toBe(false);
    expect(log.stopReason).toBe(StopReason.UNSPECIFIED);
  });
});
