import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { AgentTurn } from "@parley/domain";
import { messageText } from "@parley/domain";
import { type Message, type Task, TaskState, type TaskStatusUpdateEvent } from "@parley/proto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createEchoAgent } from "../src/agents/echo-agent.js";
import { echoSummary } from "../src/agents/echo-summary.js";
import { parseScript } from "../src/agents/script-agent.js";
import { loadConfig } from "../src/config/load-config.js";
import { collect, framedEcho, startTestServer, streamedText, type TestServer, userMessage } from "./harness.js";

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve) => {
    let body = "";
    req.on("data", (c) => {
      body += c;
    });
    req.on("end", () => resolve(body));
  });
}

/** A local server that speaks the OpenAI chat-completions streaming protocol. */
async function startChatCompletions(): Promise<{ url: string; requests: unknown[]; server: Server }> {
  const requests: unknown[] = [];
  const server = createServer(async (req, res) => {
    const body = JSON.parse(await readBody(req)) as { messages: { role: string; content: string }[]; model: string };
    requests.push({ headers: req.headers, body });
    if (body.model === "broken") {
      res.writeHead(500, { "content-type": "application/json" });
      res.end(JSON.stringify({ error: { message: "model exploded" } }));
      return;
    }
    res.writeHead(200, { "content-type": "text/event-stream" });
    const user = body.messages.find((m) => m.role === "user")!.content;
    const words = `You said: ${user.split("\n").pop()}`.split(" ");
    for (const [i, word] of words.entries()) {
      const delta = { choices: [{ index: 0, delta: { content: i === 0 ? word : ` ${word}` } }] };
      res.write(`data: ${JSON.stringify(delta)}\n\n`);
    }
    res.end("data: [DONE]\n\n");
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`, requests, server };
}

describe("the openai agent", () => {
  let model: Awaited<ReturnType<typeof startChatCompletions>>;
  let server: TestServer;
  beforeAll(async () => {
    model = await startChatCompletions();
    server = await startTestServer({
      agents: [
        {
          name: "gpt",
          type: "openai",
          options: { baseUrl: model.url, model: "test-model", apiKey: "sk-test", temperature: 0.2 },
        },
        { name: "broken", type: "openai", options: { baseUrl: model.url, model: "broken" } },
      ],
    });
  });
  afterAll(async () => {
    await server.close();
    model.server.close();
  });

  it("streams the model's reply and sends it the framed history", async () => {
    const client = server.a2a("grpc");
    await client.sendMessage({ message: userMessage("first turn", { contextId: "oa" }) });
    const res = await client.sendMessage({ message: userMessage("second turn", { contextId: "oa" }) });
    const task = res.payload.value as Task;
    expect(task.status?.state).toBe(TaskState.COMPLETED);
    expect(task.artifacts.map((a) => messageText(a)).join("")).toBe("You said: second turn");
    const last = model.requests[model.requests.length - 1] as {
      headers: Record<string, string>;
      body: { model: string; stream: boolean; temperature?: number; messages: { role: string; content: string }[] };
    };
    expect(last.headers.authorization).toBe("Bearer sk-test");
    expect(last.body.stream).toBe(true);
    // A configured temperature reaches the endpoint (it used to be taken and dropped).
    expect(last.body.temperature).toBe(0.2);
    const content = last.body.messages.find((m) => m.role === "user")!.content;
    expect(content).toMatch(
      /<<<PARLEY_HISTORY \w+>>>[\s\S]*user: first turn[\s\S]*<<<END_PARLEY_HISTORY \w+>>>\n\nsecond turn$/,
    );
  });

  it("ends the task FAILED with the endpoint's error, and the server keeps serving", async () => {
    const res = await server.a2a("grpc", { "parley-agent": "broken" }).sendMessage({ message: userMessage("hi") });
    const task = res.payload.value as Task;
    expect(task.status?.state).toBe(TaskState.FAILED);
    expect(messageText(task.status!.message!)).toMatch(/HTTP 500.*model exploded/);
    const ok = await server.a2a("grpc").sendMessage({ message: userMessage("still there?") });
    expect((ok.payload.value as Task).status?.state).toBe(TaskState.COMPLETED);
  });

  it("refuses an unknown agent name with the list of hosted agents", async () => {
    await expect(
      server.a2a("grpc", { "parley-agent": "nope" }).sendMessage({ message: userMessage("x") }),
    ).rejects.toThrow(/no agent named "nope"; this server hosts: gpt, broken/);
  });
});

describe("the a2a peer agent", () => {
  let remote: TestServer;
  let local: TestServer;
  beforeAll(async () => {
    remote = await startTestServer({ agents: [framedEcho] });
    local = await startTestServer({
      peers: [{ name: "remote", url: remote.baseUrl, protocol: "grpc" }],
      agents: [{ name: "relay", type: "a2a", options: { peer: "remote" } }],
    });
  });
  afterAll(async () => {
    await local.close();
    await remote.close();
  });

  it("forwards each turn to the remote agent under the same contextId", async () => {
    const client = local.a2a("grpc");
    await client.sendMessage({ message: userMessage("alpha", { contextId: "relay-ctx" }) });
    const res = await client.sendMessage({ message: userMessage("beta", { contextId: "relay-ctx" }) });
    const text = (res.payload.value as Task).artifacts.map((a) => messageText(a)).join("");
    // The remote kept its own thread under the same contextId and framed it itself.
    expect(text).toMatch(/user: alpha[\s\S]*\n\nbeta$/);
    const remoteThread = await remote.threads().getThreadHistory({ contextId: "relay-ctx" });
    expect(remoteThread.thread?.messageCount).toBe(4n);
  });
});

describe("the a2a peer agent following its peer's stream", () => {
  let remote: TestServer;
  let local: TestServer;
  beforeAll(async () => {
    remote = await startTestServer({
      agents: [{ name: "late", type: "script", options: { replies: [{ reply: "too late", delayMs: 60_000 }] } }],
    });
    local = await startTestServer({
      peers: [{ name: "remote", url: remote.baseUrl, protocol: "grpc" }],
      agents: [{ name: "relay", type: "a2a", options: { peer: "remote" } }],
      limits: { agentStepTimeoutMs: 1_000 },
    });
  });
  afterAll(async () => {
    await local.close();
    await remote.close();
  });

  it("cancels the peer's task when this hop's step times out", async () => {
    const contextId = `timeout-${crypto.randomUUID()}`;
    const res = await local.a2a("grpc").sendMessage({ message: userMessage("anyone?", { contextId }) });
    const task = res.payload.value as Task;
    expect(task.status?.state).toBe(TaskState.FAILED);
    expect(messageText(task.status!.message!)).toContain("limits.agentStepTimeoutMs");
    // The peer's task was canceled before this hop's ended: no wait for it.
    const onPeer = await remote.a2a("grpc").listTasks({ contextId });
    expect(onPeer.tasks.map((t) => t.status?.state)).toEqual([TaskState.CANCELED]);
  });
});

describe("the echo agent's reply modes", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({
      agents: [
        { name: "auto", type: "echo", options: { reply: "auto", input: "framed" } },
        { name: "message", type: "echo", options: { reply: "message" } },
        { name: "plain", type: "echo", options: { reply: "message", input: "text" } },
        { name: "whole", type: "echo", options: { chunks: 1, input: "text" } },
        { name: "summary", type: "echo" },
        { name: "summary-framed", type: "echo", options: { input: "framed" } },
      ],
    });
  });
  afterAll(async () => server.close());

  it("auto: answers a waiting caller with one Message that stays in the thread", async () => {
    const client = server.a2a("grpc", { "parley-agent": "auto" });
    const first = await client.sendMessage({ message: userMessage("one", { contextId: "auto-ctx" }) });
    expect(first.payload.case).toBe("message");
    const second = await client.sendMessage({ message: userMessage("two", { contextId: "auto-ctx" }) });
    expect(second.payload.case).toBe("message");
    // The reply is the framed input: the first turn's message and reply came back as history.
    expect(messageText(second.payload.value as Message)).toMatch(/user: one[\s\S]*agent: one[\s\S]*\n\ntwo$/);
    const thread = await server.threads().getThreadHistory({ contextId: "auto-ctx" });
    expect(thread.thread?.messageCount).toBe(4n);
  });

  it("auto: streams artifact chunks to a streaming caller", async () => {
    const events = await collect(
      server.a2a("grpc", { "parley-agent": "auto" }).sendStreamingMessage({ message: userMessage("streamed") }),
    );
    expect(events.filter((e) => e.payload.case === "artifactUpdate").length).toBeGreaterThan(1);
    expect(streamedText(events)).toBe("streamed");
    expect(events.at(-1)?.payload.case).toBe("statusUpdate");
  });

  it("message: a streaming caller gets the task first, then the reply as the task's end", async () => {
    const events = await collect(
      server.a2a("grpc", { "parley-agent": "message" }).sendStreamingMessage({ message: userMessage("whole") }),
    );
    // A stream starts with its task before the agent answers, so the Message becomes the task's final status.
    expect(events.map((e) => e.payload.case)).toEqual(["task", "statusUpdate", "statusUpdate"]);
    const last = events.at(-1)!.payload.value as TaskStatusUpdateEvent;
    expect(last.status?.state).toBe(TaskState.COMPLETED);
    expect(messageText(last.status!.message!)).toBe("whole");
  });

  it("input text: repeats only the new message, though the history was read", async () => {
    const client = server.a2a("grpc", { "parley-agent": "plain" });
    await client.sendMessage({ message: userMessage("first", { contextId: "plain-ctx" }) });
    const second = await client.sendMessage({ message: userMessage("second", { contextId: "plain-ctx" }) });
    expect(messageText(second.payload.value as Message)).toBe("second");
    const thread = await server.threads().getThreadHistory({ contextId: "plain-ctx" });
    expect(thread.thread?.messageCount).toBe(4n);
  });

  it("chunks: a task reply streams in that many artifact chunks, one for 1", async () => {
    const events = await collect(
      server.a2a("grpc", { "parley-agent": "whole" }).sendStreamingMessage({ message: userMessage("all at once") }),
    );
    const texts = events.flatMap((e) =>
      e.payload.case === "artifactUpdate" ? e.payload.value.artifact!.parts.map((p) => p.content.value) : [],
    );
    // The text in one chunk, then the empty last chunk that closes the artifact.
    expect(texts).toEqual(["all at once", ""]);
    const config = loadConfig({ argv: [], env: { PARLEY_ECHO_CHUNKS: "1" } });
    expect(config.agents.find((a) => a.type === "echo")?.options).toMatchObject({ chunks: 1 });
    expect(() => loadConfig({ argv: [], env: { PARLEY_ECHO_CHUNKS: "0" } })).toThrow(/PARLEY_ECHO_CHUNKS = "0"/);
    expect(() => createEchoAgent({ chunks: 0 })).toThrow(/echo chunks must be a whole number of at least 1, got 0/);
  });

  it("summary (the default): says which turn arrived, with how many earlier messages from whom, and the new text", async () => {
    const client = server.a2a("grpc", { "parley-agent": "summary" });
    const reply = async (text: string) => {
      const res = await client.sendMessage({ message: userMessage(text, { contextId: "sum-ctx" }) });
      return (res.payload.value as Task).artifacts.map((a) => messageText(a)).join("");
    };
    // The first message arrives alone: the framed input is the text itself, and so is the reply.
    expect(await reply("my name is Ada")).toBe("my name is Ada");
    expect(await reply("what is my name?")).toBe(
      'echo: turn 2 of thread "sum-ctx"; 2 earlier messages arrived with it (1 from user, 1 from agent).\n' +
        "new message: what is my name?",
    );
    const long = `${"x".repeat(200)}\nsecond line\nthird line`;
    expect(await reply(long)).toBe(
      'echo: turn 3 of thread "sum-ctx"; 4 earlier messages arrived with it (2 from user, 2 from agent).\n' +
        `new message: ${"x".repeat(160)}… (+40 more characters, 2 more lines)`,
    );
    expect(createEchoAgent().description).toMatch(/^Says what reached it/);
  });

  it("summary: counts what really arrived, as the framed echo of the same thread shows it", async () => {
    const plain = server.a2a("grpc", { "parley-agent": "whole" });
    const framed = server.a2a("grpc", { "parley-agent": "summary-framed" });
    const summary = server.a2a("grpc", { "parley-agent": "summary" });
    const contextId = "sum-window";
    // One-line replies, so that each earlier message is one line of the framed block.
    for (const text of ["one", "two", "three"]) {
      await plain.sendMessage({ message: userMessage(text, { contextId }) });
    }
    const seen = await framed.sendMessage({ message: userMessage("look", { contextId }) });
    const block = (seen.payload.value as Task).artifacts.map((a) => messageText(a)).join("");
    // Each earlier message starts with its header line, "#<nonce> <who>: ".
    const users = block.split("\n").filter((l) => /^#[0-9a-f]+ user: /.test(l)).length;
    expect(users).toBe(3);
    const agents = block.split("\n").filter((l) => /^#[0-9a-f]+ agent: /.test(l)).length;
    const res = await summary.sendMessage({ message: userMessage("count", { contextId }) });
    const said = (res.payload.value as Task).artifacts.map((a) => messageText(a)).join("");
    // The summary's turn comes after the framed one: one more user message and one more reply arrived.
    expect(said).toBe(
      `echo: turn 5 of thread "sum-window"; ${users + agents + 2} earlier messages arrived with it ` +
        `(${users + 1} from user, ${agents + 1} from agent).\nnew message: count`,
    );
  });

  it("summary: a history window that does not reach the thread's start names the message, not a turn", () => {
    const turn = {
      contextId: "c",
      text: "hi",
      message: { parts: [{ content: { case: "text", value: "hi" } }] },
      history: [
        { sequence: 7, provenance: "user", text: "a" },
        { sequence: 8, provenance: "agent", text: "a" },
      ],
    } as unknown as AgentTurn;
    expect(echoSummary(turn)).toBe(
      'echo: message 9 (older messages did not arrive) of thread "c"; 2 earlier messages arrived with it ' +
        "(1 from user, 1 from agent).\nnew message: hi",
    );
  });

  it("parseScript checks a script built in code with the configuration's schema", () => {
    expect(parseScript("s", ["hi", { reply: "there", delayMs: 5 }])).toEqual(["hi", { reply: "there", delayMs: 5 }]);
    expect(() => parseScript("s", ["hi", { delay: 5 }])).toThrow(
      /^agent s: options\.replies\[1\]: Unrecognized key: "delay"$/,
    );
    expect(() => parseScript("s", [])).toThrow(/^agent s: options\.replies: Too small/);
  });

  it("refuses an unknown reply mode when the server is configured", () => {
    expect(() => loadConfig({ argv: [], env: { PARLEY_ECHO_REPLY: "sometimes" } })).toThrow(
      /PARLEY_ECHO_REPLY = "sometimes" \(environment PARLEY_ECHO_REPLY\).*allowed: one of task, message, auto/,
    );
    expect(() => loadConfig({ argv: [], env: { PARLEY_ECHO_INPUT: "history" } })).toThrow(
      /PARLEY_ECHO_INPUT = "history" \(environment PARLEY_ECHO_INPUT\).*allowed: one of summary, framed, text/,
    );
    const config = loadConfig({ argv: [], env: { PARLEY_ECHO_REPLY: "auto", PARLEY_ECHO_INPUT: "text" } });
    expect(config.agents.find((a) => a.type === "echo")?.options).toMatchObject({ reply: "auto", input: "text" });
  });
});
