// One rule for a turn that does not finish, through real processes: a model stream that breaks, a SIGTERM whose
// grace runs out mid-stream and a SIGKILL mid-stream all leave the same record (the task FAILED with a status
// that names the cause, no partial reply in the thread), and the next turn's model input never holds the cut text.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { messageText } from "@parley/domain";
import { HistoryOrder, Provenance, type StreamResponse, TaskState } from "@parley/proto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "../../store/test/pg-helpers.js";
import { type FakeChatModel, startFakeChatModel } from "./fixtures/fake-chat-model.js";
import { freePort } from "./fixtures/free-port.js";
import { type SpawnedServer, spawnServer } from "./fixtures/spawn-server.js";
import { startTestServer, type TestServer, userMessage } from "./harness.js";

const dir = mkdtempSync(join(tmpdir(), "parley-cut-turns-"));
let model: FakeChatModel;
let downPort: number;
const configPath = join(dir, "config.json");

beforeAll(async () => {
  model = await startFakeChatModel();
  downPort = await freePort();
  writeFileSync(
    configPath,
    JSON.stringify({
      agents: [
        { name: "model", type: "openai", options: { baseUrl: model.baseUrl, model: "fake-model" } },
        { name: "down", type: "openai", options: { baseUrl: `http://127.0.0.1:${downPort}/v1`, model: "gone-model" } },
      ],
      limits: { agentStepTimeoutMs: 60_000 },
    }),
  );
});

afterAll(async () => {
  await model?.close();
  rmSync(dir, { recursive: true, force: true });
});

const start = (dataDir: string, graceMs = 300, env: Record<string, string> = {}) =>
  spawnServer({
    dataDir: join(dir, dataDir),
    args: ["--config", configPath],
    env: { PARLEY_SHUTDOWN_GRACE_MS: String(graceMs), ...env },
  });

/** Sends `text` as a stream; resolves with the events once the first reply chunk arrived, and the rest later. */
function streamTurn(server: SpawnedServer, contextId: string, text: string, agent = "model") {
  const events: StreamResponse[] = [];
  let firstChunk!: () => void;
  const chunkSeen = new Promise<void>((resolve) => (firstChunk = resolve));
  const done = (async () => {
    try {
      const stream = server.a2a({ "parley-agent": agent }).sendStreamingMessage({
        message: userMessage(text, { contextId }),
      });
      for await (const event of stream) {
        events.push(event);
        if (event.payload.case === "artifactUpdate") firstChunk();
      }
    } catch {
      // A killed server ends the stream with an error: what it saw before stays in `events`.
    }
    return events;
  })();
  return { events, chunkSeen, done };
}

function taskIdOf(events: readonly StreamResponse[]): string {
  const first = events.find((e) => e.payload.case === "task");
  return first?.payload.case === "task" ? first.payload.value.id : "";
}

/** The streamed reply text a subscriber saw. */
function streamedText(events: readonly StreamResponse[]): string {
  return events
    .map((e) => (e.payload.case === "artifactUpdate" ? messageText(e.payload.value.artifact!) : ""))
    .join("");
}

/**
 * The record every cut turn leaves: the task FAILED, with no reply artifact, its status `cause`; the thread holds
 * the user's message and no agent message of the turn. Returns the status text.
 */
async function expectCutRecord(server: SpawnedServer, contextId: string, taskId: string, cause: RegExp) {
  const task = await server.a2a().getTask({ id: taskId });
  expect(task.status?.state).toBe(TaskState.FAILED);
  const status = messageText(task.status!.message!);
  expect(status).toMatch(cause);
  expect(status).toMatch(/not kept/);
  expect(task.artifacts.map((a) => messageText(a)).join("")).toBe("");
  const page = await server.threads().getThreadHistory({ contextId, order: HistoryOrder.OLDEST_FIRST, pageSize: 50 });
  expect(page.messages.map((m) => m.provenance)).toEqual([Provenance.USER]);
  for (const word of model.words) expect(messageText(page.messages[0]!.message!)).not.toContain(word.trim());
  return status;
}

/** Sends the next turn and checks what the model read: the cut turn's message, without any of its text. */
async function expectNextTurnClean(server: SpawnedServer, contextId: string, cutText: string) {
  const before = model.inputs.length;
  const reply = await server.a2a({ "parley-agent": "model" }).sendMessage({
    message: userMessage("what now", { contextId }),
  });
  expect(reply.payload.case).toBe("task");
  const input = model.inputs[before]!;
  expect(input).toMatch(new RegExp(`#[0-9a-f]+ user: ${cutText}\\n`));
  for (const word of model.words) expect(input).not.toContain(word.trim());
  expect(input).not.toMatch(/#[0-9a-f]+ agent:/);
  expect(input.endsWith("\n\nwhat now")).toBe(true);
}

describe("a turn that does not finish", () => {
  let server: SpawnedServer;
  beforeAll(async () => {
    server = await start("main");
  }, 60_000);
  afterAll(async () => {
    server?.child.kill("SIGKILL");
    await server?.exited;
  });

  it("a model stream that breaks after five chunks: FAILED naming the model, its URL and the chunks", async () => {
    const turn = streamTurn(server, "cut-stream", "cut please");
    const events = await turn.done;
    expect(streamedText(events)).toBe(model.words.join(""));
    const status = await expectCutRecord(
      server,
      "cut-stream",
      taskIdOf(events),
      /^agent model failed: model fake-model at http:\/\/127\.0\.0\.1:\d+\/v1\/chat\/completions: the stream broke after 5 chunks, before its end marker: terminated/,
    );
    expect(status).toContain("its partial reply (5 chunks, 30 characters) was not kept");
    // The log says the same.
    expect(server.stdout() + server.stderr()).toContain(`turn did not finish: ${status}`);
    await expectNextTurnClean(server, "cut-stream", "cut please");
  });

  it("a stream that ends without its end marker fails the same way", async () => {
    const events = await streamTurn(server, "unended", "unended please").done;
    await expectCutRecord(
      server,
      "unended",
      taskIdOf(events),
      /model fake-model at \S+: the stream ended after 5 chunks without its end marker \(data: \[DONE\]\)/,
    );
  });

  it("names the URL and the errno of an endpoint that is down, and the HTTP status and body of one that fails", async () => {
    const down = await server.a2a({ "parley-agent": "down" }).sendMessage({ message: userMessage("anyone?") });
    expect(down.payload.case).toBe("task");
    const downTask = down.payload.value as { status?: { message?: Parameters<typeof messageText>[0] } };
    expect(messageText(downTask.status!.message!)).toBe(
      `agent down failed: model gone-model at http://127.0.0.1:${downPort}/v1/chat/completions: the request failed: fetch failed (ECONNREFUSED 127.0.0.1:${downPort})`,
    );
    const failing = await server.a2a({ "parley-agent": "model" }).sendMessage({ message: userMessage("http500") });
    const failingTask = failing.payload.value as { status?: { message?: Parameters<typeof messageText>[0] } };
    expect(messageText(failingTask.status!.message!)).toMatch(
      /^agent model failed: model fake-model at http:\/\/127\.0\.0\.1:\d+\/v1\/chat\/completions answered HTTP 500: \{"error":\{"message":"the model is overloaded, try later"\}\}$/,
    );
    expect(server.stdout() + server.stderr()).toContain(`ECONNREFUSED 127.0.0.1:${downPort}`);
  });
});

/** Polls GetTask until the task has ended: a PostgreSQL replica ends a dead one's task once its lease lapses. */
async function ended(server: SpawnedServer, taskId: string): Promise<void> {
  const until = Date.now() + 30_000;
  for (;;) {
    const task = await server.a2a().getTask({ id: taskId });
    if (task.status?.state === TaskState.FAILED) return;
    if (Date.now() > until) throw new Error(`task ${taskId} still ${TaskState[task.status?.state ?? 0]} after 30 s`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

describe.each([
  {
    backend: "LevelDB",
    crashCause:
      /^interrupted: the server process ended \(a crash or a kill\) while this task was running, found at restart; any partial reply was not kept/,
  },
  {
    backend: "PostgreSQL",
    crashCause:
      /^executor lost: the replica running this task stopped renewing its lease; any partial reply was not kept/,
  },
])("a turn cut by the process's end on $backend", ({ backend, crashCause }) => {
  let db: TestDatabase | undefined;
  const env: Record<string, string> = {};
  beforeAll(async () => {
    if (backend !== "PostgreSQL") return;
    db = await createTestDatabase();
    Object.assign(env, { PARLEY_STORE_URL: db.url, PARLEY_LEASE_TTL_MS: "1000", PARLEY_SWEEP_MS: "200" });
  });
  afterAll(async () => db?.drop());
  const hangs = () => model.inputs.filter((i) => i === "hang on" || i.endsWith("\n\nhang on")).length;

  it("SIGTERM whose grace runs out mid-stream: the same record, and a clean next turn after the restart", async () => {
    let server = await start(`sigterm-${backend}`, 300, env);
    const before = hangs();
    const turn = streamTurn(server, `sigterm-${backend}`, "hang on");
    await turn.chunkSeen;
    await model.hung(before + 1);
    server.child.kill("SIGTERM");
    const events = await turn.done;
    expect((await server.exited).code).toBe(0);
    const last = events[events.length - 1]!;
    expect(last.payload.case).toBe("statusUpdate");
    const taskId = taskIdOf(events);
    server = await start(`sigterm-${backend}`, 300, env);
    try {
      await expectCutRecord(
        server,
        `sigterm-${backend}`,
        taskId,
        /^interrupted: the server shut down and its grace of 300 ms \(shutdownGraceMs\) ran out while agent model was answering; its partial reply \(5 chunks, 30 characters\) was not kept/,
      );
      await expectNextTurnClean(server, `sigterm-${backend}`, "hang on");
    } finally {
      server.child.kill("SIGKILL");
      await server.exited;
    }
  }, 60_000);

  it("SIGKILL mid-stream: the same record once the restart finds the turn, and a clean next turn", async () => {
    let server = await start(`sigkill-${backend}`, 300, env);
    const before = hangs();
    const turn = streamTurn(server, `sigkill-${backend}`, "hang on");
    await turn.chunkSeen;
    await model.hung(before + 1);
    const taskId = taskIdOf(turn.events);
    server.closeClients();
    server.child.kill("SIGKILL");
    await server.exited;
    await turn.done;
    server = await start(`sigkill-${backend}`, 300, env);
    try {
      await ended(server, taskId);
      await expectCutRecord(server, `sigkill-${backend}`, taskId, crashCause);
      await expectNextTurnClean(server, `sigkill-${backend}`, "hang on");
    } finally {
      server.child.kill("SIGKILL");
      await server.exited;
    }
  }, 60_000);
});

describe("a turn cut by a deadline or a cancel", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({
      agents: [
        { name: "slow", type: "echo", options: { input: "text", chunks: 10, delayMs: 100 } },
        { name: "model", type: "openai", options: { baseUrl: model.baseUrl, model: "fake-model" } },
      ],
      limits: { agentStepTimeoutMs: 450 },
    });
  });
  afterAll(async () => server?.close());

  async function cutRecord(contextId: string, taskId: string) {
    const task = await server.a2a("grpc").getTask({ id: taskId });
    const page = await server.threads().getThreadHistory({ contextId, order: HistoryOrder.OLDEST_FIRST, pageSize: 50 });
    return {
      state: task.status?.state,
      status: messageText(task.status!.message!),
      artifacts: task.artifacts.map((a) => messageText(a)).join(""),
      thread: page.messages.map((m) => m.provenance),
    };
  }

  it("keeps no partial reply after a deadline or a cancel, and says what was dropped", async () => {
    const text = "0123456789".repeat(10);
    const timedOut: StreamResponse[] = [];
    for await (const e of server.a2a("grpc").sendStreamingMessage({ message: userMessage(text, { contextId: "dl" }) }))
      timedOut.push(e);
    expect(streamedText(timedOut).length).toBeGreaterThan(0);
    const deadline = await cutRecord("dl", taskIdOf(timedOut));
    expect(deadline).toEqual({
      state: TaskState.FAILED,
      status: expect.stringMatching(
        /^agent slow failed: agent slow did not finish within 450 ms \(limits\.agentStepTimeoutMs\); its partial reply \(\d+ chunks, \d+ characters\) was not kept$/,
      ),
      artifacts: "",
      thread: [Provenance.USER],
    });

    const stream = server.a2a("grpc").sendStreamingMessage({ message: userMessage(text, { contextId: "cx" }) });
    const canceled: StreamResponse[] = [];
    for await (const e of stream) {
      canceled.push(e);
      if (
        e.payload.case === "artifactUpdate" &&
        canceled.filter((c) => c.payload.case === "artifactUpdate").length === 2
      )
        await server.a2a("grpc").cancelTask({ id: taskIdOf(canceled) });
    }
    expect(await cutRecord("cx", taskIdOf(canceled))).toEqual({
      state: TaskState.CANCELED,
      status: expect.stringMatching(
        /^canceled on request; its partial reply \(\d+ chunks, \d+ characters\) was not kept$/,
      ),
      artifacts: "",
      thread: [Provenance.USER],
    });
  });

  it("a deadline names the model, its URL and how far its stream got", async () => {
    const events: StreamResponse[] = [];
    const stream = server.a2a("grpc", { "parley-agent": "model" }).sendStreamingMessage({
      message: userMessage("hang past the deadline", { contextId: "dl-model" }),
    });
    for await (const e of stream) events.push(e);
    const record = await cutRecord("dl-model", taskIdOf(events));
    expect(record).toEqual({
      state: TaskState.FAILED,
      status: expect.stringMatching(
        /^agent model failed: agent model did not finish within 450 ms \(limits\.agentStepTimeoutMs\): model fake-model at http:\/\/127\.0\.0\.1:\d+\/v1\/chat\/completions had streamed 5 chunks; its partial reply \(5 chunks, 30 characters\) was not kept$/,
      ),
      artifacts: "",
      thread: [Provenance.USER],
    });
  });
});
