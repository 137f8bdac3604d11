import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { A2AService, Role, TaskState, headers as wire } from "@parley/proto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { spawnUntilReady } from "../../../packages/server/test/fixtures/spawn-process.js";
import { type FakeModel, type ModelCall, modelName, startFakeModel } from "./fake-model.js";
import { rpc, type SseEvent, sseEvents } from "./harness.js";
import { bridgeBin, type SpawnedBridge, spawnBridge } from "./spawn-bridge.js";

// Separate Parley processes: `edge` hosts agents on a fake OpenAI-compatible model, `mid` forwards to edge, `front`
// forwards to mid (a2a agents over JSON-RPC and gRPC peers). The caller's events carry their arrival times
// (performance.now() of this process, the same clock the fake model stamps its chunks with).

const slowModel = modelName(2000, 3, 50);
const streamModel = modelName(100, 8, 250);
const longModel = modelName(0, 40, 100);

let root: string;
let model: FakeModel;
let brokenPeer: Server;
let brokenPeerUrl: string;
const brokenPeerMethods: string[] = [];
let edge: SpawnedBridge;
/** A model host that a test kills mid-stream. */
let doomed: SpawnedBridge;
let mid: SpawnedBridge;
let front: SpawnedBridge;
let upstreamUrl: string;
let stopUpstream: (() => void) | undefined;

const agentUrl = (server: SpawnedBridge, agent: string) => new URL(`agents/${agent}/`, server.url).href;
const openai = (name: string, m: string) => ({
  name,
  type: "openai",
  options: { baseUrl: model.baseUrl, model: m },
});
const forward = (name: string, peer: string) => ({ name, type: "a2a", options: { peer } });

/**
 * A JSON-RPC peer whose stream breaks: its card says it streams, and SendStreamingMessage answers a task and one
 * chunk, then the connection is destroyed. At /plain/ its card says it does not stream and SendMessage answers whole.
 */
async function startBrokenPeer(): Promise<void> {
  brokenPeer = createServer((req, res) => {
    const plain = req.url?.startsWith("/plain/") === true;
    if (req.method === "GET") {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ name: "fake", capabilities: { streaming: !plain } }));
      return;
    }
    let body = "";
    req.on("data", (c: Buffer) => {
      body += c.toString();
    });
    req.on("end", () => {
      const request = JSON.parse(body) as { id: number; method: string; params: { message: { contextId: string } } };
      brokenPeerMethods.push(`${plain ? "plain" : "broken"} ${request.method}`);
      const contextId = request.params.message.contextId;
      const task = { id: "peer-task", contextId, status: { state: "TASK_STATE_WORKING" } };
      if (request.method === "SendMessage") {
        res.writeHead(200, { "content-type": "application/json" });
        res.end(
          JSON.stringify({
            jsonrpc: "2.0",
            id: request.id,
            result: {
              task: {
                ...task,
                status: { state: "TASK_STATE_COMPLETED" },
                artifacts: [{ artifactId: "a", parts: [{ text: "whole answer" }] }],
              },
            },
          }),
        );
        return;
      }
      res.writeHead(200, { "content-type": "text/event-stream" });
      const event = (result: unknown) => `data: ${JSON.stringify({ jsonrpc: "2.0", id: request.id, result })}\n\n`;
      res.write(event({ task }));
      res.write(
        event({
          artifactUpdate: {
            taskId: "peer-task",
            contextId,
            artifact: { artifactId: "a", parts: [{ text: "half of it" }] },
          },
        }),
      );
      setTimeout(() => res.destroy(), 50);
    });
  });
  await new Promise<void>((resolve) => brokenPeer.listen(0, "127.0.0.1", resolve));
  brokenPeerUrl = `http://127.0.0.1:${(brokenPeer.address() as AddressInfo).port}/`;
}

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), "parley-live-streams-"));
  model = await startFakeModel();
  await startBrokenPeer();
  const dir = (name: string) => {
    const d = join(root, name);
    rmSync(d, { recursive: true, force: true });
    return mkdtempSync(join(root, `${name}-`));
  };
  edge = await spawnBridge({
    dir: dir("edge"),
    config: {
      agents: [openai("slow", slowModel), openai("stream", streamModel), openai("long", longModel)],
      bridge: { keepAliveMs: 300 },
    },
  });
  doomed = await spawnBridge({
    dir: dir("doomed"),
    config: { agents: [openai("long", longModel)] },
  });
  mid = await spawnBridge({
    dir: dir("mid"),
    config: {
      agents: [
        forward("rpc", "edge-rpc"),
        forward("grpc", "edge-grpc"),
        forward("v03", "edge-v03"),
        forward("rest", "edge-rest"),
        forward("long", "edge-long"),
        forward("broken", "broken"),
        forward("plain", "plain"),
        forward("doomed", "doomed"),
      ],
      peers: [
        { name: "edge-rpc", url: agentUrl(edge, "stream"), protocol: "jsonrpc" },
        { name: "edge-grpc", url: `http://${edge.grpcAddress}`, protocol: "grpc", agent: "stream" },
        { name: "edge-v03", url: agentUrl(edge, "stream"), protocol: "jsonrpc", a2aVersion: "0.3" },
        { name: "edge-rest", url: agentUrl(edge, "stream"), protocol: "rest" },
        { name: "edge-long", url: agentUrl(edge, "long"), protocol: "jsonrpc" },
        { name: "broken", url: brokenPeerUrl, protocol: "jsonrpc" },
        { name: "plain", url: `${brokenPeerUrl}plain/`, protocol: "jsonrpc" },
        { name: "doomed", url: `http://${doomed.grpcAddress}`, protocol: "grpc", agent: "long" },
      ],
    },
  });
  front = await spawnBridge({
    dir: dir("front"),
    config: {
      agents: [forward("rpc2", "mid-rpc"), forward("grpc2", "mid-grpc")],
      peers: [
        { name: "mid-rpc", url: agentUrl(mid, "rpc"), protocol: "jsonrpc" },
        { name: "mid-grpc", url: `http://${mid.grpcAddress}`, protocol: "grpc", agent: "grpc" },
      ],
    },
  });
  // A bridge in remote mode in front of edge: the task first through --upstream too.
  const upstream = await spawnUntilReady({
    name: "parley-bridge --upstream",
    script: bridgeBin,
    args: ["--upstream", `http://${edge.grpcAddress}`, "--port", "0"],
    cwd: root,
    ready: (stdout) => {
      const url = /JSON-RPC {4}(\S+)/.exec(stdout);
      return url && stdout.includes("Try: ") ? { url: url[1]! } : undefined;
    },
  });
  upstreamUrl = upstream.ready.url;
  stopUpstream = () => upstream.child.kill("SIGTERM");
}, 120_000);

afterAll(async () => {
  stopUpstream?.();
  for (const server of [front, mid, edge, doomed]) {
    if (!server || server.child.exitCode !== null || server.child.signalCode !== null) continue;
    server.child.kill("SIGTERM");
    await server.exited;
  }
  await model?.close();
  await new Promise((resolve) => brokenPeer?.close(resolve));
  rmSync(root, { recursive: true, force: true });
}, 60_000);

interface Timed<T> {
  readonly at: number;
  readonly event: T;
}

function userMessage(text: string, contextId: string) {
  return { messageId: randomUUID(), contextId, role: "ROLE_USER", parts: [{ text }] };
}

/** A JSON-RPC SSE call's events with their arrival times; comments (keep-alives) with theirs. */
async function sse(
  url: string,
  method: string,
  params: unknown,
  options: {
    headers?: Record<string, string>;
    until?: (events: Timed<SseEvent>[]) => boolean;
  } = {},
): Promise<{ events: Timed<SseEvent>[]; comments: number[]; sentAt: number }> {
  const sentAt = performance.now();
  const controller = new AbortController();
  const response = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", "a2a-version": "1.0", ...options.headers },
    body: rpc(method, params),
    signal: controller.signal,
  });
  expect(response.headers.get("content-type")).toContain("text/event-stream");
  const events: Timed<SseEvent>[] = [];
  const comments: number[] = [];
  let dropped = false;
  for await (const event of sseEvents(response.body!, () => comments.push(performance.now()))) {
    events.push({ at: performance.now(), event });
    if (options.until?.(events)) {
      dropped = true;
      break;
    }
  }
  // The caller drops the stream: its connection goes.
  if (dropped) controller.abort();
  return { events, comments, sentAt };
}

async function call(url: string, method: string, params: unknown): Promise<Record<string, unknown>> {
  const response = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", "a2a-version": "1.0" },
    body: rpc(method, params),
  });
  const body = (await response.json()) as { result?: Record<string, unknown>; error?: unknown };
  if (body.error) throw new Error(`${method}: ${JSON.stringify(body.error)}`);
  return body.result!;
}

const resultOf = (e: Timed<SseEvent>) => e.event.data.result as Record<string, unknown>;
const chunkOf = (e: Timed<SseEvent>): string | undefined => {
  const update = resultOf(e).artifactUpdate as { artifact?: { parts?: { text?: string }[] } } | undefined;
  return update?.artifact?.parts?.map((p) => p.text ?? "").join("");
};
/** The non-empty text chunks the caller received, in order (the empty last chunk closes the artifact). */
const chunks = (events: Timed<SseEvent>[]) =>
  events.flatMap((e) => {
    const text = chunkOf(e);
    return text ? [{ at: e.at, text }] : [];
  });
const storedText = (task: Record<string, unknown>) =>
  ((task.artifacts ?? []) as { parts?: { text?: string }[] }[])
    .map((a) => a.parts?.map((p) => p.text ?? "").join("") ?? "")
    .join("");
const stateOf = (task: Record<string, unknown>) => (task.status as { state: string }).state;
const statusText = (task: Record<string, unknown>) =>
  ((task.status as { message?: { parts?: { text?: string }[] } }).message?.parts ?? []).map((p) => p.text).join("");

/** The model call made for a request sent at `after` (the only one of that model since then). */
function modelCallAfter(name: string, after: number): ModelCall {
  const found = model.calls.filter((c) => c.model === name && c.receivedAt >= after);
  expect(found, `model calls of ${name}`).toHaveLength(1);
  return found[0]!;
}

/** The tasks of a context on a server (JSON-RPC ListTasks on its default agent's URL). */
async function tasksOf(server: SpawnedBridge, contextId: string): Promise<Record<string, unknown>[]> {
  const listed = await call(server.url, "ListTasks", { contextId, includeArtifacts: true });
  return (listed.tasks ?? []) as Record<string, unknown>[];
}

/** Waits (polling the task, for at most 15 s) until a server's only task of `contextId` reaches `state`. */
async function taskReaches(server: SpawnedBridge, contextId: string, state: string): Promise<Record<string, unknown>> {
  const deadline = Date.now() + 15_000;
  for (;;) {
    const tasks = await tasksOf(server, contextId);
    if (tasks.length === 1 && stateOf(tasks[0]!) === state) return tasks[0]!;
    if (Date.now() > deadline) throw new Error(`task of ${contextId} is not ${state}: ${JSON.stringify(tasks)}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe("the task first, before the agent's first token (a model that waits 2 s)", () => {
  it.each([
    ["JSON-RPC, embedded", () => agentUrl(edge, "slow")],
    ["JSON-RPC, --upstream", () => new URL("agents/slow/", upstreamUrl).href],
  ])("%s: the first SSE event is the task, before the model sent anything", async (_name, url) => {
    const contextId = `first-${randomUUID()}`;
    const { events, sentAt } = await sse(url(), "SendStreamingMessage", { message: userMessage("hi", contextId) });
    const first = resultOf(events[0]!).task as Record<string, unknown>;
    expect(first).toMatchObject({ contextId, status: { state: "TASK_STATE_SUBMITTED" } });
    expect(typeof first.id).toBe("string");
    expect(events[0]!.event.id).toBe(`${first.id}:1`);
    const modelCall = modelCallAfter(slowModel, sentAt);
    expect(events[0]!.at).toBeLessThan(modelCall.firstChunkAt!);
    expect(chunks(events).map((c) => c.text)).toEqual(modelCall.chunks);
  });

  it.each([
    ["gRPC", () => createGrpcTransport({ baseUrl: `http://${edge.grpcAddress}` })],
    ["Connect", () => createConnectTransport({ baseUrl: `http://${edge.grpcAddress}`, httpVersion: "2" })],
    ["gRPC-Web", () => createGrpcWebTransport({ baseUrl: `http://${edge.grpcAddress}`, httpVersion: "2" })],
  ])("%s: the first event is the task, before the model sent anything", async (_name, transport) => {
    const client = createClient(A2AService, transport());
    const contextId = `first-${randomUUID()}`;
    const sentAt = performance.now();
    const events: { at: number; payload: { case: string | undefined; value?: unknown } }[] = [];
    const stream = client.sendStreamingMessage(
      {
        message: {
          messageId: randomUUID(),
          contextId,
          role: Role.USER,
          parts: [{ content: { case: "text", value: "hi" } }],
        },
      },
      { headers: { [wire.agent]: "slow", [wire.a2aVersion]: "1.0" } },
    );
    for await (const event of stream) events.push({ at: performance.now(), payload: event.payload });
    const first = events[0]!;
    expect(first.payload.case).toBe("task");
    const task = first.payload.value as { id: string; contextId: string; status?: { state: TaskState } };
    expect(task.id).not.toBe("");
    expect(task.contextId).toBe(contextId);
    expect(task.status?.state).toBe(TaskState.SUBMITTED);
    expect(first.at).toBeLessThan(modelCallAfter(slowModel, sentAt).firstChunkAt!);
  });

  it("SubscribeToTask to a task sent with returnImmediately: the task first, before the model sent anything", async () => {
    const client = createClient(A2AService, createGrpcTransport({ baseUrl: `http://${edge.grpcAddress}` }));
    const contextId = `subscribe-${randomUUID()}`;
    const sentAt = performance.now();
    const sent = await client.sendMessage(
      {
        message: {
          messageId: randomUUID(),
          contextId,
          role: Role.USER,
          parts: [{ content: { case: "text", value: "hi" } }],
        },
        configuration: { returnImmediately: true },
      },
      { headers: { [wire.agent]: "slow", [wire.a2aVersion]: "1.0" } },
    );
    expect(sent.payload.case).toBe("task");
    const id = (sent.payload.value as { id: string }).id;
    const events: { at: number; case: string | undefined }[] = [];
    for await (const event of client.subscribeToTask(
      { id },
      { headers: { [wire.agent]: "slow", [wire.a2aVersion]: "1.0" } },
    )) {
      events.push({ at: performance.now(), case: event.payload.case });
    }
    expect(events[0]!.case).toBe("task");
    expect(events[0]!.at).toBeLessThan(modelCallAfter(slowModel, sentAt).firstChunkAt!);
    expect(events.at(-1)!.case).toBe("statusUpdate");
  });

  it("a quiet stream hears keep-alive comments, also a resubscribe before its first event, and its ids go on", async () => {
    const contextId = `quiet-${randomUUID()}`;
    const url = agentUrl(edge, "slow");
    // The caller takes the task and drops the stream while the model is still silent.
    const dropped = await sse(
      url,
      "SendStreamingMessage",
      { message: userMessage("hi", contextId) },
      { until: () => true },
    );
    const taskId = (resultOf(dropped.events[0]!).task as { id: string }).id;
    const resumed = await sse(url, "SubscribeToTask", { id: taskId }, { headers: { "last-event-id": `${taskId}:1` } });
    // Comments (keepAliveMs 300) came while the model waited, before the first event of the resubscribe.
    expect(resumed.comments.length).toBeGreaterThan(0);
    expect(resumed.comments[0]!).toBeLessThan(resumed.events[0]!.at);
    expect(resumed.events.map((e) => e.event.id)).toEqual(resumed.events.map((_, i) => `${taskId}:${i + 2}`));
    const task = await call(url, "GetTask", { id: taskId });
    expect(stateOf(task)).toBe("TASK_STATE_COMPLETED");
    expect(
      chunks(resumed.events)
        .map((c) => c.text)
        .join(""),
    ).toBe(storedText(task));
  });
});

describe("a2a agents relay their peer's stream as it arrives", () => {
  it.each([
    ["one hop, JSON-RPC peer", () => [mid, "rpc", [edge]] as const],
    ["one hop, gRPC peer", () => [mid, "grpc", [edge]] as const],
    ["one hop, JSON-RPC 0.3 peer", () => [mid, "v03", [edge]] as const],
    ["one hop, HTTP+JSON peer", () => [mid, "rest", [edge]] as const],
    ["two hops, JSON-RPC peers", () => [front, "rpc2", [mid, edge]] as const],
    ["two hops, gRPC peers", () => [front, "grpc2", [mid, edge]] as const],
  ])("%s: the model's chunks reach the caller as separate events, live, stored alike", async (_name, setup) => {
    const [caller, agent, behind] = setup();
    const contextId = `relay-${randomUUID()}`;
    const { events, sentAt } = await sse(agentUrl(caller, agent), "SendStreamingMessage", {
      message: userMessage("tell me", contextId),
    });
    const modelCall = modelCallAfter(streamModel, sentAt);
    const task = resultOf(events[0]!).task as { id: string; contextId: string };
    // The caller's own task, in the caller's context, first.
    expect(task.contextId).toBe(contextId);
    const seen = chunks(events);
    // Every model chunk is its own event, in order, and the first came while the model was still streaming.
    expect(seen.map((c) => c.text)).toEqual(modelCall.chunks);
    expect(seen[0]!.at).toBeLessThan(modelCall.lastChunkAt!);
    expect(events[0]!.at).toBeLessThan(modelCall.firstChunkAt!);
    // What the caller saw is what every server stored, each hop under its own task id in the same context.
    const stored = await call(agentUrl(caller, agent), "GetTask", { id: task.id });
    expect(stateOf(stored)).toBe("TASK_STATE_COMPLETED");
    expect(storedText(stored)).toBe(seen.map((c) => c.text).join(""));
    for (const server of behind) {
      const [hop] = await tasksOf(server, contextId);
      expect(hop!.id).not.toBe(task.id);
      expect(stateOf(hop!)).toBe("TASK_STATE_COMPLETED");
      expect(storedText(hop!)).toBe(storedText(stored));
    }
    // Order of the caller's events: task, working, the chunks, the artifact's last chunk, the end.
    const kinds = events.map((e) => Object.keys(resultOf(e))[0]);
    expect(kinds[0]).toBe("task");
    expect(kinds.at(-1)).toBe("statusUpdate");
    expect(events.length).toBe(seen.length + 4);
  });

  it("follows an HTTP+JSON peer over that binding (POST message:stream), not over JSON-RPC", async () => {
    // The peer's count of SendStreamingMessage calls over HTTP+JSON, whatever their code.
    const restStreams = async () => {
      const text = await (await fetch(new URL("/metrics", edge.url))).text();
      return text
        .split("\n")
        .filter((l) => /^parley_requests_total\{/.test(l) && l.includes('protocol="rest"'))
        .filter((l) => l.includes('method="SendStreamingMessage"'))
        .reduce((sum, l) => sum + Number(l.slice(l.lastIndexOf(" ") + 1)), 0);
    };
    const before = await restStreams();
    const { events } = await sse(agentUrl(mid, "rest"), "SendStreamingMessage", {
      message: userMessage("over rest", `rest-${randomUUID()}`),
    });
    expect(Object.keys(resultOf(events.at(-1)!))[0]).toBe("statusUpdate");
    // The peer counts its request once its response has ended, which may be just after the caller's stream did.
    let after = await restStreams();
    for (let i = 0; i < 100 && after === before; i++) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      after = await restStreams();
    }
    expect(after).toBeGreaterThan(before);
  });

  it("keeps a thread's turns on one thread of the peer", async () => {
    const contextId = `turns-${randomUUID()}`;
    for (const text of ["one", "two"]) {
      const { events } = await sse(agentUrl(mid, "rpc"), "SendStreamingMessage", {
        message: userMessage(text, contextId),
      });
      expect(Object.keys(resultOf(events.at(-1)!))[0]).toBe("statusUpdate");
    }
    const onEdge = await tasksOf(edge, contextId);
    expect(onEdge).toHaveLength(2);
    for (const t of onEdge) expect(t.contextId).toBe(contextId);
  });

  it("a cancel of the caller's task cancels the peer's task", async () => {
    const contextId = `cancel-${randomUUID()}`;
    const url = agentUrl(mid, "long");
    let taskId = "";
    const stream = sse(url, "SendStreamingMessage", { message: userMessage("go on", contextId) });
    // Cancelled once the first relayed chunk is on mid: its stream then ends CANCELED.
    const peerRunning = await taskReaches(edge, contextId, "TASK_STATE_WORKING");
    for (;;) {
      const [task] = await tasksOf(mid, contextId);
      if (task && storedText(task) !== "") {
        taskId = task.id as string;
        break;
      }
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    const canceled = await call(url, "CancelTask", { id: taskId });
    expect(stateOf(canceled)).toBe("TASK_STATE_CANCELED");
    const { events } = await stream;
    expect(stateOf((resultOf(events.at(-1)!).statusUpdate as Record<string, unknown>) ?? {})).toBe(
      "TASK_STATE_CANCELED",
    );
    const onEdge = await taskReaches(edge, contextId, "TASK_STATE_CANCELED");
    expect(onEdge.id).toBe(peerRunning.id);
  });

  it("a caller that drops the stream and resumes with Last-Event-ID misses and repeats nothing", async () => {
    const contextId = `resume-${randomUUID()}`;
    const url = agentUrl(mid, "long");
    const before = await sse(
      url,
      "SendStreamingMessage",
      { message: userMessage("long one", contextId) },
      { until: (events) => chunks(events).length >= 5 },
    );
    const lastId = before.events.at(-1)!.event.id!;
    const taskId = lastId.slice(0, lastId.lastIndexOf(":"));
    const after = await sse(url, "SubscribeToTask", { id: taskId }, { headers: { "last-event-id": lastId } });
    const all = [...before.events, ...after.events];
    expect(all.map((e) => e.event.id)).toEqual(all.map((_, i) => `${taskId}:${i + 1}`));
    const text = chunks(all).map((c) => c.text);
    const stored = await call(url, "GetTask", { id: taskId });
    expect(stateOf(stored)).toBe("TASK_STATE_COMPLETED");
    expect(text.join("")).toBe(storedText(stored));
    const [onEdge] = await tasksOf(edge, contextId);
    expect(text).toEqual(Array.from({ length: 40 }, (_, i) => `c${i}.`));
    expect(storedText(onEdge!)).toBe(storedText(stored));
  });

  it("a peer whose stream breaks ends the caller's task FAILED, naming the peer's URL and what happened", async () => {
    const contextId = `broken-${randomUUID()}`;
    const { events } = await sse(agentUrl(mid, "broken"), "SendStreamingMessage", {
      message: userMessage("hello", contextId),
    });
    expect(chunks(events).map((c) => c.text)).toEqual(["half of it"]);
    const end = resultOf(events.at(-1)!).statusUpdate as Record<string, unknown>;
    expect(stateOf(end)).toBe("TASK_STATE_FAILED");
    expect(statusText(end)).toContain(brokenPeerUrl);
    expect(statusText(end)).toMatch(/broke off its stream after 2 events/);
    expect(brokenPeerMethods).toContain("broken SendStreamingMessage");
  });

  it("a Parley peer (gRPC) killed mid-stream ends the caller's task FAILED, naming the peer's URL", async () => {
    const contextId = `killed-${randomUUID()}`;
    const stream = sse(agentUrl(mid, "doomed"), "SendStreamingMessage", { message: userMessage("hello", contextId) });
    // Killed once its chunks reach mid's task.
    for (;;) {
      const [task] = await tasksOf(mid, contextId);
      if (task && storedText(task) !== "") break;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    doomed.child.kill("SIGKILL");
    await doomed.exited;
    const { events } = await stream;
    expect(chunks(events).length).toBeGreaterThan(0);
    const end = resultOf(events.at(-1)!).statusUpdate as Record<string, unknown>;
    expect(stateOf(end)).toBe("TASK_STATE_FAILED");
    expect(statusText(end)).toContain(`http://${doomed.grpcAddress}`);
    expect(statusText(end)).toMatch(/broke off its stream after \d+ events/);
    const [stored] = await tasksOf(mid, contextId);
    expect(stateOf(stored!)).toBe("TASK_STATE_FAILED");
  }, 30_000);

  it("a peer whose card does not stream is sent to once, as before", async () => {
    const contextId = `plain-${randomUUID()}`;
    const { events } = await sse(agentUrl(mid, "plain"), "SendStreamingMessage", {
      message: userMessage("hello", contextId),
    });
    expect(chunks(events).map((c) => c.text)).toEqual(["whole answer"]);
    expect(brokenPeerMethods).toContain("plain SendMessage");
    expect(brokenPeerMethods).not.toContain("plain SendStreamingMessage");
  });
});
