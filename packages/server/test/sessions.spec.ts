import type { MessageInitShape } from "@bufbuild/protobuf";
import { type Client, ConnectError, createClient } from "@connectrpc/connect";
import { messageText } from "@parley/domain";
import {
  ConversationState,
  type ConverseEvent,
  type ConverseRequestSchema,
  HistoryOrder,
  Phase,
  Provenance,
  SessionService,
  Speaker,
  StopReason,
} from "@parley/proto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ScriptEntry } from "../src/agents/script-options.js";
import { freePort } from "./fixtures/free-port.js";
import { startTestServer, type TestServer } from "./harness.js";

const tokens = ["REPLY_SKIP", "ANNOUNCE_SKIP", "NO_REPLY", "HEARTBEAT_OK"];

function script(name: string, replies: ScriptEntry[]) {
  return { name, type: "script" as const, options: { replies } };
}

type Request = MessageInitShape<typeof ConverseRequestSchema>;

function local(agent: string, contextId: string) {
  return { endpoint: { case: "agent" as const, value: agent }, contextId };
}

describe("agent-to-agent sessions", () => {
  let remote: TestServer;
  let server: TestServer;
  let sessions: Client<typeof SessionService>;
  let port: number;

  beforeAll(async () => {
    remote = await startTestServer({
      agents: [script("far-agent", ["Remote round one", "Remote says bye", "ANNOUNCE_SKIP"])],
    });
    port = await freePort();
    server = await startTestServer({
      port,
      sessions: { maxTurns: 6, defaultTurns: 2, stepBudget: 6 },
      peers: [
        { name: "far", url: remote.baseUrl, protocol: "grpc" },
        { name: "self", url: `http://127.0.0.1:${port}`, protocol: "grpc" },
      ],
      agents: [
        script("r-silent", ["Thanks, that settles it.\nREPLY_SKIP"]),
        script("t-basic", ["Round one answer", "ANNOUNCE_SKIP"]),
        script("r-chatty", ["q1", "q2", "q3", "q4", "q5", "q6"]),
        script("t-chatty", ["a0", "a1", "Summary: all settled", "a3", "a4"]),
        script("r-loop", ["same thing"]),
        script("t-loop", ["hello", "something else", "ANNOUNCE_SKIP"]),
        script("t-echoing", ["Here is the answer", "Here   is the\nanswer"]),
        script("t-empty", [""]),
        script("t-slow", [{ delayMs: 20_000 }]),
        script("t-fail", [{ fail: "the script broke on purpose" }]),
        script("r-peer", ["Thanks, one more thing", "NO_REPLY"]),
        script("r-quiet", ["REPLY_SKIP"]),
        script("t-count", ["counted reply", "ANNOUNCE_SKIP"]),
        script("loop-a", ["a never gets here"]),
        script("loop-b", [{ converse: { server: "self", to: "loop-c/ctx-c", text: "pass it on" } }, "ANNOUNCE_SKIP"]),
        script("loop-c", [{ converse: { server: "self", to: "loop-a/ctx-a", text: "and back" } }, "ANNOUNCE_SKIP"]),
      ],
    });
    sessions = createClient(SessionService, server.transport("grpc"));
  });
  afterAll(async () => {
    await server?.close();
    await remote?.close();
  });

  async function converse(request: Request, headers?: Record<string, string>): Promise<ConverseEvent[]> {
    const client = headers ? createClient(SessionService, server.transport("grpc", headers)) : sessions;
    const events: ConverseEvent[] = [];
    for await (const { event } of client.converse(request)) if (event) events.push(event);
    return events;
  }

  function done(events: ConverseEvent[]): ConverseEvent {
    const last = events[events.length - 1]!;
    expect(last.phase).toBe(Phase.DONE);
    return last;
  }

  async function history(contextId: string, on: TestServer = server) {
    const page = await on.threads().getThreadHistory({ contextId, order: HistoryOrder.OLDEST_FIRST, pageSize: 100 });
    return page.messages.map((m) => ({ provenance: m.provenance, text: messageText(m.message!) }));
  }

  function expectNoTokens(events: ConverseEvent[], stored: { text: string }[]) {
    for (const e of events) {
      for (const field of [e.text, e.announcedText, e.detail]) for (const t of tokens) expect(field).not.toContain(t);
    }
    for (const m of stored) for (const t of tokens) expect(m.text).not.toContain(t);
  }

  it("stops on a silence token on the last line, stores nothing of it, and marks relayed steps inter-session", async () => {
    const events = await converse({
      requester: local("r-silent", "s1-r"),
      target: local("t-basic", "s1-t"),
      text: "Is the file fixed?",
    });
    expect(events.map((e) => [e.phase, e.speaker, e.silent])).toEqual([
      [Phase.ACCEPTED, Speaker.UNSPECIFIED, false],
      [Phase.ROUND_ONE, Speaker.TARGET, false],
      [Phase.PING_PONG, Speaker.REQUESTER, true],
      [Phase.ANNOUNCE, Speaker.TARGET, true],
      [Phase.DONE, Speaker.REQUESTER, false],
    ]);
    expect(events[1]!.text).toBe("Round one answer");
    expect(events[2]!.text).toBe("");
    const last = done(events);
    expect(last.stopReason).toBe(StopReason.SILENCE);
    expect(last.detail).toContain("requester stayed silent at turn 1 of 2");
    expect(last.announcedText).toBe("");
    expect(new Set(events.map((e) => e.conversationId)).size).toBe(1);
    expect(events.map((e) => Number(e.sequence))).toEqual([1, 2, 3, 4, 5]);
    expect(last.requesterContextId).toBe("s1-r");
    expect(last.targetContextId).toBe("s1-t");

    const target = await history("s1-t");
    const requester = await history("s1-r");
    expect(target).toEqual([
      { provenance: Provenance.INTER_SESSION, text: "Is the file fixed?" },
      { provenance: Provenance.AGENT, text: "Round one answer" },
      { provenance: Provenance.INTER_SESSION, text: expect.stringContaining("ended: the requester stayed silent") },
    ]);
    // The requester's silent reply (with the line above its token) left no trace in its thread; the thread
    // holds the request it sent and how the conversation ended (issue 17: it used to hold neither).
    expect(requester).toEqual([
      { provenance: Provenance.AGENT, text: "Is the file fixed?" },
      { provenance: Provenance.INTER_SESSION, text: "Round one answer" },
      {
        provenance: Provenance.INTER_SESSION,
        text: expect.stringMatching(
          /^Agent-to-agent conversation conv-\S+ with \S+\/t-basic\/s1-t ended \(SILENCE\): the requester stayed silent at turn 1 of 2; the target chose not to announce anything\. Outcome: nothing was announced\.$/,
        ),
      },
    ]);
    expectNoTokens(events, [...target, ...requester]);
  });

  it("runs to the turn limit, delivers the last reply and posts the announcement to the target's thread", async () => {
    const events = await converse({
      requester: local("r-chatty", "s2-r"),
      target: local("t-chatty", "s2-t"),
      text: "Plan the release",
      maxTurns: 1,
    });
    expect(events.map((e) => [e.phase, e.turn, e.text])).toEqual([
      [Phase.ACCEPTED, 0, ""],
      [Phase.ROUND_ONE, 0, "a0"],
      [Phase.PING_PONG, 1, "q1"],
      [Phase.ANNOUNCE, 0, "a1"],
      [Phase.DONE, 1, ""],
    ]);
    const last = done(events);
    expect(last.stopReason).toBe(StopReason.TURN_LIMIT);
    expect(last.announcedText).toBe("a1");
    expect(last.detail).toContain("all 1 ping-pong turns were used");
    const target = await history("s2-t");
    expect(target.map((m) => [m.provenance, m.text])).toEqual([
      [Provenance.INTER_SESSION, "Plan the release"],
      [Provenance.AGENT, "a0"],
      [Provenance.INTER_SESSION, "q1"],
      [Provenance.INTER_SESSION, expect.stringContaining("ended: all 1 ping-pong turns were used")],
      [Provenance.AGENT, "a1"],
    ]);
  });

  it("clamps max_turns to the server's cap, says so, and stops at the step budget", async () => {
    const events = await converse({
      requester: local("r-chatty", "s3-r"),
      target: local("t-chatty", "s3-t"),
      text: "Keep talking",
      maxTurns: 50,
    });
    expect(events[0]!.phase).toBe(Phase.ACCEPTED);
    expect(events[0]!.maxTurns).toBe(6);
    expect(events[0]!.detail).toContain("max_turns 50 is above this server's limit and was clamped to 6");
    const last = done(events);
    expect(last.stopReason).toBe(StopReason.STEP_BUDGET);
    expect(last.detail).toContain("budget of 6 agent steps");
    // Round one plus five turns used the six steps; the sixth turn never ran.
    expect(events.filter((e) => e.phase === Phase.PING_PONG).map((e) => e.turn)).toEqual([1, 2, 3, 4, 5]);
    expect(last.turn).toBe(6);
  });

  it("stops a ping-pong loop when a reply repeats an earlier one, and stores the repeat only once", async () => {
    const events = await converse({
      requester: local("r-loop", "s4-r"),
      target: local("t-loop", "s4-t"),
      text: "Anything new?",
      maxTurns: 5,
    });
    const last = done(events);
    expect(last.stopReason).toBe(StopReason.LOOP_DETECTED);
    expect(last.detail).toContain("the requester's reply at turn 3 of 5 repeated the requester's reply at turn 1 of 5");
    const requester = await history("s4-r");
    expect(requester.filter((m) => m.text === "same thing")).toHaveLength(1);
    expectNoTokens(events, requester);
  });

  it("never announces a repeat of the round-one reply", async () => {
    const events = await converse({
      requester: local("r-quiet", "s5-r"),
      target: local("t-echoing", "s5-t"),
      text: "What is the answer?",
    });
    const last = done(events);
    expect(last.stopReason).toBe(StopReason.SILENCE);
    expect(last.announcedText).toBe("");
    expect(last.detail).toContain("repeated its own earlier reply, so it was not posted again");
    const target = await history("s5-t");
    expect(target.filter((m) => m.provenance === Provenance.AGENT).map((m) => m.text)).toEqual(["Here is the answer"]);
  });

  it("stops on an empty reply, a step timeout and a failing agent, with the reason", async () => {
    const empty = done(
      await converse({ requester: local("r-quiet", "s6-r"), target: local("t-empty", "s6-t"), text: "Hello?" }),
    );
    expect(empty.stopReason).toBe(StopReason.EMPTY_REPLY);
    expect(empty.detail).toBe("the target's reply in round one was empty");

    const slow = done(
      await converse({
        requester: local("r-quiet", "s7-r"),
        target: local("t-slow", "s7-t"),
        text: "Hurry",
        stepTimeoutMs: 200,
      }),
    );
    expect(slow.stopReason).toBe(StopReason.STEP_TIMEOUT);
    expect(slow.detail).toBe("the target did not reply within 200 ms in round one");

    const failed = done(
      await converse({ requester: local("r-quiet", "s8-r"), target: local("t-fail", "s8-t"), text: "Try" }),
    );
    expect(failed.stopReason).toBe(StopReason.AGENT_FAILED);
    expect(failed.detail).toContain("the script broke on purpose");
  });

  it("refuses a request whose hop trace is already at the limit", async () => {
    const trace = Array.from({ length: 8 }, (_, i) => encodeURIComponent(`parley@elsewhere/agent/${i}`)).join(",");
    const events = await converse(
      { requester: local("r-quiet", "s9-r"), target: local("t-basic", "s9-t"), text: "Again" },
      { "parley-hops": trace },
    );
    expect(events.map((e) => e.phase)).toEqual([Phase.ACCEPTED, Phase.DONE]);
    expect(done(events).stopReason).toBe(StopReason.HOP_LIMIT);
    expect(done(events).detail).toContain("passed through 8 sessions");
    await expect(history("s9-t")).rejects.toThrow(/no conversation with contextId "s9-t"/);
  });

  it("stops a three-agent loop A→B→C→A where each reply opens a conversation to the next", async () => {
    const events = await converse({
      requester: local("loop-a", "ctx-a"),
      target: local("loop-b", "ctx-b"),
      text: "start the chain",
      maxTurns: 0,
    });
    const roundOne = events.find((e) => e.phase === Phase.ROUND_ONE)!;
    // B relayed to C, C relayed to A, and that third conversation was refused.
    expect(roundOne.text).toContain(
      "conversation with loop-c/ctx-c: round one: conversation with loop-a/ctx-a: ended HOP_LIMIT",
    );
    expect(roundOne.text).toContain(
      `the target session parley@127.0.0.1:${port}/loop-a/ctx-a already took part in this chain (parley@127.0.0.1:${port}/loop-a/ctx-a → parley@127.0.0.1:${port}/loop-b/ctx-b → parley@127.0.0.1:${port}/loop-c/ctx-c → parley@127.0.0.1:${port}/loop-a/ctx-a): a loop`,
    );
    expect(done(events).stopReason).toBe(StopReason.TURN_LIMIT);
    // A was never asked to speak.
    expect((await history("ctx-a")).filter((m) => m.text === "a never gets here")).toEqual([]);
  });

  it("fire-and-forget returns the accepted event at once; watch and get see the whole conversation", async () => {
    const accepted = await converse({
      requester: local("r-quiet", "s10-r"),
      target: local("t-count", "s10-t"),
      text: "Go on without me",
      waitMs: 0,
    });
    expect(accepted.map((e) => e.phase)).toEqual([Phase.ACCEPTED]);
    const id = accepted[0]!.conversationId;
    expect(id).not.toBe("");
    const watched: ConverseEvent[] = [];
    for await (const { event } of sessions.watchConversation({ conversationId: id })) watched.push(event!);
    expect(watched[0]).toEqual(accepted[0]);
    expect(done(watched).stopReason).toBe(StopReason.SILENCE);
    const got = await sessions.getConversation({ conversationId: id });
    expect(got.conversation?.state).toBe(ConversationState.DONE);
    expect(got.conversation?.events).toEqual(watched);
    await expect(sessions.getConversation({ conversationId: "conv-nope" })).rejects.toThrow(/no conversation/);
  });

  it("a retried Converse with the same request_id attaches to the conversation and runs it once", async () => {
    const request: Request = {
      requester: local("r-quiet", "s11-r"),
      target: local("t-count", "s11-t"),
      text: "Count me once",
      requestId: "retry-1",
    };
    const [first, second] = await Promise.all([converse(request), converse(request)]);
    expect(second).toEqual(first);
    const again = await converse(request);
    expect(again).toEqual(first);
    const target = await history("s11-t");
    expect(target.filter((m) => m.text === "Count me once")).toHaveLength(1);
    expect(target.filter((m) => m.text === "counted reply")).toHaveLength(1);
    const reused = converse({ ...request, text: "Something else" });
    await expect(reused).rejects.toThrow(ConnectError);
    await expect(reused).rejects.toThrow(/request_id "retry-1" was already used for a different request/);
  });

  it("converses with a remote A2A peer (another Parley over gRPC)", async () => {
    const events = await converse({
      requester: local("r-peer", "s12-r"),
      target: { endpoint: { case: "peer", value: "far" }, contextId: "s12-t" },
      text: "Hello from afar",
    });
    expect(events.map((e) => [e.phase, e.speaker, e.text, e.silent])).toEqual([
      [Phase.ACCEPTED, Speaker.UNSPECIFIED, "", false],
      [Phase.ROUND_ONE, Speaker.TARGET, "Remote round one", false],
      [Phase.PING_PONG, Speaker.REQUESTER, "Thanks, one more thing", false],
      [Phase.PING_PONG, Speaker.TARGET, "Remote says bye", false],
      [Phase.ANNOUNCE, Speaker.TARGET, "", true],
      [Phase.DONE, Speaker.TARGET, "", false],
    ]);
    expect(done(events).stopReason).toBe(StopReason.TURN_LIMIT);
    const far = await history("s12-t", remote);
    expect(far.map((m) => [m.provenance, m.text])).toEqual([
      [Provenance.INTER_SESSION, "Hello from afar"],
      [Provenance.AGENT, "Remote round one"],
      [Provenance.INTER_SESSION, "Thanks, one more thing"],
      [Provenance.AGENT, "Remote says bye"],
      [Provenance.INTER_SESSION, expect.stringContaining("ended: all 2 ping-pong turns were used")],
    ]);
    const near = await history("s12-r");
    expect(near.map((m) => [m.provenance, m.text])).toEqual([
      [Provenance.AGENT, "Hello from afar"],
      [Provenance.INTER_SESSION, "Remote round one"],
      [Provenance.AGENT, "Thanks, one more thing"],
      [Provenance.INTER_SESSION, "Remote says bye"],
      [Provenance.INTER_SESSION, expect.stringContaining("ended (TURN_LIMIT): all 2 ping-pong turns were used")],
    ]);
    expectNoTokens(events, [...far, ...near]);
  });
});
