import { Code, type ConnectError } from "@connectrpc/connect";
import { messageText } from "@parley/domain";
import { ErrorInfoSchema, type StreamResponse, type Task, TaskState } from "@parley/proto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { defaultConfig } from "../src/config/schema.js";
import { rateLimitPolicy } from "../src/limits/rate-limit-policy.js";
import { failure, startTestServer, type TestServer, userMessage } from "./harness.js";

function info(error: ConnectError) {
  const detail = error.findDetails(ErrorInfoSchema)[0];
  return { reason: detail?.reason, limit: detail?.metadata.limit };
}

function textMessage(parts: string[]) {
  return { ...userMessage(""), parts: parts.map((value) => ({ content: { case: "text" as const, value } })) };
}

describe("limits are on by default", () => {
  it("ships a non-zero default for every limit, and a rate limit once API keys name tenants", () => {
    const { requestsPerSecondPerTenant, ...others } = defaultConfig.limits;
    for (const [name, value] of Object.entries(others)) expect(value, name).toBeGreaterThan(0);
    // Unset by default: rateLimitPolicy gives 200/s per tenant with API keys and none in open mode (one tenant).
    expect(requestsPerSecondPerTenant).toBeUndefined();
    expect(rateLimitPolicy({ ...defaultConfig, apiKeys: { k: "t" } }).ratePerSecond).toBeGreaterThan(0);
    expect(defaultConfig.history.maxMessages).toBeGreaterThan(0);
    expect(defaultConfig.history.maxChars).toBeGreaterThan(0);
  });
});

describe.each(["grpc", "connect", "grpc-web"] as const)("size and count limits over %s", (protocol) => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({
      limits: { maxMessageBytes: 4096, maxPartsPerMessage: 3, maxTextChars: 1000, agentStepTimeoutMs: 300 },
      agents: [
        { name: "echo", type: "echo" },
        { name: "stuck", type: "echo", options: { delayMs: 60_000 } },
      ],
    });
  });
  afterAll(async () => {
    await server.close();
  });

  it("refuses a request larger than maxMessageBytes with ResourceExhausted naming the byte limit", async () => {
    const error = await failure(server.a2a(protocol).sendMessage({ message: textMessage(["x".repeat(8000)]) }));
    expect(error.code).toBe(Code.ResourceExhausted);
    expect(error.rawMessage).toMatch(/larger than configured readMaxBytes 4096/);
  });

  it("refuses more parts than maxPartsPerMessage with LIMIT_EXCEEDED naming the limit", async () => {
    const error = await failure(server.a2a(protocol).sendMessage({ message: textMessage(["a", "b", "c", "d"]) }));
    expect(error.code).toBe(Code.ResourceExhausted);
    expect(info(error)).toEqual({ reason: "LIMIT_EXCEEDED", limit: "maxPartsPerMessage" });
    expect(error.rawMessage).toMatch(/4 parts; the limit is 3/);
    const ok = await server.a2a(protocol).sendMessage({ message: textMessage(["a", "b", "c"]) });
    expect((ok.payload.value as Task).status?.state).toBe(TaskState.COMPLETED);
  });

  it("refuses a text part longer than maxTextChars with LIMIT_EXCEEDED naming the limit", async () => {
    const error = await failure(server.a2a(protocol).sendMessage({ message: textMessage(["y".repeat(1001)]) }));
    expect(info(error)).toEqual({ reason: "LIMIT_EXCEEDED", limit: "maxTextChars" });
    expect(error.rawMessage).toMatch(/1001 characters; the limit is 1000/);
    const ok = await server.a2a(protocol).sendMessage({ message: textMessage(["y".repeat(1000)]) });
    expect((ok.payload.value as Task).status?.state).toBe(TaskState.COMPLETED);
  });

  it("fails an agent step that outlives agentStepTimeoutMs, names the limit, and frees the context", async () => {
    const contextId = `timeout-${protocol}`;
    const stuck = server.a2a(protocol, { "parley-agent": "stuck" });
    const res = await stuck.sendMessage({ message: userMessage("hello?", { contextId }) });
    const task = res.payload.value as Task;
    expect(task.status?.state).toBe(TaskState.FAILED);
    expect(messageText(task.status!.message!)).toMatch(/did not finish within 300 ms \(limits\.agentStepTimeoutMs\)/);
    const next = await server.a2a(protocol).sendMessage({ message: userMessage("again", { contextId }) });
    expect((next.payload.value as Task).status?.state).toBe(TaskState.COMPLETED);
  });
});

describe("stream limits", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({
      apiKeys: { "key-alice": "alice", "key-bob": "bob", "key-carol": "carol" },
      limits: { maxOpenStreamsPerTenant: 2, subscriberBufferEvents: 3 },
      agents: [{ name: "echo", type: "echo", options: { delayMs: 100, chunks: 40 } }],
    });
  });
  afterAll(async () => {
    await server.close();
  });

  it("refuses a tenant's stream beyond maxOpenStreamsPerTenant, leaves other tenants alone, and frees the slot when a stream ends", async () => {
    const alice = server.a2a("grpc", { authorization: "Bearer key-alice" });
    const open = [0, 1].map((i) =>
      alice.sendStreamingMessage({ message: userMessage(`long reply ${i} `.repeat(10)) })[Symbol.asyncIterator](),
    );
    // The first event proves the server counted the stream as open.
    for (const stream of open) expect((await stream.next()).value?.payload.case).toBe("task");

    const third = await failure(async () => {
      for await (const _ of alice.sendStreamingMessage({ message: userMessage("one too many") })) break;
    });
    expect(third.code).toBe(Code.ResourceExhausted);
    expect(info(third)).toEqual({ reason: "LIMIT_EXCEEDED", limit: "maxOpenStreamsPerTenant" });
    expect(third.rawMessage).toMatch(/2 open streams; the limit is 2/);

    const bob = server.a2a("grpc", { authorization: "Bearer key-bob" });
    const bobStream = bob.sendStreamingMessage({ message: userMessage("bob") })[Symbol.asyncIterator]();
    expect((await bobStream.next()).value?.payload.case).toBe("task");
    await bobStream.return?.();

    // Cancel alice's first task and read its stream to the end: the server released the slot before closing it.
    const first = (await open[0]!.next()).value as StreamResponse;
    const taskId =
      first.payload.case === "statusUpdate" || first.payload.case === "artifactUpdate"
        ? first.payload.value.taskId
        : "";
    await alice.cancelTask({ id: taskId });
    for (let r = await open[0]!.next(); !r.done; r = await open[0]!.next()) {
      // drain
    }
    const again = alice.sendStreamingMessage({ message: userMessage("now there is room") })[Symbol.asyncIterator]();
    expect((await again.next()).value?.payload.case).toBe("task");
    await again.return?.();
    await open[1]!.return?.();
  });

  it("cuts off a streaming caller more than subscriberBufferEvents behind; a late SubscribeToTask reads the log instead", async () => {
    // A tenant of its own, so the stream slots of the test above play no part.
    const carol = server.a2a("grpc", { authorization: "Bearer key-carol" });
    const started = (
      await carol.sendMessage({
        message: userMessage("z".repeat(400)),
        configuration: { returnImmediately: true },
      })
    ).payload.value as Task;
    for (;;) {
      const task = await carol.getTask({ id: started.id });
      const chunks = task.artifacts.map((a) => messageText(a)).join("").length / 10;
      if (chunks >= 4) break;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    // The in-memory follower a SendStreamingMessage caller reads: starting (or falling) more than
    // the buffer behind the run ends it with the limit's error rather than holding the producer.
    const run = server.parley.engine.liveRun("carol", started.id)!;
    const error = await failure(async () => {
      // A reader that never goes away.
      for await (const _ of run.follow(0, () => () => {}, 3)) {
        // Events before the cut are allowed; the stream must end in the error.
      }
    });
    expect(error.code).toBe(Code.ResourceExhausted);
    expect(error.rawMessage).toMatch(/fell \d+ events behind task .* \(limit 3\); resubscribe/);
    // SubscribeToTask reads the task's event log in batches and holds nothing in memory for its
    // reader, so a late subscriber gets every event from the first, however far behind it starts.
    const late = carol.subscribeToTask({ id: started.id })[Symbol.asyncIterator]();
    const seen: string[] = [];
    for (let i = 0; i < 6; i++) seen.push((await late.next()).value?.payload.case ?? "end");
    expect(seen[0]).toBe("task");
    expect(seen.filter((c) => c === "artifactUpdate").length).toBeGreaterThanOrEqual(4);
    await late.return?.();
    await carol.cancelTask({ id: started.id });
  });
});

describe("requestsPerSecondPerTenant", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({
      apiKeys: { "key-alice": "alice", "key-bob": "bob" },
      limits: { requestsPerSecondPerTenant: 1, requestBurstPerTenant: 2 },
    });
  });
  afterAll(async () => {
    await server.close();
  });

  it("answers RATE_LIMITED naming the limit and when to retry, per tenant, and lets the retry through", async () => {
    const alice = server.a2a("connect", { authorization: "Bearer key-alice" });
    const outcomes = await Promise.all(Array.from({ length: 8 }, () => failure(alice.getTask({ id: "no-such-task" }))));
    const limited = outcomes.filter((e) => info(e).reason === "RATE_LIMITED");
    // A burst of 2 refilling at 1/s cannot admit 8 requests sent at once.
    expect(limited.length).toBeGreaterThan(0);
    for (const e of outcomes.filter((x) => !limited.includes(x))) expect(info(e).reason).toBe("TASK_NOT_FOUND");
    const error = limited[0]!;
    expect(error.code).toBe(Code.ResourceExhausted);
    expect(error.rawMessage).toMatch(
      /exceeded requestsPerSecondPerTenant \(1 requests per second, burst 2\); retry in \d+ ms/,
    );
    const detail = error.findDetails(ErrorInfoSchema)[0]!;
    expect(detail.metadata.limit).toBe("requestsPerSecondPerTenant");
    const retryAfterMs = Number(detail.metadata.retryAfterMs);
    expect(retryAfterMs).toBeGreaterThan(0);

    // Bob has his own bucket.
    const bob = await failure(server.a2a("connect", { authorization: "Bearer key-bob" }).getTask({ id: "x" }));
    expect(info(bob).reason).toBe("TASK_NOT_FOUND");

    await new Promise((resolve) => setTimeout(resolve, retryAfterMs));
    const retried = await failure(alice.getTask({ id: "no-such-task" }));
    expect(info(retried).reason).toBe("TASK_NOT_FOUND");
  });

  it("is raised or switched off by PARLEY_RATE_LIMIT and PARLEY_RATE_BURST", async () => {
    const { loadConfig } = await import("../src/index.js");
    const config = loadConfig({ argv: [], env: { PARLEY_RATE_LIMIT: "100000", PARLEY_RATE_BURST: "5000" } });
    expect(config.limits.requestsPerSecondPerTenant).toBe(100_000);
    expect(config.limits.requestBurstPerTenant).toBe(5_000);
    expect(loadConfig({ argv: [], env: { PARLEY_RATE_LIMIT: "0" } }).limits.requestsPerSecondPerTenant).toBe(0);
    expect(() => loadConfig({ argv: [], env: { PARLEY_RATE_LIMIT: "fast" } })).toThrow(/PARLEY_RATE_LIMIT/);
  });
});
