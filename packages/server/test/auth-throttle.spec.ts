// Failed authentication throttled per client address, on a real parley-server process over gRPC (HTTP/2) and
// Connect over HTTP/1.1 (the connect-node fallback), with the address in the log line.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { A2AService } from "@parley/proto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type SpawnedServer, spawnServer } from "./fixtures/spawn-server.js";

const perMinute = 5;

const errorOf = (call: Promise<unknown>) =>
  call.then(
    () => undefined,
    (e: unknown) => ConnectError.from(e),
  );

describe("failed authentication per client address", () => {
  const dataDir = mkdtempSync(join(tmpdir(), "parley-auth-throttle-"));
  let server: SpawnedServer;
  beforeAll(async () => {
    server = await spawnServer({
      dataDir,
      env: {
        PARLEY_API_KEYS: "good-key=acme",
        PARLEY_FAILED_AUTH_PER_MINUTE: String(perMinute),
        PARLEY_RATE_LIMIT: "0",
      },
    });
  }, 60_000);
  afterAll(async () => {
    server?.child.kill("SIGKILL");
    server?.closeClients();
    await server?.exited;
    rmSync(dataDir, { recursive: true, force: true });
  });

  it("answers UNAUTHENTICATED up to the limit, then RESOURCE_EXHAUSTED naming the limit and when to retry", async () => {
    const bad = server.a2a({ authorization: "Bearer wrong-key", "a2a-version": "1.0" });
    for (let i = 0; i < perMinute; i++) {
      const error = await errorOf(bad.getTask({ id: "any" }));
      expect(error?.code).toBe(Code.Unauthenticated);
    }
    const throttled = await errorOf(bad.getTask({ id: "any" }));
    expect(throttled?.code).toBe(Code.ResourceExhausted);
    expect(throttled?.rawMessage).toMatch(
      /too many failed authentications from (::ffff:)?127\.0\.0\.1; retry in \d+ s/,
    );
    expect(throttled?.rawMessage).toContain("limits.failedAuthPerMinute");
    // While throttled the address is refused whatever key it sends: guessing goes no faster with a good one mixed in.
    const good = server.a2a({ authorization: "Bearer good-key", "a2a-version": "1.0" });
    expect((await errorOf(good.getTask({ id: "any" })))?.code).toBe(Code.ResourceExhausted);
    // The HTTP/1.1 path (connect-node) knows the address too.
    const overHttp1 = createClient(
      A2AService,
      createConnectTransport({
        baseUrl: server.baseUrl,
        httpVersion: "1.1",
        interceptors: [
          (next) => (req) => {
            req.header.set("authorization", "Bearer wrong-key");
            return next(req);
          },
        ],
      }),
    );
    expect((await errorOf(overHttp1.getTask({ id: "any" })))?.code).toBe(Code.ResourceExhausted);
    // Each failure is logged with the client's address (the log is written asynchronously: wait for its lines).
    const failuresLogged = () =>
      server
        .stderr()
        .split("\n")
        .filter((line) => line.includes('"authentication failed"'));
    for (let i = 0; i < 100 && failuresLogged().length < perMinute; i++) {
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const failures = failuresLogged();
    expect(failures).toHaveLength(perMinute);
    expect(failures[0]).toMatch(/"clientAddress":"(::ffff:)?127\.0\.0\.1"/);
    expect(failures[0]).toContain('"reason":"unknown API key"');
  });
});
