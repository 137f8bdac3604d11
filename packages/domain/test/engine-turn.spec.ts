// The turn an engine run hands its agent makes its guard block and its signal only when read, and a reframed turn
// (a session step's input) keeps the run's signal and stop reason: both are read on the turn's prototype, which a
// spread would have dropped.
import { create } from "@bufbuild/protobuf";
import { MessageSchema, Role } from "@parley/proto";
import { describe, expect, it } from "vitest";
import { type AgentTurn, turnStopReason } from "../src/agent/agent.js";
import { reframeTurn } from "../src/agent/reframed-turn.js";
import { ChainLedger } from "../src/chain/chain-budget.js";
import { EngineTurn } from "../src/engine/engine-turn.js";
import { RunStop, TaskRun } from "../src/engine/task-run.js";
import { emptyTask } from "../src/engine/turn-messages.js";
import type { HistoryEntry } from "../src/thread/history.js";

const message = create(MessageSchema, {
  messageId: "m2",
  role: Role.USER,
  parts: [{ content: { case: "text", value: "and now?" } }],
});
const history: HistoryEntry[] = [{ sequence: 1, provenance: "user", text: "earlier question" }];

function turnOf(run: TaskRun): EngineTurn {
  return new EngineTurn(
    run,
    {
      tenant: "t",
      contextId: "c",
      taskId: "task",
      message,
      text: "and now?",
      history,
      hops: [],
      chain: new ChainLedger({ id: "chain", hops: [], maxHops: 8, stepsLeft: 20, deadline: Date.now() + 60_000 }),
      streaming: false,
    },
    10_000,
  );
}

const runOf = () => new TaskRun("t", "c", emptyTask("task", "c"), { messageId: "m2", payload: new Uint8Array() });

/** Not stopped until the run is; then stopped with the run's reason, its signal the run's, aborted with it. */
function expectStopsWithRun(turn: AgentTurn, run: TaskRun, stop: RunStop): void {
  expect(turnStopReason(turn)).toBeUndefined();
  run.abort(stop);
  expect(turnStopReason(turn)).toBe(stop);
  expect(turn.signal).toBe(run.signal);
  expect(turn.signal.aborted).toBe(true);
  expect(turn.signal.reason).toBe(stop);
}

describe("EngineTurn", () => {
  it("builds its guard block once, when read, with the history before the new text", () => {
    const turn = turnOf(runOf());
    const framed = turn.framedText;
    expect(framed).toContain("earlier question");
    expect(framed.indexOf("earlier question")).toBeLessThan(framed.lastIndexOf("and now?"));
    // Read again: the same block (its nonce drawn once), not a second one.
    expect(turn.framedText).toBe(framed);
  });

  it("hands out the run's signal and answers the stop reason from the run", () => {
    const run = runOf();
    expectStopsWithRun(turnOf(run), run, new RunStop("cancel", "canceled on request"));
  });
});

describe("reframeTurn", () => {
  it("changes the input text and keeps every other field, the signal and the stop reason of the turn", () => {
    const run = runOf();
    const turn = turnOf(run);
    const reframed = reframeTurn(turn, "step: and now?", "step: framed");
    expect(reframed.text).toBe("step: and now?");
    expect(reframed.framedText).toBe("step: framed");
    expect(reframed).toMatchObject({ tenant: "t", contextId: "c", taskId: "task", message, history, streaming: false });
    expect(reframed.chain).toBe(turn.chain);
    expectStopsWithRun(reframed, run, new RunStop("shutdown", "shutdown"));
  });
});
