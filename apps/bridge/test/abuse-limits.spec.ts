// Limits a service is expected to have, over both protocols: JSON-RPC on the bridge and gRPC on the server's
// port, against one real embedded Parley.
import { randomUUID } from "node:crypto";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { A2AService } from "@parley/proto";
import { loadConfig } from "@parley/server";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { postRaw, rpc, startStack, type TestStack } from "./harness.js";

const v1 = { "a2a-version": "1.0" };
const maxConfigsPerTask = 2;

describe("the per-task cap on push notification configs", () => {
  let stack: TestStack;
  beforeAll(async () => {
    stack = await startStack({
      capabilities: { streaming: true, pushNotifications: true, extendedAgentCard: false, requiredExtensions: [] },
      push: {
        allowedHosts: [],
        allowedAddresses: ["127.0.0.1"],
        maxAttempts: 1,
        retryBaseMs: 10,
        timeoutMs: 1_000,
        maxConfigsPerTask,
      },
    });
  });
  afterAll(async () => {
    await stack?.close();
  });

  async function newTask(): Promise<string> {
    const sent = await postRaw(
      stack.bridge.url,
      rpc("SendMessage", {
        message: {
          messageId: randomUUID(),
          contextId: `ctx-${randomUUID()}`,
          role: "ROLE_USER",
          parts: [{ text: "x" }],
        },
      }),
      v1,
    );
    const task = (sent.json.result as { task?: { id: string } }).task;
    expect(task?.id, JSON.stringify(sent.json)).toBeDefined();
    return task!.id;
  }

  const create = (taskId: string, id: string) =>
    postRaw(
      stack.bridge.url,
      rpc("CreateTaskPushNotificationConfig", { taskId, id, url: "http://127.0.0.1:9/hook" }),
      v1,
    );

  it("refuses one config too many over JSON-RPC with -32052 naming the setting, and still takes a replacement", async () => {
    const taskId = await newTask();
    for (let i = 0; i < maxConfigsPerTask; i++) {
      const ok = await create(taskId, `c${i}`);
      expect(ok.json.error, JSON.stringify(ok.json)).toBeUndefined();
    }
    const refused = await create(taskId, "one-too-many");
    const error = refused.json.error as { code: number; message: string };
    expect(error.code).toBe(-32052);
    expect(error.message).toContain(`already has ${maxConfigsPerTask} push notification configs`);
    expect(error.message).toContain("push.maxConfigsPerTask");
    // The same id again replaces a config: no new one, so it is taken.
    const replaced = await create(taskId, "c0");
    expect(replaced.json.error, JSON.stringify(replaced.json)).toBeUndefined();
  });

  it("refuses one config too many over gRPC with RESOURCE_EXHAUSTED naming the setting", async () => {
    const taskId = await newTask();
    const client = createClient(
      A2AService,
      createGrpcTransport({
        baseUrl: `http://${stack.grpcAddress}`,
        interceptors: [
          (next) => (req) => {
            req.header.set("a2a-version", "1.0");
            return next(req);
          },
        ],
      }),
    );
    for (let i = 0; i < maxConfigsPerTask; i++) {
      await client.createTaskPushNotificationConfig({ taskId, id: `g${i}`, url: "http://127.0.0.1:9/hook" });
    }
    const error = await client
      .createTaskPushNotificationConfig({ taskId, id: "one-too-many", url: "http://127.0.0.1:9/hook" })
      .then(
        () => undefined,
        (e: unknown) => ConnectError.from(e),
      );
    expect(error?.code).toBe(Code.ResourceExhausted);
    expect(error?.rawMessage).toContain("push.maxConfigsPerTask");
  });
});

describe("failed authentication over JSON-RPC", () => {
  const perMinute = 3;
  let stack: TestStack;
  beforeAll(async () => {
    const settings = loadConfig({
      argv: [],
      env: { PARLEY_API_KEYS: "good-key=acme", PARLEY_FAILED_AUTH_PER_MINUTE: String(perMinute) },
    });
    stack = await startStack({ apiKeys: settings.apiKeys, limits: settings.limits });
  });
  afterAll(async () => {
    await stack?.close();
  });

  it("is throttled per client address: -32053 up to the limit, then -32051 naming the limit", async () => {
    const call = (key: string) =>
      postRaw(stack.bridge.url, rpc("GetTask", { id: "any" }), { ...v1, authorization: `Bearer ${key}` });
    for (let i = 0; i < perMinute; i++) {
      expect(((await call("wrong-key")).json.error as { code: number }).code).toBe(-32053);
    }
    const throttled = (await call("wrong-key")).json.error as { code: number; message: string };
    expect(throttled.code).toBe(-32051);
    expect(throttled.message).toMatch(/too many failed authentications from (::ffff:)?127\.0\.0\.1; retry in \d+ s/);
    expect(throttled.message).toContain("limits.failedAuthPerMinute");
  });
});
