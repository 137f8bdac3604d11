// Push notification configs over the a2a-js gRPC client, and delivery to a
// real webhook receiver on loopback.

import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import * as sdk from "@a2a-js/sdk";
import type { Client } from "@a2a-js/sdk/client";
import { create, toBinary } from "@bufbuild/protobuf";
import { TaskPushNotificationConfigSchema } from "@parley/proto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sdkGrpcClient as sdkClient, startTestServer, type TestServer } from "./harness.js";

interface Delivery {
  readonly headers: IncomingHttpHeaders;
  readonly body: { [key: string]: { status?: { state?: string } } };
}

/** A webhook receiver: records every POST and can fail the first few of a token with 503. */
async function startReceiver() {
  const deliveries: Delivery[] = [];
  const failures = new Map<string, number>();
  const attempts = new Map<string, number>();
  const waiters: { check: () => boolean; resolve: () => void }[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const token = String(req.headers["x-a2a-notification-token"] ?? "");
      attempts.set(token, (attempts.get(token) ?? 0) + 1);
      const left = failures.get(token) ?? 0;
      if (left > 0) {
        failures.set(token, left - 1);
        res.writeHead(503).end();
        return;
      }
      deliveries.push({ headers: req.headers, body: JSON.parse(Buffer.concat(chunks).toString()) });
      res.writeHead(204).end();
      for (const waiter of [...waiters]) {
        if (waiter.check()) {
          waiters.splice(waiters.indexOf(waiter), 1);
          waiter.resolve();
        }
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  const of = (token: string) => deliveries.filter((d) => d.headers["x-a2a-notification-token"] === token);
  return {
    port,
    url: `http://127.0.0.1:${port}/hook`,
    of,
    attempts: (token: string) => attempts.get(token) ?? 0,
    failFirst(token: string, count: number) {
      failures.set(token, count);
    },
    /** Resolves once the token's deliveries include a final (terminal or interrupted) state. */
    settled(token: string, state = "TASK_STATE_COMPLETED"): Promise<void> {
      const check = () => of(token).some((d) => d.body.statusUpdate?.status?.state === state);
      return new Promise((resolve) => (check() ? resolve() : waiters.push({ check, resolve })));
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

type Receiver = Awaited<ReturnType<typeof startReceiver>>;

function labels(deliveries: Delivery[]): string[] {
  return deliveries.map((d) => {
    const [kind, value] = Object.entries(d.body)[0]!;
    return kind === "task" || kind === "statusUpdate" ? `${kind}:${value.status?.state}` : kind;
  });
}

function send(messageId: string, extra: Record<string, unknown> = {}, configuration?: Record<string, unknown>) {
  return sdk.SendMessageRequest.fromJSON({
    message: { messageId, role: "ROLE_USER", parts: [{ text: "push me" }], ...extra },
    ...(configuration ? { configuration } : {}),
  });
}

function errorOf(promise: Promise<unknown>): Promise<{ reason?: string; message: string }> {
  return promise.then(
    () => ({ message: "resolved" }),
    (e: { reason?: string; message: string }) => ({ ...(e.reason ? { reason: e.reason } : {}), message: e.message }),
  );
}

describe("push notifications", () => {
  let server: TestServer;
  let client: Client;
  let receiver: Receiver;

  beforeAll(async () => {
    receiver = await startReceiver();
    server = await startTestServer({
      agents: [{ name: "conformance", type: "conformance" }],
      capabilities: { pushNotifications: true },
      push: {
        allowedHosts: ["127.0.0.1", "localhost", "::1"],
        // The receiver listens on loopback, which is refused unless listed.
        allowedAddresses: ["127.0.0.1", "::1"],
        retryBaseMs: 10,
        maxAttempts: 4,
        timeoutMs: 5_000,
      },
    });
    client = await sdkClient(server);
  });
  afterAll(async () => {
    await server.close();
    await receiver.close();
  });

  it("creates (with a generated id), gets, lists in pages and deletes configs idempotently", async () => {
    const task = (await client.sendMessage(send(`tck-input-required-${crypto.randomUUID()}`))) as sdk.Task;
    const created = await client.createTaskPushNotificationConfig(
      sdk.TaskPushNotificationConfig.fromJSON({ taskId: task.id, url: receiver.url, token: "crud" }),
    );
    expect(created.id).not.toBe("");
    expect(created.taskId).toBe(task.id);
    for (const id of ["b", "c"]) {
      await client.createTaskPushNotificationConfig(
        sdk.TaskPushNotificationConfig.fromJSON({ taskId: task.id, id, url: receiver.url }),
      );
    }
    const got = await client.getTaskPushNotificationConfig(
      sdk.GetTaskPushNotificationConfigRequest.fromJSON({ taskId: task.id, id: created.id }),
    );
    expect([got.url, got.token]).toEqual([receiver.url, "crud"]);

    const first = await client.listTaskPushNotificationConfig(
      sdk.ListTaskPushNotificationConfigsRequest.fromJSON({ taskId: task.id, pageSize: 2 }),
    );
    expect(first.configs).toHaveLength(2);
    expect(first.nextPageToken).not.toBe("");
    const second = await client.listTaskPushNotificationConfig(
      sdk.ListTaskPushNotificationConfigsRequest.fromJSON({
        taskId: task.id,
        pageSize: 2,
        pageToken: first.nextPageToken,
      }),
    );
    expect(second.nextPageToken).toBe("");
    expect(new Set([...first.configs, ...second.configs].map((c) => c.id))).toEqual(new Set([created.id, "b", "c"]));

    const remove = () =>
      client.deleteTaskPushNotificationConfig(
        sdk.DeleteTaskPushNotificationConfigRequest.fromJSON({ taskId: task.id, id: "b" }),
      );
    await remove();
    await remove();
    const gone = await errorOf(
      client.getTaskPushNotificationConfig(
        sdk.GetTaskPushNotificationConfigRequest.fromJSON({ taskId: task.id, id: "b" }),
      ),
    );
    expect(gone.reason).toBe("TASK_NOT_FOUND");
    expect(gone.message).toContain("push notification config");

    const unknownTask = await errorOf(
      client.createTaskPushNotificationConfig(
        sdk.TaskPushNotificationConfig.fromJSON({ taskId: "no-such-task", url: receiver.url }),
      ),
    );
    expect(unknownTask.reason).toBe("TASK_NOT_FOUND");
    const listUnknown = await errorOf(
      client.listTaskPushNotificationConfig(
        sdk.ListTaskPushNotificationConfigsRequest.fromJSON({ taskId: "no-such-task" }),
      ),
    );
    expect(listUnknown.reason).toBe("TASK_NOT_FOUND");
  });

  it("refuses a bad url and a host outside push.allowedHosts, naming the host and the setting", async () => {
    const task = (await client.sendMessage(send(`tck-input-required-${crypto.randomUUID()}`))) as sdk.Task;
    const config = (url: string) => sdk.TaskPushNotificationConfig.fromJSON({ taskId: task.id, url });
    expect((await errorOf(client.createTaskPushNotificationConfig(config("not a url")))).message).toContain(
      "not an absolute URL",
    );
    expect((await errorOf(client.createTaskPushNotificationConfig(config("ftp://127.0.0.1/x")))).message).toContain(
      "http or https",
    );
    const foreign = await errorOf(client.createTaskPushNotificationConfig(config("https://example.com/hook")));
    expect(foreign.message).toContain('"example.com" is not allowed');
    expect(foreign.message).toContain("push.allowedHosts");
    const onSend = await errorOf(
      client.sendMessage(
        send(crypto.randomUUID(), {}, { taskPushNotificationConfig: { url: "http://10.1.2.3/hook" } }),
      ),
    );
    expect(onSend.message).toContain('"10.1.2.3" is not allowed');
  });

  it("POSTs every task event in order with the configured auth and token, retrying a failing receiver", async () => {
    receiver.failFirst("stream", 2);
    const task = (await client.sendMessage(
      send(
        `tck-stream-001-${crypto.randomUUID()}`,
        {},
        {
          taskPushNotificationConfig: {
            url: receiver.url,
            token: "stream",
            authentication: { scheme: "Bearer", credentials: "hook-secret" },
          },
        },
      ),
    )) as sdk.Task;
    expect(task.status?.state).toBe(sdk.TaskState.TASK_STATE_COMPLETED);
    await receiver.settled("stream");
    const got = receiver.of("stream");
    expect(labels(got)).toEqual([
      "task:TASK_STATE_SUBMITTED",
      "statusUpdate:TASK_STATE_WORKING",
      "artifactUpdate",
      "statusUpdate:TASK_STATE_COMPLETED",
    ]);
    expect(receiver.attempts("stream")).toBe(got.length + 2);
    for (const delivery of got) {
      expect(delivery.headers["content-type"]).toBe("application/a2a+json");
      expect(delivery.headers.authorization).toBe("Bearer hook-secret");
    }
    expect((got[2]!.body.artifactUpdate as { taskId?: string }).taskId).toBe(task.id);
  });

  it("delivers follow-ups and a cancel of a waiting task to a config created later", async () => {
    const waiting = (await client.sendMessage(send(`tck-input-required-${crypto.randomUUID()}`))) as sdk.Task;
    await client.createTaskPushNotificationConfig(
      sdk.TaskPushNotificationConfig.fromJSON({ taskId: waiting.id, url: receiver.url, token: "later" }),
    );
    await client.sendMessage(send(`tck-input-required-${crypto.randomUUID()}`, { taskId: waiting.id }));
    await receiver.settled("later", "TASK_STATE_INPUT_REQUIRED");
    await client.cancelTask(sdk.CancelTaskRequest.fromJSON({ id: waiting.id }));
    await receiver.settled("later", "TASK_STATE_CANCELED");
    expect(labels(receiver.of("later"))).toEqual([
      "task:TASK_STATE_SUBMITTED",
      "statusUpdate:TASK_STATE_INPUT_REQUIRED",
      "statusUpdate:TASK_STATE_CANCELED",
    ]);
  });

  it("checks the allow-list again on delivery, and a dead receiver never holds the task", async () => {
    // The same data under a narrower allow-list, as after an operator removed 127.0.0.1 from it.
    const strict = await startTestServer({
      agents: [{ name: "conformance", type: "conformance" }],
      capabilities: { pushNotifications: true },
      push: {
        allowedHosts: ["localhost"],
        allowedAddresses: ["127.0.0.1", "::1"],
        retryBaseMs: 10,
        maxAttempts: 3,
        timeoutMs: 5_000,
      },
    });
    try {
      const strictClient = await sdkClient(strict);
      const waiting = (await strictClient.sendMessage(send(`tck-input-required-${crypto.randomUUID()}`))) as sdk.Task;
      // Written straight to the store, past create's check: a config stored before the list was narrowed.
      await strict.parley.store.putPushConfig({
        tenant: "default",
        taskId: waiting.id,
        configId: "stale",
        payload: toBinary(
          TaskPushNotificationConfigSchema,
          create(TaskPushNotificationConfigSchema, {
            id: "stale",
            taskId: waiting.id,
            url: receiver.url,
            token: "stale",
          }),
        ),
      });
      const closedPort = await new Promise<number>((resolve) => {
        const probe = createServer().listen(0, "127.0.0.1", () => {
          const { port } = probe.address() as AddressInfo;
          probe.close(() => resolve(port));
        });
      });
      // Nothing listens there: every attempt fails and is retried, off the task's path.
      await strictClient.createTaskPushNotificationConfig(
        sdk.TaskPushNotificationConfig.fromJSON({
          taskId: waiting.id,
          id: "dead",
          url: `http://localhost:${closedPort}/`,
        }),
      );
      await strictClient.createTaskPushNotificationConfig(
        sdk.TaskPushNotificationConfig.fromJSON({
          taskId: waiting.id,
          id: "good",
          url: `http://localhost:${receiver.port}/hook`,
          token: "good",
        }),
      );
      const done = (await strictClient.sendMessage(
        send(`tck-complete-task-${crypto.randomUUID()}`, { taskId: waiting.id }),
      )) as sdk.Task;
      expect(done.status?.state).toBe(sdk.TaskState.TASK_STATE_COMPLETED);
      await receiver.settled("good");
      expect(labels(receiver.of("good"))).toEqual(["task:TASK_STATE_SUBMITTED", "statusUpdate:TASK_STATE_COMPLETED"]);
      expect(receiver.attempts("stale")).toBe(0);
    } finally {
      await strict.close();
    }
  });
});
