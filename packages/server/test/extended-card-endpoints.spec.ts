// The extended card lists the endpoints the bridge advertised in the same agent's public card: each agent's own
// JSON-RPC URL and the server's h2c address, never another agent's URL.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "./harness.js";

const jsonRpcUrls = (card: { supportedInterfaces: { url: string; protocolBinding: string }[] }) => [
  ...new Set(card.supportedInterfaces.filter((i) => i.protocolBinding === "JSONRPC").map((i) => i.url)),
];

const auth = { authorization: "Bearer key-a" };

describe("the extended agent card's endpoints", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({
      agents: [
        { name: "first", type: "echo" },
        { name: "second", type: "echo" },
      ],
      capabilities: { extendedAgentCard: true },
      // The extended card is served to authenticated callers only.
      apiKeys: { "key-a": "tenant-a" },
    });
  });
  afterAll(async () => server.close());

  it("names each agent's own JSON-RPC URL, whichever public card was built last", async () => {
    server.parley.agentCard({ agent: "first", jsonRpcUrl: "http://bridge.test/" });
    server.parley.agentCard({ agent: "second", jsonRpcUrl: "http://bridge.test/agents/second/" });
    const first = await server.a2a("grpc", { "parley-agent": "first", ...auth }).getExtendedAgentCard({});
    const second = await server.a2a("grpc", { "parley-agent": "second", ...auth }).getExtendedAgentCard({});
    expect(jsonRpcUrls(first)).toEqual(["http://bridge.test/"]);
    expect(jsonRpcUrls(second)).toEqual(["http://bridge.test/agents/second/"]);
    for (const card of [first, second]) {
      expect(card.supportedInterfaces.filter((i) => i.protocolBinding === "GRPC").map((i) => i.url)).toEqual([
        server.address,
      ]);
    }
  });
});
