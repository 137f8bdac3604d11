// A bridge in --upstream mode advertises what an embedded bridge advertises: the chain context and resumable streams.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { extensionUris } from "@parley/proto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type SpawnedServer, spawnServer } from "../../../packages/server/test/fixtures/spawn-server.js";
import { type Bridge, createBridge } from "../src/bridge.js";
import { createBridgeLogger } from "../src/logger.js";
import { createRemoteUpstream, type RemoteUpstream } from "../src/upstream.js";
import { startStack, type TestStack } from "./harness.js";

interface CardJson {
  capabilities?: { streaming?: boolean; extensions?: { uri: string; required?: boolean }[] };
}

const extensionsOf = async (url: string) => {
  const card = (await (await fetch(new URL(".well-known/agent-card.json", url))).json()) as CardJson;
  return (card.capabilities?.extensions ?? []).map((e) => e.uri).sort();
};

describe("the agent card of a bridge in --upstream mode", () => {
  const dataDir = mkdtempSync(join(tmpdir(), "parley-upstream-card-"));
  let server: SpawnedServer;
  let upstream: RemoteUpstream;
  let bridge: Bridge;
  let embedded: TestStack;

  beforeAll(async () => {
    server = await spawnServer({ dataDir, env: { PARLEY_RATE_LIMIT: "0" } });
    upstream = createRemoteUpstream(server.baseUrl);
    bridge = await createBridge({
      upstream: upstream.transport,
      cards: upstream.cards,
      port: 0,
      logger: createBridgeLogger("silent"),
    });
    embedded = await startStack();
  }, 60_000);

  afterAll(async () => {
    upstream?.close();
    await bridge?.close();
    await embedded?.close();
    server?.child.kill("SIGTERM");
    await server?.exited;
    rmSync(dataDir, { recursive: true, force: true });
  });

  it("lists the resumable-streams extension, as the embedded bridge does", async () => {
    const remote = await extensionsOf(bridge.url);
    expect(remote).toContain(extensionUris.resumableStreams);
    expect(remote).toContain(extensionUris.chain);
    expect(remote).toEqual(await extensionsOf(embedded.bridge.url));
  });
});
