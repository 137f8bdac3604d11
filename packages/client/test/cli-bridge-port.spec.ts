// The CLI pointed at the bridge's port (JSON-RPC, and Connect/gRPC-Web over HTTP/1.1): over HTTP/2 one clear error
// line and exit 1, never a crash; with --http-version 1.1 (or httpVersion in the config) every command works there.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { createBridge, createBridgeLogger, createConnectRoutes } from "@parley/bridge";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type CliResult, runCli, startServer, type TestServer, tempDir } from "./harness.js";

let server: TestServer;
/** The bridge as `npm start` wires it: JSON-RPC and the Connect routes on one HTTP/1.1 port. */
let bridge: { url: string; close(): Promise<void> };
const home = tempDir("parley-cli-bridge-home-");

function parley(args: string[], env: NodeJS.ProcessEnv = {}): Promise<CliResult> {
  return runCli(args, { env: { PATH: process.env.PATH, HOME: home.path, ...env } });
}

beforeAll(async () => {
  server = await startServer();
  const upstream = server.parley.inProcessTransport();
  bridge = await createBridge({
    upstream,
    cards: server.parley,
    port: 0,
    logger: createBridgeLogger("silent"),
    routes: [createConnectRoutes({ upstream, maxBodyBytes: 1024 * 1024 })],
  });
});

afterAll(async () => {
  await bridge.close();
  await server.close();
  home.remove();
});

describe("parley against the bridge's port", () => {
  it("over HTTP/2 prints one error line naming the URL and what to do, and exits 1, for every protocol", async () => {
    const port = bridge.url.replace(/\/$/, "");
    const runs = await Promise.all([
      ...["connect", "grpc-web", "grpc"].map((protocol) =>
        parley(["--server", port, "--protocol", protocol, "threads", "list", "--limit", "1"]),
      ),
      parley(["--server", port, "send", "hello"]),
    ]);
    for (const [i, result] of runs.entries()) {
      expect(result.code, result.stderr).toBe(1);
      expect(result.stdout).toBe("");
      // One line: no unhandled 'error' event, no stack.
      expect(result.stderr.trimEnd().split("\n"), result.stderr).toHaveLength(1);
      expect(result.stderr).toContain(`parley: ${port} does not speak HTTP/2 (h2c)`);
      expect(result.stderr).toContain("The server's gRPC port is 8081 by default");
      expect(result.stderr).toContain(i === 2 ? "add --protocol connect --http-version 1.1" : "add --http-version 1.1");
    }
  });

  it("with --http-version 1.1 sends, lists and shows over Connect and gRPC-Web", async () => {
    const sent = await parley([
      "--server",
      bridge.url,
      "--http-version",
      "1.1",
      "--protocol",
      "grpc-web",
      "send",
      "--context",
      "via-bridge",
      "first turn",
    ]);
    expect(sent).toMatchObject({ code: 0, stdout: "first turn\n" });
    const [list, show] = await Promise.all([
      parley(["--server", bridge.url, "--http-version", "1.1", "threads", "list"]),
      parley(["--server", bridge.url, "--http-version", "1.1", "threads", "show", "via-bridge", "--oldest-first"]),
    ]);
    expect(list.code, list.stderr).toBe(0);
    expect(list.stdout).toMatch(/^via-bridge +2 {2}\d{4}-/m);
    expect(show).toMatchObject({ code: 0, stdout: "[1] user: first turn\n[2] agent: first turn\n", stderr: "" });
  });

  it('takes "httpVersion": "1.1" from the client config, and refuses HTTP/1.1 with gRPC (exit 2)', async () => {
    const config = join(home.path, "bridge.json");
    writeFileSync(config, JSON.stringify({ server: bridge.url, protocol: "connect", httpVersion: "1.1" }));
    const fromConfig = await parley(["send", "--context", "from-config", "configured"], {
      PARLEY_CLIENT_CONFIG: config,
    });
    expect(fromConfig).toMatchObject({ code: 0, stdout: "configured\n" });

    const grpc = await parley([
      "--server",
      bridge.url,
      "--http-version",
      "1.1",
      "--protocol",
      "grpc",
      "threads",
      "list",
    ]);
    expect(grpc.code).toBe(2);
    expect(grpc.stderr).toContain("--http-version 1.1 needs protocol connect or grpc-web");
  });
});
