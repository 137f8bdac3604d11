// Sessions are records: a Converse session's steps are stored, listed with ListConversations (newest first, paged,
// filtered by state and agent, per tenant), readable after a real process restart on LevelDB and from a second
// PostgreSQL replica, ended at restart when a crash cut them, and deleted with their threads.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Client, Code, ConnectError, createClient } from "@connectrpc/connect";
import { ConversationState, type ConverseEvent, Phase, SessionService, StopReason } from "@parley/proto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "../../store/test/pg-helpers.js";
import { type SpawnedServer, spawnServer } from "./fixtures/spawn-server.js";
import { startTestServer, type TestServer } from "./harness.js";

const agents = [
  { name: "asker", type: "script", options: { replies: ["Thanks.\nREPLY_SKIP"] } },
  { name: "answerer", type: "script", options: { replies: ["Here is the answer", "ANNOUNCE_SKIP"] } },
  { name: "helper", type: "script", options: { replies: ["Helping out", "ANNOUNCE_SKIP"] } },
  { name: "stuck", type: "script", options: { replies: [{ delayMs: 600_000 }] } },
];

function local(agent: string, contextId: string) {
  return { endpoint: { case: "agent" as const, value: agent }, contextId };
}

async function converse(
  sessions: Client<typeof SessionService>,
  requester: string,
  target: string,
  contexts: [string, string],
  text = "Please help",
) {
  const events: ConverseEvent[] = [];
  for await (const res of sessions.converse({
    requester: local(requester, contexts[0]),
    target: local(target, contexts[1]),
    text,
    maxTurns: 1,
  })) {
    events.push(res.event!);
  }
  return events;
}

async function codeOf(work: Promise<unknown>): Promise<Code | "ok"> {
  return work.then(
    () => "ok" as const,
    (error: unknown) => ConnectError.from(error).code,
  );
}

async function watchAll(sessions: Client<typeof SessionService>, conversationId: string) {
  const events: ConverseEvent[] = [];
  for await (const res of sessions.watchConversation({ conversationId })) events.push(res.event!);
  return events;
}

describe("ListConversations (in-process server)", () => {
  let server: TestServer;
  let alice: Client<typeof SessionService>;
  let bob: Client<typeof SessionService>;
  const ids: string[] = [];

  beforeAll(async () => {
    server = await startTestServer({
      agents: agents as never,
      apiKeys: { "key-alice": "alice", "key-bob": "bob" },
    });
    const as = (key: string) =>
      createClient(SessionService, server.transport("grpc", { authorization: `Bearer ${key}` }));
    alice = as("key-alice");
    bob = as("key-bob");
    // Five finished conversations of alice: three with answerer, two with helper; one of bob.
    for (let i = 0; i < 5; i++) {
      const events = await converse(alice, "asker", i < 3 ? "answerer" : "helper", [`a-${i}`, `b-${i}`]);
      expect(events[events.length - 1]!.phase).toBe(Phase.DONE);
      ids.unshift(events[0]!.conversationId);
    }
    await converse(bob, "asker", "answerer", ["bob-a", "bob-b"]);
  }, 60_000);
  afterAll(async () => {
    await server?.close();
  });

  async function all(query: { state?: ConversationState; agent?: string }, pageSize: number) {
    const seen: string[] = [];
    let pageToken = "";
    do {
      const page = await alice.listConversations({ ...query, pageSize, pageToken });
      expect(page.conversations.length).toBeLessThanOrEqual(pageSize);
      seen.push(...page.conversations.map((c) => c.conversationId));
      pageToken = page.nextPageToken;
    } while (pageToken !== "");
    return seen;
  }

  it("pages through a tenant's conversations newest first", async () => {
    expect(await all({}, 2)).toEqual(ids);
    expect(await all({}, 100)).toEqual(ids);
    const first = (await alice.listConversations({ pageSize: 1 })).conversations[0]!;
    expect(first).toMatchObject({
      conversationId: ids[0],
      state: ConversationState.DONE,
      requesterAgent: "asker",
      targetAgent: "helper",
      requesterContextId: "a-4",
      targetContextId: "b-4",
      stopReason: StopReason.SILENCE,
      text: "Please help",
    });
    expect(first.eventCount).toBeGreaterThan(2n);
  });

  it("filters by state and by agent, on either side", async () => {
    expect(await all({ agent: "helper" }, 1)).toEqual(ids.slice(0, 2));
    expect(await all({ agent: "answerer", state: ConversationState.DONE }, 2)).toEqual(ids.slice(2));
    expect(await all({ agent: "asker" }, 3)).toEqual(ids);
    expect(await all({ state: ConversationState.RUNNING }, 3)).toEqual([]);
    expect(await all({ agent: "nobody" }, 3)).toEqual([]);
  });

  it("keeps tenants apart and refuses bad pages", async () => {
    const bobs = (await bob.listConversations({})).conversations;
    expect(bobs).toHaveLength(1);
    expect(ids).not.toContain(bobs[0]!.conversationId);
    expect(await codeOf(bob.getConversation({ conversationId: ids[0]! }))).toBe(Code.NotFound);
    expect(await codeOf(alice.listConversations({ pageSize: 101 }))).toBe(Code.InvalidArgument);
    const filtered = await alice.listConversations({ pageSize: 1, agent: "helper" });
    expect(await codeOf(alice.listConversations({ pageSize: 1, pageToken: filtered.nextPageToken }))).toBe(
      Code.InvalidArgument,
    );
  });

  it("deletes a conversation with either of its threads", async () => {
    const threads = server.threads({ authorization: "Bearer key-alice" });
    const removed = await threads.deleteThread({ contextId: "b-0" });
    expect(removed.deletedSessionCount).toBe(1n);
    expect(await codeOf(alice.getConversation({ conversationId: ids[4]! }))).toBe(Code.NotFound);
    expect(await all({}, 10)).toEqual(ids.slice(0, 4));
  });
  it("answers a retry (same request_id) from the record, and starts anew once its thread was deleted", async () => {
    const request = {
      requester: local("asker", "rq-a"),
      target: local("answerer", "rq-b"),
      text: "Please help",
      maxTurns: 1,
      requestId: "rq-1",
    };
    const idOf = async () => {
      let id = "";
      for await (const res of alice.converse(request)) id ||= res.event!.conversationId;
      return id;
    };
    const first = await idOf();
    expect(await idOf()).toBe(first);
    await server.threads({ authorization: "Bearer key-alice" }).deleteThread({ contextId: "rq-a" });
    const again = await idOf();
    expect(again).not.toBe(first);
    expect((await alice.getConversation({ conversationId: again })).conversation?.state).toBe(ConversationState.DONE);
  });
});

function configFile(dir: string): string {
  const file = join(dir, "sessions-config.json");
  writeFileSync(file, JSON.stringify({ agents, sessions: { maxTurns: 4, defaultTurns: 1 } }));
  return file;
}

async function stopServer(server: SpawnedServer, signal: NodeJS.Signals = "SIGTERM") {
  server.closeClients();
  server.child.kill(signal);
  await server.exited;
}

describe("stored sessions across a real restart (LevelDB)", () => {
  const dir = mkdtempSync(join(tmpdir(), "parley-sessions-restart-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("lists and reads a finished session after a restart, and ends one a SIGKILL cut", async () => {
    const args = ["--config", configFile(dir)];
    const dataDir = join(dir, "data");
    const first = await spawnServer({ dataDir, args });
    let finished: ConverseEvent[];
    let cutId: string;
    try {
      finished = await converse(first.sessions(), "asker", "answerer", ["r-1", "t-1"]);
      expect(finished[finished.length - 1]!.stopReason).toBe(StopReason.SILENCE);
      // One left running (its target never answers) when the process is killed.
      const accepted = await first.sessions().converse({
        requester: local("asker", "r-2"),
        target: local("stuck", "t-2"),
        text: "Are you there?",
        waitMs: 0,
      });
      cutId = "";
      for await (const res of accepted) cutId = res.event!.conversationId;
      // Stored before the kill: the running record is read back through the API (from memory here).
      expect((await first.sessions().getConversation({ conversationId: cutId })).conversation?.state).toBe(
        ConversationState.RUNNING,
      );
      for (;;) {
        const listed = await first.sessions().listConversations({ state: ConversationState.RUNNING });
        if (listed.conversations.some((c) => c.conversationId === cutId)) break;
      }
    } finally {
      await stopServer(first, "SIGKILL");
    }

    const second = await spawnServer({ dataDir, args });
    try {
      const sessions = second.sessions();
      const id = finished[0]!.conversationId;
      const got = (await sessions.getConversation({ conversationId: id })).conversation!;
      expect(got.state).toBe(ConversationState.DONE);
      expect(got.events).toEqual(finished);
      expect(await watchAll(sessions, id)).toEqual(finished);
      const listed = (await sessions.listConversations({})).conversations;
      expect(listed.map((c) => c.conversationId)).toEqual([cutId, id]);
      // The cut one was ended when the store opened again, with a last event that says why.
      expect(listed[0]).toMatchObject({ state: ConversationState.DONE, stopReason: StopReason.CANCELED });
      const cut = (await sessions.getConversation({ conversationId: cutId })).conversation!;
      expect(cut.events[cut.events.length - 1]).toMatchObject({ phase: Phase.DONE, stopReason: StopReason.CANCELED });
      expect(cut.events[cut.events.length - 1]!.detail).toMatch(/stopped before it ended/);
    } finally {
      await stopServer(second);
    }
  }, 120_000);
});

describe("stored sessions on a second PostgreSQL replica", () => {
  let database: TestDatabase;
  const dir = mkdtempSync(join(tmpdir(), "parley-sessions-pg-"));
  beforeAll(async () => {
    database = await createTestDatabase();
  });
  afterAll(async () => {
    rmSync(dir, { recursive: true, force: true });
    await database?.drop();
  });

  it("lists, reads and watches on replica B a session that ran on replica A", async () => {
    const args = ["--config", configFile(dir)];
    const env = { PARLEY_STORE_URL: database.url };
    const a = await spawnServer({ dataDir: join(dir, "a"), args, env });
    const b = await spawnServer({ dataDir: join(dir, "b"), args, env });
    try {
      const finished = await converse(a.sessions(), "asker", "helper", ["pg-r", "pg-t"]);
      const id = finished[0]!.conversationId;
      const onB = b.sessions();
      expect((await onB.getConversation({ conversationId: id })).conversation?.events).toEqual(finished);
      expect(await watchAll(onB, id)).toEqual(finished);
      expect((await onB.listConversations({ agent: "helper" })).conversations.map((c) => c.conversationId)).toEqual([
        id,
      ]);
      // Deleted through B with its target thread: gone on A too.
      expect((await b.threads().deleteThread({ contextId: "pg-t" })).deletedSessionCount).toBe(1n);
      expect(await codeOf(a.sessions().getConversation({ conversationId: id }))).toBe(Code.NotFound);
      expect((await a.sessions().listConversations({})).conversations).toEqual([]);
    } finally {
      await stopServer(a);
      await stopServer(b);
    }
  }, 120_000);
});
