// Rules of the A2A v1.0 specification beyond the conformance kit, over gRPC and Connect: input modes (3.1.1),
// version negotiation (3.6, 3.6.2), the extended card (3.3.4, 13.3), one Task event per stream (3.1.2), the
// required role (3.3.2, 5.7) and the required task id.

import { Code, ConnectError } from "@connectrpc/connect";
import { TaskState } from "@parley/proto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../src/config/load-config.js";
import { kitId, reasonOf } from "./fixtures/kit-requests.js";
import { startTestServer, type TestServer, userMessage } from "./harness.js";

async function refusal(call: Promise<unknown>): Promise<ConnectError> {
  const error = await call.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!(error instanceof ConnectError)) throw new Error(`expected a ConnectError, got ${String(error)}`);
  return error;
}

describe("A2A rules over gRPC and Connect", () => {
  let server: TestServer;
  let keyed: TestServer;

  beforeAll(async () => {
    server = await startTestServer({ agents: [{ name: "conformance", type: "conformance" }] });
    keyed = await startTestServer({
      apiKeys: { "key-alpha": "alpha" },
      capabilities: { extendedAgentCard: true },
    });
  });
  afterAll(async () => {
    await server.close();
    await keyed.close();
  });

  it("refuses a part whose media type is not an input mode with ContentTypeNotSupportedError", async () => {
    for (const protocol of ["grpc", "connect"] as const) {
      const message = {
        ...userMessage("unsupported"),
        parts: [
          {
            content: { case: "raw" as const, value: new TextEncoder().encode("tck") },
            mediaType: "application/x-unsupported-tck-type",
          },
        ],
      };
      const error = await refusal(server.a2a(protocol).sendMessage({ message }));
      expect(error.code).toBe(Code.InvalidArgument);
      expect(reasonOf(error)).toBe("CONTENT_TYPE_NOT_SUPPORTED");
      expect(error.rawMessage).toMatch(/application\/x-unsupported-tck-type.*input modes are text\/plain/);
    }
    // Text is text/plain and a data part application/json, both in the default input modes.
    const accepted = await server.a2a("grpc").sendMessage({
      message: {
        ...userMessage("text and data"),
        parts: [
          { content: { case: "text", value: "hello" } },
          { content: { case: "data", value: { kind: { case: "boolValue", value: true } } } },
        ],
      },
    });
    expect(accepted.payload.case).toBe("task");
    expect(server.parley.agentCard({}).defaultInputModes).toEqual(["text/plain", "application/json"]);
  });

  it("negotiates Major.Minor only and refuses 0.3 and a missing version on the 1.0-only interface", async () => {
    for (const version of ["1.0.1", "1.0.0", "1.0"]) {
      const reply = await server.a2a("grpc", { "a2a-version": version }).sendMessage({ message: userMessage("v") });
      expect(reply.payload.case, version).toBe("task");
    }
    for (const headers of [{ "a2a-version": "0.3" }, { "a2a-version": "" }, { "a2a-version": "0.3.1" }]) {
      const error = await refusal(server.a2a("grpc", headers).sendMessage({ message: userMessage("old") }));
      expect(reasonOf(error)).toBe("VERSION_NOT_SUPPORTED");
      expect(error.code).toBe(Code.FailedPrecondition);
      expect(error.rawMessage).toMatch(/supported versions: 1\.0;/);
      expect(error.rawMessage).not.toMatch(/0\.3,|, 0\.3/);
    }
    // Parley's own services are not A2A and take no version.
    const threads = await server.threads({ "a2a-version": "" }).listThreads({});
    expect(Array.isArray(threads.threads)).toBe(true);
  });

  it("answers GetExtendedAgentCard with UnsupportedOperationError when the capability is off", async () => {
    const error = await refusal(server.a2a("grpc").getExtendedAgentCard({}));
    expect(reasonOf(error)).toBe("UNSUPPORTED_OPERATION");
    expect(error.code).toBe(Code.FailedPrecondition);
  });

  it("requires authentication for the extended card and declares the scheme on the card", async () => {
    expect(() => loadConfig({ argv: [], env: { PARLEY_EXTENDED_CARD: "true", PARLEY_DATA_DIR: "/tmp/x" } })).toThrow(
      /extended agent card requires authentication: configure apiKeys/,
    );
    const anonymous = await refusal(keyed.a2a("grpc").getExtendedAgentCard({}));
    expect(anonymous.code).toBe(Code.Unauthenticated);
    const card = await keyed.a2a("grpc", { authorization: "Bearer key-alpha" }).getExtendedAgentCard({});
    expect(Object.keys(card.securitySchemes)).toEqual(["bearer"]);
    expect(keyed.parley.agentCard({}).securityRequirements).toHaveLength(1);
  });

  it("sends one Task event per subscription, also across a follow-up to an input-required task", async () => {
    const a2a = server.a2a("grpc");
    const first = await a2a.sendMessage({ message: userMessage("ask", { messageId: kitId("tck-input-required") }) });
    if (first.payload.case !== "task") throw new Error("expected a task");
    const task = first.payload.value;
    expect(task.status?.state).toBe(TaskState.INPUT_REQUIRED);
    const seen: string[] = [];
    const subscribed = (async () => {
      for await (const event of a2a.subscribeToTask({ id: task.id })) {
        const p = event.payload;
        seen.push(
          p.case === "task"
            ? `task:${TaskState[p.value.status!.state]}`
            : `${p.case}:${p.case === "statusUpdate" ? TaskState[p.value.status!.state] : ""}`,
        );
        // The snapshot is in: now the follow-up goes.
        if (seen.length === 1) {
          void a2a.sendMessage({ message: userMessage("answer", { taskId: task.id, contextId: task.contextId }) });
        }
      }
    })();
    await subscribed;
    expect(seen[0]).toBe("task:INPUT_REQUIRED");
    expect(seen.filter((label) => label.startsWith("task:"))).toHaveLength(1);
    expect(seen.at(-1)).toBe("statusUpdate:COMPLETED");
  });

  it("refuses a message without a role, naming role", async () => {
    for (const protocol of ["grpc", "connect"] as const) {
      const error = await refusal(
        server.a2a(protocol).sendMessage({ message: { ...userMessage("no role"), role: 0 } }),
      );
      expect(error.code).toBe(Code.InvalidArgument);
      expect(error.rawMessage).toMatch(/message\.role is required/);
    }
  });

  it("takes the tenant from the API key; the request's tenant field does not select or cross tenants", async () => {
    const alpha = keyed.a2a("grpc", { authorization: "Bearer key-alpha" });
    const sent = await alpha.sendMessage({ tenant: "someone-else", message: userMessage("mine") });
    if (sent.payload.case !== "task") throw new Error("expected a task");
    const task = sent.payload.value;
    expect((await alpha.getTask({ tenant: "another", id: task.id })).id).toBe(task.id);
    const stored = await keyed.parley.store.getThread({ tenant: "alpha", contextId: task.contextId });
    expect(stored).toBeDefined();
    expect(await keyed.parley.store.getThread({ tenant: "someone-else", contextId: task.contextId })).toBeUndefined();
  });

  it("refuses GetTask, CancelTask and SubscribeToTask without an id as invalid, naming id", async () => {
    const a2a = server.a2a("grpc");
    for (const call of [
      a2a.getTask({}),
      a2a.cancelTask({}),
      (async () => {
        for await (const _ of a2a.subscribeToTask({}));
      })(),
    ]) {
      const error = await refusal(call);
      expect(error.code).toBe(Code.InvalidArgument);
      expect(error.rawMessage).toMatch(/^id \(the task id\) is required/);
    }
  });
});
