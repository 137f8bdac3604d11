import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { AccessService } from "@parley/proto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "./harness.js";

describe("AccessService.GetCaller", () => {
  let keyed: TestServer;
  let open: TestServer;
  beforeAll(async () => {
    const agents = [
      { name: "echo", type: "echo" as const },
      { name: "second", type: "echo" as const },
    ];
    keyed = await startTestServer({ apiKeys: { "key-alice": "alice", "key-bob": "bob" }, agents });
    open = await startTestServer({ agents });
  });
  afterAll(async () => {
    await Promise.all([keyed.close(), open.close()]);
  });

  it("names the tenant each key maps to, the answering agent and the hosted agents", async () => {
    const alice = createClient(AccessService, keyed.transport("connect", { authorization: "Bearer key-alice" }));
    expect(await alice.getCaller({})).toMatchObject({
      tenant: "alice",
      openMode: false,
      agent: "echo",
      agents: ["echo", "second"],
    });
    const bob = createClient(
      AccessService,
      keyed.transport("grpc", { authorization: "Bearer key-bob", "parley-agent": "second" }),
    );
    expect(await bob.getCaller({})).toMatchObject({ tenant: "bob", agent: "second" });
  });

  it("refuses an unknown key as Unauthenticated, like every other RPC", async () => {
    const stranger = createClient(AccessService, keyed.transport("connect", { authorization: "Bearer nope" }));
    const error = await stranger.getCaller({}).then(
      () => undefined,
      (e: unknown) => ConnectError.from(e),
    );
    expect(error?.code).toBe(Code.Unauthenticated);
    expect(error?.rawMessage).toBe("unknown API key");
  });

  it("says open mode and tenant default when no keys are configured", async () => {
    const anyone = createClient(AccessService, open.transport("connect"));
    expect(await anyone.getCaller({})).toMatchObject({ tenant: "default", openMode: true });
  });
});
