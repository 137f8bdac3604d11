import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcWebTransport } from "@connectrpc/connect-web";
import { A2AService } from "@parley/proto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openModeTenant } from "../src/interceptors/caller-interceptor.js";
import { memoryLogger } from "./fixtures/memory-logger.js";
import { collect, sendRequest, startTestServer, type TestServer } from "./harness.js";

/** The value of one sample line of the Prometheus text, 0 when the series does not exist yet. */
function sample(text: string, name: string, labels: Record<string, string> = {}): number {
  for (const line of text.split("\n")) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    const open = line.indexOf("{");
    const labelText = open >= 0 ? line.slice(open + 1, line.indexOf("}")) : "";
    const found = Object.fromEntries([...labelText.matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((m) => [m[1]!, m[2]!]));
    if (Object.entries(labels).every(([k, v]) => found[k] === v)) return Number(line.slice(line.lastIndexOf(" ") + 1));
  }
  return 0;
}

const allowedOrigin = "http://console.parley.test";

describe("metrics, request logs and browsers on the server port", () => {
  let server: TestServer;
  const log = memoryLogger();
  beforeAll(async () => {
    server = await startTestServer(
      { agents: [{ name: "echo", type: "echo", options: { delayMs: 200 } }] },
      { logger: log.logger, operations: { corsOrigins: [allowedOrigin] } },
    );
  });
  afterAll(async () => {
    await server?.close();
  });
  const metrics = async () => {
    const res = await fetch(`${server.baseUrl}/metrics`);
    expect(res.headers.get("content-type")).toMatch(/^text\/plain; version=0\.0\.4/);
    return res.text();
  };

  it("moves /metrics with requests: counts by method and code, latency, busy rejections, store and agent steps", async () => {
    const before = await metrics();
    const method = "lf.a2a.v1.A2AService/SendStreamingMessage";
    const a2a = server.a2a("grpc", { "a2a-version": "1.0" });
    const first = a2a
      .sendStreamingMessage(
        sendRequest("metrics-busy", "a reply long enough for eight chunks of the echo agent, 200 ms apart"),
      )
      [Symbol.asyncIterator]();
    await first.next();
    // The context is busy while the first task streams: CONTEXT_BUSY, counted by code and by reason.
    const busy = await a2a.sendMessage(sendRequest("metrics-busy", "two")).catch((e: unknown) => ConnectError.from(e));
    expect((busy as ConnectError).code).toBe(Code.Aborted);
    const during = await metrics();
    expect(sample(during, "parley_running_tasks")).toBe(1);
    expect(sample(during, "parley_open_streams", { protocol: "grpc" })).toBe(1);
    while (!(await first.next()).done) {}
    // The run lets go of its context just after its last event is out: wait for that (bounded).
    let after = await metrics();
    for (let i = 0; i < 50 && sample(after, "parley_running_tasks") !== 0; i++) {
      await new Promise((r) => setTimeout(r, 20));
      after = await metrics();
    }
    const count = (text: string, labels: Record<string, string>) => sample(text, "parley_requests_total", labels);
    expect(
      count(after, { protocol: "grpc", method, code: "ok" }) - count(before, { protocol: "grpc", method, code: "ok" }),
    ).toBe(1);
    expect(
      count(after, { protocol: "grpc", method: "lf.a2a.v1.A2AService/SendMessage", code: "aborted" }) -
        count(before, { protocol: "grpc", method: "lf.a2a.v1.A2AService/SendMessage", code: "aborted" }),
    ).toBe(1);
    expect(
      sample(after, "parley_rejections_total", { reason: "CONTEXT_BUSY" }) -
        sample(before, "parley_rejections_total", { reason: "CONTEXT_BUSY" }),
    ).toBe(1);
    expect(sample(after, "parley_open_streams", { protocol: "grpc" })).toBe(0);
    expect(sample(after, "parley_running_tasks")).toBe(0);
    // Every bucket of the stream's latency histogram holds at most the count: one observation per finished call.
    expect(sample(after, "parley_request_duration_seconds_bucket", { method, le: "+Inf" })).toBe(
      sample(after, "parley_request_duration_seconds_count", { method }),
    );
    expect(sample(after, "parley_request_duration_seconds_count", { method })).toBeGreaterThanOrEqual(1);
    expect(sample(after, "parley_agent_step_duration_seconds_count", { agent: "echo", outcome: "ok" })).toBeGreaterThan(
      sample(before, "parley_agent_step_duration_seconds_count", { agent: "echo", outcome: "ok" }),
    );
    expect(
      sample(after, "parley_store_operation_duration_seconds_count", { operation: "append", outcome: "ok" }),
    ).toBeGreaterThanOrEqual(2);
    // No contextId or tenant ever becomes a label.
    expect(after).not.toContain("metrics-busy");
    expect(after).not.toContain("tenant=");
  });

  it("writes one request line per finished request, with the id the response header carried", async () => {
    let requestId: string | null = null;
    const res = await fetch(`${server.baseUrl}/lf.a2a.v1.A2AService/SendMessage`, {
      method: "POST",
      headers: { "content-type": "application/json", "a2a-version": "1.0" },
      body: JSON.stringify(sendRequestJson("log-ctx", "hello")),
    });
    requestId = res.headers.get("parley-request-id");
    expect(res.status).toBe(200);
    expect(requestId).toMatch(/^[0-9a-f-]{36}$/);
    const mine = log.lines.filter((l) => l.requestId === requestId);
    expect(mine).toHaveLength(1);
    expect(mine[0]).toMatchObject({
      msg: "request finished",
      protocol: "connect",
      method: "lf.a2a.v1.A2AService/SendMessage",
      code: "ok",
      tenant: expect.stringMatching(/^[0-9a-f]{16}$/),
    });
    expect(typeof mine[0]!.durationMs).toBe("number");
    expect(JSON.stringify(mine[0])).not.toContain('"default"');

    // A refused request gets its line too, with its code and reason; a caller's own request id is kept.
    const refused = await fetch(`${server.baseUrl}/lf.a2a.v1.A2AService/SendMessage`, {
      method: "POST",
      headers: { "content-type": "application/json", "a2a-version": "9.9", "parley-request-id": "my-own-id.42" },
      body: JSON.stringify(sendRequestJson("log-ctx", "again")),
    });
    expect(refused.headers.get("parley-request-id")).toBe("my-own-id.42");
    expect(log.lines.filter((l) => l.requestId === "my-own-id.42")).toEqual([
      expect.objectContaining({ code: "failed_precondition", reason: "VERSION_NOT_SUPPORTED", protocol: "connect" }),
    ]);
  });

  it("serves Connect and gRPC-Web to a browser-style client over HTTP/1.1 from an allowed origin", async () => {
    // connect-web's transports run on fetch, as in a browser; Node's fetch speaks HTTP/1.1.
    const withOrigin =
      (origin: string): typeof fetch =>
      (input, init) => {
        const headers = new Headers(init?.headers);
        headers.set("origin", origin);
        return fetch(input, { ...init, headers });
      };
    const seen: Response[] = [];
    const recording =
      (origin: string): typeof fetch =>
      async (input, init) => {
        const res = await withOrigin(origin)(input, init);
        seen.push(res);
        return res;
      };
    const connect = createClient(
      A2AService,
      createConnectTransport({ baseUrl: server.baseUrl, fetch: recording(allowedOrigin) }),
    );
    const reply = await connect.sendMessage(sendRequest("browser-ctx", "from a page"), {
      headers: { "a2a-version": "1.0" },
    });
    expect(reply.payload.case).toBe("task");
    expect(seen.at(-1)!.headers.get("access-control-allow-origin")).toBe(allowedOrigin);
    expect(seen.at(-1)!.headers.get("access-control-expose-headers")).toContain("parley-request-id");

    const grpcWeb = createClient(
      A2AService,
      createGrpcWebTransport({ baseUrl: server.baseUrl, fetch: recording(allowedOrigin) }),
    );
    const events = await collect(
      grpcWeb.sendStreamingMessage(sendRequest("browser-ctx-2", "streamed"), { headers: { "a2a-version": "1.0" } }),
    );
    expect(events.length).toBeGreaterThan(2);

    // The preflight a browser sends before either call.
    const preflight = await fetch(`${server.baseUrl}/lf.a2a.v1.A2AService/SendMessage`, {
      method: "OPTIONS",
      headers: {
        origin: allowedOrigin,
        "access-control-request-method": "POST",
        "access-control-request-headers": "content-type,connect-protocol-version,a2a-version",
      },
    });
    expect(preflight.status).toBe(204);
    expect(preflight.headers.get("access-control-allow-headers")).toMatch(/Connect-Protocol-Version.*a2a-version/);
    expect(preflight.headers.get("access-control-allow-methods")).toContain("POST");
  });

  it("refuses the same browser-style call from an origin that is not allowed", async () => {
    const otherOrigin = "http://elsewhere.test";
    const connect = createClient(
      A2AService,
      createConnectTransport({
        baseUrl: server.baseUrl,
        fetch: (input, init) => {
          const headers = new Headers(init?.headers);
          headers.set("origin", otherOrigin);
          return fetch(input, { ...init, headers });
        },
      }),
    );
    const error = await connect
      .sendMessage(sendRequest("browser-ctx-3", "not from here"), { headers: { "a2a-version": "1.0" } })
      .catch((e: unknown) => ConnectError.from(e));
    expect(error).toBeInstanceOf(ConnectError);
    expect((error as ConnectError).code).toBe(Code.PermissionDenied);
    const preflight = await fetch(`${server.baseUrl}/lf.a2a.v1.A2AService/SendMessage`, {
      method: "OPTIONS",
      headers: { origin: otherOrigin, "access-control-request-method": "POST" },
    });
    expect(preflight.status).toBe(403);
    expect(preflight.headers.get("access-control-allow-origin")).toBeNull();
    // Nothing of the refused call was stored.
    expect(await server.parley.store.getThread({ tenant: openModeTenant, contextId: "browser-ctx-3" })).toBeUndefined();
  });

  it("lets a page served by the server itself call it back: its Origin is the server's own, not on any list", async () => {
    const ownOrigin = new URL(server.baseUrl).origin;
    const response = await fetch(`${server.baseUrl}/lf.a2a.v1.A2AService/SendMessage`, {
      method: "POST",
      headers: { origin: ownOrigin, "content-type": "application/json", "a2a-version": "1.0" },
      body: JSON.stringify(sendRequestJson("browser-ctx-4", "from the same origin")),
    });
    expect(response.status).toBe(200);
    // Another port on the same host is another origin, and stays refused.
    const otherPort = new URL(server.baseUrl);
    otherPort.port = String(Number(otherPort.port) + 1);
    const refused = await fetch(`${server.baseUrl}/lf.a2a.v1.A2AService/SendMessage`, {
      method: "POST",
      headers: { origin: otherPort.origin, "content-type": "application/json", "a2a-version": "1.0" },
      body: JSON.stringify(sendRequestJson("browser-ctx-5", "from next door")),
    });
    expect(refused.status).toBe(403);
  });
});

function sendRequestJson(contextId: string, text: string) {
  return { message: { messageId: crypto.randomUUID(), contextId, role: "ROLE_USER", parts: [{ text }] } };
}
