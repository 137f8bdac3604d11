// A bad flag value or argument is a usage error (exit 2, as --help says) wherever it is caught: by commander, when
// the config is read, or before a file is imported; never exit 1, which means the server or the agent failed.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type CliResult, runCli, startServer, type TestServer, tempDir } from "./harness.js";

const home = tempDir("parley-cli-usage-home-");
let server: TestServer;

function parley(args: string[], env: NodeJS.ProcessEnv = {}): Promise<CliResult> {
  return runCli(args, { env: { PATH: process.env.PATH, HOME: home.path, ...env } });
}

beforeAll(async () => {
  server = await startServer();
});

afterAll(async () => {
  await server.close();
  home.remove();
});

describe("usage errors exit 2", () => {
  it("a bad server URL, from --server, PARLEY_SERVER or the config file, named by where it came from", async () => {
    const config = join(home.path, "bad-server.json");
    writeFileSync(config, JSON.stringify({ server: "nope" }));
    const [flag, scheme, env, file] = await Promise.all([
      parley(["--server", "not-a-url", "threads", "list"]),
      parley(["--server", "ftp://127.0.0.1:8081", "threads", "list"]),
      parley(["threads", "list"], { PARLEY_SERVER: "bad" }),
      parley(["--config", config, "threads", "list"]),
    ]);
    expect(flag).toMatchObject({
      code: 2,
      stderr: 'parley: --server: invalid URL "not-a-url": expected e.g. http://127.0.0.1:8081\n',
    });
    expect(scheme.code).toBe(2);
    expect(scheme.stderr).toContain("the scheme must be http or https");
    expect(env).toMatchObject({ code: 2, stderr: expect.stringContaining('PARLEY_SERVER: invalid URL "bad"') });
    expect(file).toMatchObject({ code: 2, stderr: expect.stringContaining(`${config}: server: invalid URL "nope"`) });
  });

  it("a peer of the client config with a bad URL", async () => {
    const config = join(home.path, "bad-peer.json");
    writeFileSync(config, JSON.stringify({ peers: { p: { url: "nope", protocol: "jsonrpc" } } }));
    const result = await parley(["--server", server.baseUrl, "--config", config, "send", "--to", "p", "hi"]);
    expect(result).toMatchObject({ code: 2, stderr: expect.stringContaining(`${config}: peers.p.url: invalid URL`) });
  });

  it("an empty contextId, as an argument or as --context", async () => {
    const runs = await Promise.all(
      [
        ["threads", "show", ""],
        ["threads", "delete", ""],
        ["threads", "export", ""],
        ["send", "--context", "", "hi"],
        ["threads", "import-legacy", join(home.path, "log.jsonl"), "--context", ""],
      ].map((args) => parley(["--server", server.baseUrl, ...args])),
    );
    for (const result of runs) {
      expect(result.code, result.stderr).toBe(2);
      expect(result.stderr).toContain("a contextId is never empty");
    }
  });

  it("an import FILE that cannot be read", async () => {
    const missing = join(home.path, "missing.jsonl");
    const runs = await Promise.all([
      parley(["--server", server.baseUrl, "threads", "import", missing]),
      parley(["--server", server.baseUrl, "threads", "import-legacy", missing, "--context", "x"]),
      parley(["--server", server.baseUrl, "import", missing]),
    ]);
    for (const result of runs) {
      expect(result.code, result.stderr).toBe(2);
      expect(result.stderr).toContain(`parley: cannot read ${missing}: ENOENT`);
    }
  });
});
