import { Code, ConnectError } from "@connectrpc/connect";
import { TaskState } from "@parley/proto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type ConversationEvent,
  createConversation,
  createParleyClient,
  type ParleyClient,
  type ParleyProtocol,
  TaskFailedError,
} from "../src/index.js";
import { startServer, type TestServer } from "./harness.js";

let server: TestServer;
const clients: ParleyClient[] = [];

function client(protocol: ParleyProtocol, token?: string) {
  const c = createParleyClient({ baseUrl: server.baseUrl, protocol, token });
  clients.push(c);
  return c;
}

beforeAll(async () => {
  server = await startServer({ PARLEY_API_KEYS: "alice-key=alice,bob-key=bob", PARLEY_ECHO_INPUT: "framed" });
});

afterAll(async () => {
  for (const c of clients) c.close();
  await server.close();
});

describe.each(["connect", "grpc", "grpc-web"] as const)("over %s", (protocol) => {
  it("keeps one thread across two sends: the second reply carries the first turn in the guard block", async () => {
    const conversation = createConversation(client(protocol, "alice-key"));
    const first = await conversation.send(`first turn over ${protocol}`);
    expect(first.text).toBe(`first turn over ${protocol}`);
    expect(first.task.status?.state).toBe(TaskState.COMPLETED);
    expect(conversation.contextId).toMatch(/^ctx-/);
    const contextId = conversation.contextId;

    const second = await conversation.send("second turn");
    expect(conversation.contextId).toBe(contextId);
    const guard = /<<<PARLEY_HISTORY (\w+)>>>([\s\S]*)<<<END_PARLEY_HISTORY \1>>>/.exec(second.text);
    expect(guard?.[2]).toContain(`user: first turn over ${protocol}`);
    expect(second.text.endsWith("second turn")).toBe(true);
  });

  it("streams deltas as chunks arrive, then done with the task", async () => {
    const conversation = createConversation(client(protocol, "alice-key"));
    const events: ConversationEvent[] = [];
    const text = "a reply long enough to arrive in several artifact chunks";
    for await (const event of conversation.stream(text)) events.push(event);
    const deltas = events.filter((e) => e.type === "delta");
    expect(deltas.length).toBeGreaterThan(1);
    expect(deltas.map((d) => d.text).join("")).toBe(text);
    const done = events.at(-1);
    expect(done?.type).toBe("done");
    if (done?.type !== "done") throw new Error("no done event");
    expect(done.text).toBe(text);
    expect(done.task.status?.state).toBe(TaskState.COMPLETED);
    expect(done.task.contextId).toBe(conversation.contextId);

    const again: string[] = [];
    for await (const event of conversation.stream("and again")) if (event.type === "delta") again.push(event.text);
    expect(again.join("")).toContain(`user: ${text}`);
  });
});

describe("threads through the conversation", () => {
  it("reads history in both orders and lists the thread, only for its own tenant", async () => {
    const conversation = createConversation(client("connect", "alice-key"));
    await conversation.send("one");
    await conversation.send("two");
    const oldest = await conversation.history({ order: "oldest-first", pageSize: 2 });
    expect(oldest.messages.map((m) => m.sequence)).toEqual([1n, 2n]);
    expect(oldest.nextPageToken).not.toBe("");
    const newest = await conversation.history({ order: "newest-first" });
    expect(newest.messages.map((m) => m.sequence)).toEqual([4n, 3n, 2n, 1n]);

    const mine = await conversation.list({ pageSize: 100 });
    expect(mine.threads.map((t) => t.contextId)).toContain(conversation.contextId);
    const bobs = createConversation(client("connect", "bob-key"));
    const theirs = await bobs.list({ pageSize: 100 });
    expect(theirs.threads.map((t) => t.contextId)).not.toContain(conversation.contextId);
  });

  it("continues a thread from its contextId in a new conversation object", async () => {
    const first = createConversation(client("grpc", "alice-key"));
    await first.send("remember me");
    const resumed = createConversation(client("connect", "alice-key"), { contextId: first.contextId });
    const reply = await resumed.send("do you?");
    expect(reply.text).toContain("user: remember me");
  });

  it("sends the token as a bearer credential: a wrong one is refused by name", async () => {
    const conversation = createConversation(client("connect", "not-a-key"));
    const error = await conversation.send("hi").catch((e: unknown) => ConnectError.from(e));
    expect(error).toBeInstanceOf(ConnectError);
    expect((error as ConnectError).code).toBe(Code.Unauthenticated);
  });

  it("history() without a contextId says what is missing", async () => {
    await expect(createConversation(client("connect", "alice-key")).history()).rejects.toThrow(/needs a contextId/);
  });
});

describe("task states", () => {
  let conformance: TestServer;
  let c: ParleyClient;

  beforeAll(async () => {
    conformance = await startServer({}, ["--agent", "conformance"]);
    c = createParleyClient({ baseUrl: conformance.baseUrl, protocol: "grpc" });
  });

  afterAll(async () => {
    c.close();
    await conformance.close();
  });

  it("continues a task waiting for input: the next send carries its taskId", async () => {
    const conversation = createConversation(c);
    const first = await conversation.send("start", { messageId: `tck-input-required-${crypto.randomUUID()}` });
    expect(first.task.status?.state).toBe(TaskState.INPUT_REQUIRED);
    const waiting = first.task.id;
    const second = await conversation.send("here is the input", {
      messageId: `tck-complete-task-${crypto.randomUUID()}`,
    });
    expect(second.task.id).toBe(waiting);
    expect(second.task.status?.state).toBe(TaskState.COMPLETED);
    const third = await conversation.send("a new question", { messageId: `tck-complete-task-${crypto.randomUUID()}` });
    expect(third.task.id).not.toBe(waiting);
  });

  it("a rejected task fails with TaskFailedError naming the state", async () => {
    const conversation = createConversation(c);
    const error = await conversation
      .send("please", { messageId: `tck-reject-task-${crypto.randomUUID()}` })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TaskFailedError);
    expect((error as Error).message).toMatch(/ended TASK_STATE_REJECTED: rejected/);
  });
});
