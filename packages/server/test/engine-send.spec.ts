// What the engine does with an inbound message before its agent runs, through a real server: silence tokens
// refused, an in-process caller's message left as it sent it, the history block built for the agents that read it.
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { A2AService, type Message, type Task } from "@parley/proto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { failure, startTestServer, type TestServer, userMessage } from "./harness.js";

describe("a send before its agent runs", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({
      agents: [
        { name: "echo", type: "echo", options: { reply: "message" } },
        { name: "framed", type: "echo", options: { reply: "message", input: "framed" } },
        { name: "tasks", type: "echo", options: { reply: "task" } },
      ],
    });
  });
  afterAll(async () => server.close());

  it("refuses a request that is a silence token, decorated or not, and delivers text that only holds one", async () => {
    const client = server.a2a("grpc");
    for (const text of ["NO_REPLY", "  **REPLY_SKIP**. ", "\n`HEARTBEAT_OK`\n\n"]) {
      const error = await failure(client.sendMessage({ message: userMessage(text) }));
      expect(error.code).toBe(Code.InvalidArgument);
      expect(error.rawMessage).toContain("silence token");
    }
    for (const text of ["no reply here", "NO_REPLY\nbut a second line", "please NO_REPLY later"]) {
      const reply = await client.sendMessage({ message: userMessage(text) });
      expect(reply.payload.case).toBe("message");
    }
  });

  it("leaves an in-process caller's message object as it was sent; the task's history has its ids", async () => {
    const client = createClient(A2AService, server.parley.inProcessTransport());
    const message = userMessage("in process");
    const reply = await client.sendMessage(
      { message, configuration: { returnImmediately: true } },
      { headers: { "a2a-version": "1.0" } },
    );
    expect(message).toEqual(userMessage("in process", { messageId: message.messageId }));
    const task = reply.payload.value as Task;
    const stored = task.history[0]!;
    expect(stored.messageId).toBe(message.messageId);
    expect(stored.contextId).toBe(task.contextId);
    expect(stored.taskId).toBe(task.id);
    expect(stored.parts).toEqual([expect.objectContaining({ content: { case: "text", value: "in process" } })]);
  });

  it("hands the agent the history block on a reused context, with a nonce of its own per turn", async () => {
    const client = server.a2a("connect", { "parley-agent": "framed" });
    const contextId = `framed-${crypto.randomUUID()}`;
    const first = await client.sendMessage({ message: userMessage("first words", { contextId }) });
    expect(textOf(first.payload.value as Message)).toBe("first words");
    const second = textOf(
      (await client.sendMessage({ message: userMessage("second words", { contextId }) })).payload.value as Message,
    );
    const third = textOf(
      (await client.sendMessage({ message: userMessage("third words", { contextId }) })).payload.value as Message,
    );
    expect(second).toMatch(/^<<<PARLEY_HISTORY ([0-9a-f]{12})>>>\n[\s\S]*user: first words\n[\s\S]*\n\nsecond words$/);
    const nonce = (text: string) => /^<<<PARLEY_HISTORY ([0-9a-f]{12})>>>/.exec(text)?.[1];
    expect(nonce(third)).toBeDefined();
    expect(nonce(third)).not.toBe(nonce(second));
  });
});

function textOf(message: Message): string {
  const part = message.parts[0]?.content;
  if (part?.case !== "text") throw new ConnectError("the reply has no text part");
  return part.value;
}
