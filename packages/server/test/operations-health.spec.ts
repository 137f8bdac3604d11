import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import { grpcHealthV1, grpcReflectionV1alpha } from "@parley/proto";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sendRequest, startTestServer, type TestServer } from "./harness.js";
import { type PrivatePostgres, startPrivatePostgres } from "./private-postgres.js";

const run = promisify(execFile);
/** The buf CLI from the repository's own devDependencies (@bufbuild/buf). */
const buf = fileURLToPath(new URL("../../../node_modules/.bin/buf", import.meta.url));
const { HealthCheckResponse_ServingStatus: ServingStatus } = grpcHealthV1;

/** `buf curl` over gRPC with HTTP/2 prior knowledge, schema from the server's reflection only. */
async function bufCurl(baseUrl: string, path: string, args: readonly string[] = []): Promise<unknown> {
  const { stdout } = await run(
    buf,
    ["curl", "--protocol", "grpc", "--http2-prior-knowledge", ...args, `${baseUrl}/${path}`],
    { timeout: 20_000 },
  );
  return JSON.parse(stdout);
}

describe("health and reflection on the gRPC port", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({
      agents: [{ name: "echo", type: "echo", options: { delayMs: 150 } }],
      shutdownGraceMs: 10_000,
    });
  });
  afterAll(async () => {
    await server?.close();
  });

  it("answers grpc.health.v1.Health/Check to buf curl", async () => {
    expect(await bufCurl(server.baseUrl, "grpc.health.v1.Health/Check")).toEqual({ status: "SERVING" });
    expect(
      await bufCurl(server.baseUrl, "grpc.health.v1.Health/Check", ["-d", '{"service":"lf.a2a.v1.A2AService"}']),
    ).toEqual({ status: "SERVING" });
  });

  it("lets buf curl call SendMessage with nothing but server reflection", async () => {
    const reply = (await bufCurl(server.baseUrl, "lf.a2a.v1.A2AService/SendMessage", [
      "-H",
      "a2a-version: 1.0",
      "-d",
      JSON.stringify({ message: { messageId: "reflected-1", role: "ROLE_USER", parts: [{ text: "via reflection" }] } }),
    ])) as { task?: { status?: { state?: string }; artifacts?: { parts: { text: string }[] }[] } };
    expect(reply.task?.status?.state).toBe("TASK_STATE_COMPLETED");
    expect(reply.task?.artifacts?.flatMap((a) => a.parts.map((p) => p.text)).join("")).toContain("via reflection");
  });

  it("lists every service through reflection, and answers the v1alpha protocol too", async () => {
    const { stdout } = await run(
      buf,
      ["curl", "--protocol", "grpc", "--http2-prior-knowledge", "--list-services", server.baseUrl],
      { timeout: 20_000 },
    );
    expect(stdout.split("\n").filter(Boolean).sort()).toEqual([
      "grpc.health.v1.Health",
      "grpc.reflection.v1.ServerReflection",
      "grpc.reflection.v1alpha.ServerReflection",
      "lf.a2a.v1.A2AService",
      "parley.v1.AccessService",
      "parley.v1.SessionService",
      "parley.v1.TargetService",
      "parley.v1.ThreadService",
    ]);
    const manager = new Http2SessionManager(server.baseUrl);
    try {
      const reflection = createClient(
        grpcReflectionV1alpha.ServerReflection,
        createGrpcTransport({ baseUrl: server.baseUrl, sessionManager: manager }),
      );
      async function* requests() {
        yield { messageRequest: { case: "fileContainingSymbol" as const, value: "lf.a2a.v1.A2AService.SendMessage" } };
        yield { messageRequest: { case: "fileByFilename" as const, value: "no/such.proto" } };
      }
      const answers = [];
      for await (const answer of reflection.serverReflectionInfo(requests())) answers.push(answer);
      expect(answers).toHaveLength(2);
      const files = answers[0]!.messageResponse;
      expect(files.case).toBe("fileDescriptorResponse");
      // a2a.proto and what it imports (empty, struct, timestamp), each a serialized FileDescriptorProto.
      expect(files.case === "fileDescriptorResponse" && files.value.fileDescriptorProto.length).toBe(4);
      const missing = answers[1]!.messageResponse;
      expect(missing.case === "errorResponse" && missing.value.errorCode).toBe(Code.NotFound);
    } finally {
      manager.abort();
    }
  });

  it("answers health without credentials when API keys are configured", async () => {
    const keyed = await startTestServer({ apiKeys: { "secret-key": "tenant-a" } });
    try {
      const health = createClient(grpcHealthV1.Health, keyed.transport("grpc"));
      expect((await health.check({ service: "" })).status).toBe(ServingStatus.SERVING);
      await expect(keyed.a2a().sendMessage(sendRequest("c", "x"))).rejects.toMatchObject({
        code: Code.Unauthenticated,
      });
    } finally {
      await keyed.close();
    }
  });

  it("refuses an unknown service name with NOT_FOUND, as the health protocol says", async () => {
    const health = createClient(grpcHealthV1.Health, server.transport("grpc"));
    const error = await health.check({ service: "no.such.Service" }).catch((e: unknown) => ConnectError.from(e));
    expect(error).toBeInstanceOf(ConnectError);
    expect((error as ConnectError).code).toBe(Code.NotFound);
  });

  it("serves /healthz and /readyz over HTTP/1.1, and reports NOT_SERVING while draining, taking no new connection", async () => {
    const healthz = await fetch(`${server.baseUrl}/healthz`);
    expect(healthz.status).toBe(200);
    expect(healthz.headers.get("parley-request-id")).toBeTruthy();
    const ready = await fetch(`${server.baseUrl}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toMatchObject({ status: "ready", checks: { store: "ok" } });

    const health = createClient(grpcHealthV1.Health, server.transport("grpc"));
    const watch = health.watch({ service: "" })[Symbol.asyncIterator]();
    expect((await watch.next()).value?.status).toBe(ServingStatus.SERVING);

    // A task that runs for 8 x 150 ms keeps the server in its grace period after close() starts.
    const stream = server.a2a("grpc").sendStreamingMessage(sendRequest("drain-ctx", "slow"));
    const first = await stream[Symbol.asyncIterator]().next();
    expect(first.done).toBe(false);
    const closing = server.parley.close();

    expect((await watch.next()).value?.status).toBe(ServingStatus.NOT_SERVING);
    // The task runs on on its connection while no new connection is taken (issue 20: a drain stops accepting
    // at once); a probe in flight, like this Watch, hears NOT_SERVING.
    const refused = await health
      .check({ service: "" }, { timeoutMs: 5_000 })
      .catch((error: unknown) => ConnectError.from(error));
    expect(refused).toBeInstanceOf(ConnectError);
    expect((refused as ConnectError).code).toBe(Code.Unavailable);
    await expect(fetch(`${server.baseUrl}/readyz`, { headers: { connection: "close" } })).rejects.toThrow();
    expect(server.parley.engine.runningCount).toBe(1);
    await closing;
  });
});

// A PostgreSQL instance of this file's own, so it can be stopped under the server.
describe("readiness with PostgreSQL", () => {
  let postgres: PrivatePostgres | undefined;
  let server: TestServer | undefined;
  beforeAll(async () => {
    postgres = await startPrivatePostgres();
    const admin = new pg.Client({ connectionString: postgres.url });
    await admin.connect();
    await admin.query("CREATE DATABASE parley_ready");
    await admin.end();
    server = await startTestServer({ storeUrl: postgres.url.replace(/\/[^/]*$/, "/parley_ready") });
  }, 60_000);
  afterAll(async () => {
    await server?.close().catch(() => {});
    await postgres?.destroy();
  }, 60_000);

  it("is ready while the pool answers, and not ready (naming the pool) once PostgreSQL is gone", async () => {
    const ready = await fetch(`${server!.baseUrl}/readyz`);
    expect(await ready.json()).toMatchObject({ ready: true, checks: { store: "ok", postgresPool: "ok" } });
    await postgres!.stop();
    const down = await fetch(`${server!.baseUrl}/readyz`);
    expect(down.status).toBe(503);
    const body = (await down.json()) as { checks: Record<string, string> };
    expect(body.checks.postgresPool).toMatch(/no PostgreSQL connection/);
    await postgres!.start();
    // The pool reconnects by itself: readiness comes back without a restart.
    let again: Response | undefined;
    for (let i = 0; i < 50; i++) {
      again = await fetch(`${server!.baseUrl}/readyz`);
      if (again.status === 200) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    expect(again?.status).toBe(200);
  }, 60_000);
});
