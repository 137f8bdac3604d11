// Capability switches, A2A-Version and required extensions, through the official @a2a-js/sdk gRPC client.

import * as sdk from "@a2a-js/sdk";
import { ServiceParameters, withA2AExtensions } from "@a2a-js/sdk/client";
import { ConnectError } from "@connectrpc/connect";
import { extensionUris } from "@parley/proto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { asTask, kitId, reasonOf, request, requiredExtension } from "./fixtures/kit-requests.js";
import { sdkGrpcClient as sdkClient, startTestServer, type TestServer, userMessage } from "./harness.js";

const S = sdk.TaskState;
const onKey = "key-tck";
const onAuth = { authorization: `Bearer ${onKey}` };

describe("capability switches and protocol checks", () => {
  let on: TestServer;
  let off: TestServer;

  beforeAll(async () => {
    on = await startTestServer({
      agents: [{ name: "conformance", type: "conformance" }],
      capabilities: { pushNotifications: true, extendedAgentCard: true },
      // The extended card is served to authenticated callers only.
      apiKeys: { [onKey]: "tck" },
    });
    off = await startTestServer({
      agents: [{ name: "conformance", type: "conformance" }],
      capabilities: {
        streaming: false,
        pushNotifications: false,
        extendedAgentCard: false,
        requiredExtensions: [requiredExtension],
      },
    });
  });
  afterAll(async () => {
    await on.close();
    await off.close();
  });

  it("reflects every switch in the agent card", () => {
    const onCard = on.parley.agentCard({ grpcAddress: on.address });
    expect(onCard.capabilities).toMatchObject({ streaming: true, pushNotifications: true, extendedAgentCard: true });
    // Every backend keeps task event logs, so every streaming card offers resumable streams; the chain
    // extension (issue 17) is always declared, optional for callers.
    expect(new Map(onCard.capabilities?.extensions.map((e) => [e.uri, e.required]))).toEqual(
      new Map([
        [extensionUris.resumableStreams, false],
        [extensionUris.chain, false],
      ]),
    );
    const offCard = off.parley.agentCard({ grpcAddress: off.address });
    expect(offCard.capabilities).toMatchObject({
      streaming: false,
      pushNotifications: false,
      extendedAgentCard: false,
    });
    expect(offCard.capabilities?.extensions.map((e) => [e.uri, e.required])).toEqual([
      [requiredExtension, true],
      [extensionUris.chain, false],
    ]);
  });

  it("returns the extended card when it is switched on, to an authenticated caller", async () => {
    const card = await on.a2a("grpc", onAuth).getExtendedAgentCard({});
    expect(card.name).toBe("Parley");
    expect(card.skills[0]?.inputModes).toEqual(["text/plain", "application/json"]);
  });

  it("refuses the RPCs of switched-off capabilities with the specification's errors", async () => {
    const ext = { "a2a-version": "1.0", "a2a-extensions": requiredExtension };
    const a2a = off.a2a("grpc", ext);
    const reason = (p: Promise<unknown> | AsyncIterable<unknown>) =>
      (Symbol.asyncIterator in p
        ? (async () => {
            for await (const _ of p as AsyncIterable<unknown>);
          })()
        : (p as Promise<unknown>)
      ).then(
        () => "resolved",
        (e: unknown) => reasonOf(e),
      );
    expect(await reason(a2a.sendStreamingMessage({ message: userMessage("stream please") }))).toBe(
      "UNSUPPORTED_OPERATION",
    );
    expect(await reason(a2a.subscribeToTask({ id: "any" }))).toBe("UNSUPPORTED_OPERATION");
    expect(await reason(a2a.getExtendedAgentCard({}))).toBe("UNSUPPORTED_OPERATION");
    for (const call of [
      a2a.createTaskPushNotificationConfig({ taskId: "t", url: "http://127.0.0.1/hook" }),
      a2a.getTaskPushNotificationConfig({ taskId: "t", id: "c" }),
      a2a.listTaskPushNotificationConfigs({ taskId: "t" }),
      a2a.deleteTaskPushNotificationConfig({ taskId: "t", id: "c" }),
      a2a.sendMessage({
        message: userMessage("with a webhook"),
        configuration: { taskPushNotificationConfig: { url: "http://127.0.0.1/hook" } },
      }),
    ]) {
      expect(await reason(call)).toBe("PUSH_NOTIFICATION_NOT_SUPPORTED");
    }
  });

  it("requires a declared extension in A2A-Extensions, through the SDK client too", async () => {
    const client = await sdkClient(off);
    const refused = await client.sendMessage(request(kitId("tck-complete-task"))).catch((e: unknown) => e);
    expect(reasonOf(refused)).toBe("EXTENSION_SUPPORT_REQUIRED");
    expect((refused as { metadata?: Record<string, string> }).metadata?.extensions).toBe(requiredExtension);
    const accepted = asTask(
      await client.sendMessage(request(kitId("tck-complete-task")), {
        serviceParameters: ServiceParameters.create(withA2AExtensions(requiredExtension)),
      }),
    );
    expect(accepted.status?.state).toBe(S.TASK_STATE_COMPLETED);
  });

  it("serves 1.0 (any patch), and refuses an absent or empty A2A-Version (0.3) and an unsupported one", async () => {
    for (const version of ["1.0", "1.0.3"]) {
      const result = await on
        .a2a("grpc", { ...onAuth, "a2a-version": version })
        .sendMessage({ message: userMessage("version check") });
      expect(result.payload.case).toBe("task");
    }
    for (const version of ["", "0.3"]) {
      const old = await on
        .a2a("grpc", { ...onAuth, "a2a-version": version })
        .sendMessage({ message: userMessage("0.3") })
        .catch((e: unknown) => e);
      expect(reasonOf(old)).toBe("VERSION_NOT_SUPPORTED");
    }
    const refused = await on
      .a2a("grpc", { ...onAuth, "a2a-version": "2.0" })
      .sendMessage({ message: userMessage("too new") })
      .catch((e: unknown) => e);
    expect(reasonOf(refused)).toBe("VERSION_NOT_SUPPORTED");
    expect(ConnectError.from(refused).rawMessage).toContain('"2.0" is not supported');
  });
});
