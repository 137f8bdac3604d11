// `parley converse` run as a child process against a real server hosting two scripted agents.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type CliResult, runCli, startServer, type TestServer, tempDir } from "./harness.js";

const scratch = tempDir("parley-converse-");
let server: TestServer;

function parley(args: string[]): Promise<CliResult> {
  return runCli(["--server", server.baseUrl, "--protocol", "grpc", ...args], {
    env: { ...process.env, PARLEY_CLIENT_CONFIG: join(scratch.path, "client.json") },
  });
}

beforeAll(async () => {
  writeFileSync(join(scratch.path, "client.json"), "{}");
  const serverConfig = join(scratch.path, "server.json");
  writeFileSync(
    serverConfig,
    JSON.stringify({
      agents: [
        { name: "alice", type: "script", options: { replies: ["thanks, bob", "REPLY_SKIP"] } },
        {
          name: "bob",
          type: "script",
          options: { replies: ["bob's first answer", "bob's second answer", "all done"] },
        },
      ],
    }),
  );
  server = await startServer({}, ["--config", serverConfig]);
});

afterAll(async () => {
  await server.close();
  scratch.remove();
});

describe("parley converse", () => {
  it("prints every step as it happens and ends with the stop reason, never a silence token", async () => {
    const { code, stdout, stderr } = await parley([
      "converse",
      "--from",
      "alice/ctx-alice",
      "--to",
      "bob/ctx-bob",
      "--turns",
      "4",
      "hello bob",
    ]);
    expect(stderr).toBe("");
    expect(code).toBe(0);
    const lines = stdout.trim().split("\n");
    expect(lines[0]).toMatch(/^\[accepted\] /);
    expect(lines).toContain("[round one] target: bob's first answer");
    expect(lines).toContain("[turn 1/4] requester: thanks, bob");
    expect(stdout).toMatch(/\[done\] SILENCE: /);
    expect(stdout).not.toContain("REPLY_SKIP");
  });

  it("rejects a malformed session with a usage error (exit 2)", async () => {
    const { code, stderr } = await parley(["converse", "--from", "a2a:", "--to", "bob", "hi"]);
    expect(code).toBe(2);
    expect(stderr).toMatch(/names no peer after a2a:/);
  });
});
