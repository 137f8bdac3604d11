// Silence, precisely and append-only: one token grammar for sessions and plain sends, a reply that is only a
// token is silent, and a trailing token line is dropped without taking back anything already streamed.
import { createClient } from "@connectrpc/connect";
import { messageText, silenceTokenSet } from "@parley/domain";
import { isOnlyToken, isSilentReply, tokenKey, trailingTokenAt } from "@parley/domain/internal";
import {
  type ConverseEvent,
  HistoryOrder,
  Phase,
  Provenance,
  SessionService,
  StopReason,
  type StreamResponse,
  type Task,
  TaskState,
} from "@parley/proto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, type TestServer, userMessage } from "./harness.js";

const tokens = silenceTokenSet(["REPLY_SKIP", "ANNOUNCE_SKIP", "NO_REPLY", "HEARTBEAT_OK"]);
const variants = [
  "NO REPLY",
  "No reply.",
  "no_reply",
  "No-Reply",
  "(no reply)",
  "**REPLY_SKIP**",
  '"no_reply"',
  "_No Reply_!",
  "`HEARTBEAT_OK`",
  "[no - reply]",
];

describe("the silence token grammar", () => {
  it("reads every decorated or re-spelled variant as its token, and text around a token as no token", () => {
    for (const v of variants) {
      expect(isOnlyToken(v, tokens), v).toBe(true);
      expect(isOnlyToken(`\n  ${v}  \n\n`, tokens), v).toBe(true);
    }
    expect(tokenKey("No-Reply")).toBe("no_reply");
    for (const text of ["no reply here", "please NO_REPLY later", "no", "reply", "NO_REPLY_NOW", "noreply"]) {
      expect(isOnlyToken(text, tokens), text).toBe(false);
    }
  });

  it("finds a trailing token line, and only a last one", () => {
    const text = "Here is my real answer.\n(no reply)\n";
    expect(trailingTokenAt(text, tokens)).toBe("Here is my real answer.\n".length);
    expect(trailingTokenAt("NO_REPLY\nbut a second line", tokens)).toBe(-1);
    // A session step's rule: a trailing token line makes the whole (withheld) step silent.
    expect(isSilentReply("Thanks, that settles it.\nNo-Reply", tokens)).toBe(true);
  });
});

function script(name: string, replies: string[]) {
  return { name, type: "script" as const, options: { replies } };
}

describe("silence on plain sends", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({
      agents: [
        { name: "echo", type: "echo", options: { input: "text", chunks: 11 } },
        { name: "direct", type: "echo", options: { input: "text", reply: "message" } },
        ...variants.map((v, i) => script(`quiet-${i}`, [v])),
      ],
    });
  });
  afterAll(async () => server?.close());

  async function stored(contextId: string) {
    const page = await server.threads().getThreadHistory({ contextId, order: HistoryOrder.OLDEST_FIRST, pageSize: 50 });
    return page.messages.map((m) => ({ provenance: m.provenance, text: messageText(m.message!) }));
  }

  it("a reply that is only a token, in any variant, is neither delivered nor stored", async () => {
    for (let i = 0; i < variants.length; i++) {
      const contextId = `quiet-${i}`;
      const client = server.a2a("grpc", { "parley-agent": `quiet-${i}` });
      const events: StreamResponse[] = [];
      for await (const e of client.sendStreamingMessage({ message: userMessage("say something", { contextId }) })) {
        events.push(e);
      }
      const seen = events.flatMap((e) => (e.payload.case === "artifactUpdate" ? [e.payload.value.artifact!] : []));
      expect(seen.map((a) => messageText(a)).join(""), variants[i]).toBe("");
      const last = events[events.length - 1]!;
      expect(last.payload.case).toBe("statusUpdate");
      const task = await server.a2a("grpc").getTask({ id: (events[0]!.payload.value as Task).id });
      expect(task.status?.state).toBe(TaskState.COMPLETED);
      expect(task.artifacts).toEqual([]);
      expect(task.metadata?.parley).toEqual({ silent: true });
      expect(await stored(contextId)).toEqual([{ provenance: Provenance.USER, text: "say something" }]);
    }
  });

  it("a streamed reply ending in a token line stores exactly what the subscriber saw; the token reaches no one", async () => {
    for (const token of ["NO_REPLY", "(no reply)", "**REPLY_SKIP**", "No-Reply."]) {
      const contextId = `streamed-${tokenKey(token)}-${crypto.randomUUID()}`;
      const answer = "Here is my real answer, long enough to stream in eleven chunks of text.\n";
      const chunks: string[] = [];
      let taskId = "";
      const client = server.a2a("grpc", { "parley-agent": "echo" });
      for await (const e of client.sendStreamingMessage({ message: userMessage(answer + token, { contextId }) })) {
        if (e.payload.case === "task") taskId = e.payload.value.id;
        if (e.payload.case === "artifactUpdate") chunks.push(messageText(e.payload.value.artifact!));
      }
      const seen = chunks.join("");
      expect(seen).toBe(answer);
      // Not a letter of the token line went out, not even the prefix held while it might have been one.
      for (const chunk of chunks) expect(answer).toContain(chunk);
      expect(chunks.length).toBeGreaterThan(5);
      const task = await server.a2a("grpc").getTask({ id: taskId });
      expect(task.status?.state).toBe(TaskState.COMPLETED);
      expect(task.artifacts.map((a) => messageText(a)).join("")).toBe(seen);
      expect(task.metadata?.parley).toBeUndefined();
      const thread = await stored(contextId);
      expect(thread).toEqual([
        { provenance: Provenance.USER, text: answer + token },
        { provenance: Provenance.AGENT, text: seen },
      ]);
    }
  });

  it("a direct (Message) reply ending in a token line keeps the rest", async () => {
    const contextId = `direct-${crypto.randomUUID()}`;
    const client = server.a2a("grpc", { "parley-agent": "direct" });
    const reply = await client.sendMessage({ message: userMessage("Sure, done.\n_No Reply_", { contextId }) });
    expect(reply.payload.case).toBe("message");
    expect(messageText(reply.payload.value as Parameters<typeof messageText>[0])).toBe("Sure, done.\n");
    expect((await stored(contextId))[1]).toEqual({ provenance: Provenance.AGENT, text: "Sure, done.\n" });
  });
});

describe("silence in sessions", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({
      sessions: { maxTurns: 6, defaultTurns: 6, stepBudget: 20 },
      agents: [
        script("target", ["Round one answer", "Second answer", "Third answer", "ANNOUNCE_SKIP"]),
        ...variants.map((v, i) => script(`requester-${i}`, [v])),
      ],
    });
  });
  afterAll(async () => server?.close());

  it("every variant stops the session within one turn and is neither delivered nor stored", async () => {
    const sessions = createClient(SessionService, server.transport("grpc"));
    for (let i = 0; i < variants.length; i++) {
      const events: ConverseEvent[] = [];
      const request = {
        requester: { endpoint: { case: "agent" as const, value: `requester-${i}` }, contextId: `sr-${i}` },
        target: { endpoint: { case: "agent" as const, value: "target" }, contextId: `st-${i}` },
        text: "Is it done?",
      };
      for await (const { event } of sessions.converse(request)) if (event) events.push(event);
      const pingPong = events.filter((e) => e.phase === Phase.PING_PONG);
      expect(
        pingPong.map((e) => [e.turn, e.silent, e.text]),
        variants[i],
      ).toEqual([[1, true, ""]]);
      const last = events[events.length - 1]!;
      expect(last.phase).toBe(Phase.DONE);
      expect(last.stopReason).toBe(StopReason.SILENCE);
      for (const contextId of [`sr-${i}`, `st-${i}`]) {
        const page = await server
          .threads()
          .getThreadHistory({ contextId, order: HistoryOrder.OLDEST_FIRST, pageSize: 50 });
        for (const m of page.messages) expect(tokenKey(messageText(m.message!))).not.toContain(tokenKey(variants[i]!));
      }
    }
  });
});
