import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { renderConfigTable, renderHelp } from "../src/config/help.js";
import { loadConfig } from "../src/config/load-config.js";
import { defaultConfig } from "../src/config/schema.js";
import { settingList } from "../src/config/settings.js";
import { agentShortcuts, ConfigError } from "../src/config/sources.js";
import { keyedRequestsPerSecondPerTenant, rateLimitPolicy } from "../src/limits/rate-limit-policy.js";

// The tests that start real node processes (each loads the whole server) get room on a loaded 2-core machine.
const spawning = { timeout: 180_000 };
const serverBin = fileURLToPath(new URL("../bin/parley-server.js", import.meta.url));
const configurationDoc = fileURLToPath(new URL("../../../docs/configuration.md", import.meta.url));
const dir = mkdtempSync(join(tmpdir(), "parley-config-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function file(name: string, content: unknown): string {
  const path = join(dir, name);
  writeFileSync(path, typeof content === "string" ? content : JSON.stringify(content));
  return path;
}

function problemsOf(run: () => unknown): string[] {
  try {
    run();
  } catch (error) {
    if (error instanceof ConfigError) return error.problems.map((p) => `${p.path} (${p.source}): ${p.message}`);
    throw error;
  }
  throw new Error("the configuration was accepted");
}

/**
 * Runs the real parley-server entry; only invocations that stop before listening are used here (one that
 * starts instead is killed after `timeout` and has no exit status).
 */
function server(args: string[], env: Record<string, string> = {}, timeout = 120_000) {
  const run = spawnSync(process.execPath, [serverBin, ...args], {
    encoding: "utf8",
    env: { PATH: process.env.PATH ?? "", ...env },
    timeout,
  });
  return { status: run.status, stdout: run.stdout, stderr: run.stderr };
}

describe("a wrong configuration refuses to start", spawning, () => {
  const typoFile = file("typo.json", { histroy: { maxMessages: 100 }, limits: { maxMessageBytes: "lots" } });

  it("the typo file of issue 19 stops parley-server with both problems named", () => {
    const run = server(["--config", typoFile, "--grpc-port", "0", "--data-dir", join(dir, "data")]);
    expect(run.status).toBe(2);
    expect(run.stdout).toBe("");
    expect(run.stderr).toContain("invalid configuration (2 problems)");
    expect(run.stderr).toContain(
      `histroy = {"maxMessages":100} (config file ${typoFile}): unknown key (did you mean "history"?)`,
    );
    expect(run.stderr).toContain(
      `limits.maxMessageBytes = "lots" (config file ${typoFile}): Invalid input: expected number, received string; allowed: a whole number from 1 to 1073741824`,
    );
  });

  it("reports unknown keys, wrong types and out-of-range values at their full path", () => {
    const path = file("bad.json", {
      port: 70_000,
      limits: { maxMessageBytes: 0, maxPartsPerMesage: 3 },
      agents: [{ name: "a", type: "echoo" }],
      scaleOut: { leaseTtlMs: 10 },
      capabilities: { streaming: "yes" },
    });
    const problems = problemsOf(() => loadConfig({ argv: ["--config", path], env: {} }));
    const source = `config file ${path}`;
    expect(problems).toEqual(
      expect.arrayContaining([
        `port (${source}): Too big: expected number to be <=65535`,
        `limits.maxMessageBytes (${source}): Too small: expected number to be >=1`,
        `limits.maxPartsPerMesage (${source}): unknown key (did you mean "maxPartsPerMessage"?)`,
        expect.stringMatching(/^agents\[0\]\.type .*expected one of "echo"\|"openai"/),
        `scaleOut.leaseTtlMs (${source}): Too small: expected number to be >=300`,
        `capabilities.streaming (${source}): Invalid input: expected boolean, received string`,
      ]),
    );
    expect(problems).toHaveLength(6);
  });

  it("checks the file on its own: a bad value in it stops the start even where a variable or flag overrides it", () => {
    const path = file("overridden.json", { port: "abc", history: { maxMessages: "lots" } });
    const run = server(
      ["--config", path, "--grpc-port", "0", "--data-dir", join(dir, "data")],
      { PARLEY_HISTORY_MESSAGES: "5" },
      60_000,
    );
    expect(run.status).toBe(2);
    expect(run.stdout).toBe("");
    expect(run.stderr).toContain("invalid configuration (2 problems)");
    expect(run.stderr).toContain(
      `port = "abc" (config file ${path}): Invalid input: expected number, received string; allowed: a whole number from 0 to 65535`,
    );
    expect(run.stderr).toContain(
      `history.maxMessages = "lots" (config file ${path}): Invalid input: expected number, received string; allowed: a whole number, at least 0`,
    );
  });

  it("checks every source on its own and reports each bad value once, from the source that gave it", () => {
    // A bad variable under a flag that overrides it.
    expect(problemsOf(() => loadConfig({ argv: ["--grpc-port", "3"], env: { PARLEY_GRPC_PORT: "x" } }))).toEqual([
      "port (environment PARLEY_GRPC_PORT): Invalid input: expected number, received string",
    ]);
    // The file's and the environment's API keys are merged: the file's bad one is the file's, named once.
    const keys = file("keys.json", { apiKeys: { k1: "" } });
    expect(problemsOf(() => loadConfig({ argv: ["--config", keys], env: { PARLEY_API_KEYS: "k2=bob" } }))).toEqual([
      `apiKeys.k1 (config file ${keys}): Too small: expected string to have >=1 characters`,
    ]);
    // A rule across settings takes them from every source: the file's tenant is the environment's key's.
    const tenants = file("tenants.json", { retention: { tenants: { alice: 30 } } });
    const config = loadConfig({ argv: ["--config", tenants], env: { PARLEY_API_KEYS: "k=alice" } });
    expect(config.retention.tenants).toEqual({ alice: 30 });
  });

  it("checks agent options like every other setting: parley-server lists each bad one at its full path", () => {
    const path = file("options.json", {
      agents: [{ name: "echo", type: "echo", options: { chunkz: 3, delayMs: "slow" } }],
    });
    const run = server(["--config", path, "--grpc-port", "0", "--data-dir", join(dir, "data")], {}, 60_000);
    expect(run.status).toBe(2);
    expect(run.stdout).toBe("");
    expect(run.stderr).toContain("invalid configuration (2 problems)");
    expect(run.stderr).toContain(
      `agents[0].options.chunkz = 3 (config file ${path}): unknown key (did you mean "chunks"?); allowed: the keys delayMs, chunks, reply, input, repeat`,
    );
    expect(run.stderr).toContain(
      `agents[0].options.delayMs = "slow" (config file ${path}): Invalid input: expected number, received string; allowed: a whole number from 0 to 2147483647`,
    );
  });

  it("checks the options of every agent type by that type's schema, and takes the valid ones as given", () => {
    const bad = file("agent-options.json", {
      peers: [{ name: "far", url: "http://127.0.0.1:1" }],
      agents: [
        { name: "e", type: "echo", options: { chunks: -1, reply: "sometimes", repeat: 1.5 } },
        { name: "o", type: "openai", options: { baseUrl: "ftp://x", modle: "m", temperature: "hot" } },
        { name: "r", type: "a2a", options: { peer: 5 } },
        { name: "c", type: "conformance", options: { resubscribeWorkMs: -1, resubscribeWorkMS: 1 } },
        {
          name: "s",
          type: "script",
          options: { replies: ["hi", { delay: 3 }, 5, { converse: { server: "far", to: "a2a:", text: "x" } }] },
        },
        { name: "t", type: "script", options: {} },
      ],
    });
    const source = `config file ${bad}`;
    expect(problemsOf(() => loadConfig({ argv: ["--config", bad], env: {} }))).toEqual([
      `agents[0].options.chunks (${source}): Too small: expected number to be >=1`,
      `agents[0].options.reply (${source}): Invalid option: expected one of "task"|"message"|"auto"`,
      `agents[0].options.repeat (${source}): Invalid input: expected int, received number`,
      `agents[1].options.baseUrl (${source}): Invalid URL`,
      `agents[1].options.temperature (${source}): Invalid input: expected number, received string`,
      `agents[1].options.modle (${source}): unknown key (did you mean "model"?)`,
      `agents[2].options.peer (${source}): Invalid input: expected string, received number`,
      `agents[3].options.resubscribeWorkMs (${source}): Too small: expected number to be >=0`,
      `agents[3].options.resubscribeWorkMS (${source}): unknown key (did you mean "resubscribeWorkMs"?)`,
      `agents[4].options.replies[1].delay (${source}): unknown key (did you mean "delayMs"?)`,
      `agents[4].options.replies[2] (${source}): expected a string, or an object with reply, delayMs, fail or converse`,
      `agents[4].options.replies[3].converse.to (${source}): session "a2a:" names no peer after a2a:`,
      // What must be there at all is checked once the sources are merged (the environment may give it).
      `agents[1].options.model (${source}): Invalid input: expected string, received undefined`,
      `agents[5].options.replies (${source}): Invalid input: expected array, received undefined`,
    ]);
    // A peer that is not configured is refused with the ones that are, as a rule across settings.
    const nowhere = file("nowhere.json", {
      peers: [{ name: "far", url: "http://127.0.0.1:1" }],
      agents: [{ name: "r", type: "a2a", options: { peer: "near" } }],
    });
    expect(problemsOf(() => loadConfig({ argv: ["--config", nowhere], env: {} }))).toEqual([
      `agents[0].options.peer (config file ${nowhere}): no peer is named "near"; the peers are "far"`,
    ]);
    // The option shapes the repository's own configurations use load unchanged.
    const agents = [
      {
        name: "echo",
        type: "echo",
        options: { delayMs: 10, chunks: 2_000, input: "text", repeat: 2_000, reply: "auto" },
      },
      { name: "conformance", type: "conformance", options: { resubscribeWorkMs: 1_000 } },
      { name: "plain", type: "conformance" },
      {
        name: "planner",
        type: "script",
        description: "plans",
        options: {
          replies: [
            "",
            { reply: "Did the tests pass on main?", delayMs: 400 },
            { fail: "the script broke on purpose" },
            { converse: { server: "far", from: "req", to: "tgt/ctx", text: "pass it on", turns: 2 } },
          ],
        },
      },
      { name: "gpt", type: "openai", options: { baseUrl: "http://127.0.0.1:1/v1", model: "m", apiKey: "sk" } },
      { name: "relay", type: "a2a", options: { peer: "far" } },
    ];
    const good = file("good-agents.json", { peers: [{ name: "far", url: "http://127.0.0.1:1" }], agents });
    expect(loadConfig({ argv: ["--config", good], env: {} }).agents).toEqual(agents);
  });

  it("names the environment variable or flag a bad value came from", () => {
    const run = server(["--grpc-port", "lots"], { PARLEY_PUSH: "maybe", PARLEY_RATE_LIMIT: "-5" });
    expect(run.status).toBe(2);
    expect(run.stderr).toContain('port = "lots" (flag --grpc-port): Invalid input: expected number, received string');
    expect(run.stderr).toContain('capabilities.pushNotifications = "maybe" (environment PARLEY_PUSH)');
    expect(run.stderr).toContain("limits.requestsPerSecondPerTenant = -5 (environment PARLEY_RATE_LIMIT): Too small");
    expect(server(["--histroy", "3"]).stderr).toContain("Unknown option '--histroy'");
    // A typo in an address exemption is an error, not an entry that silently matches nothing.
    expect(
      problemsOf(() => loadConfig({ env: { PARLEY_PUSH_ALLOWED_ADDRESSES: "10.0.0.0/33,localhost,010.0.0.1" } })),
    ).toEqual([
      "push.allowedAddresses[0] (environment PARLEY_PUSH_ALLOWED_ADDRESSES): the prefix length after / is out of range",
      expect.stringMatching(/^push\.allowedAddresses\[1\] .*expected an IP address/),
      expect.stringMatching(/^push\.allowedAddresses\[2\] .*four-part decimal/),
    ]);
    expect(problemsOf(() => loadConfig({ env: { PARLEY_WRITE_BUFFER_MB: "0" } }))).toEqual([
      expect.stringMatching(/^writeBufferMb \(environment PARLEY_WRITE_BUFFER_MB\): Too small/),
    ]);
    expect(problemsOf(() => loadConfig({ env: { PARLEY_AGENT: "gpt" } }))).toEqual([
      'PARLEY_AGENT (environment PARLEY_AGENT): Invalid option: expected one of "echo"|"openai"|"conformance"',
    ]);
  });

  it("checks rules across settings and unreadable files", () => {
    expect(
      problemsOf(() =>
        loadConfig({ argv: ["--config", file("turns.json", { sessions: { defaultTurns: 30 } })], env: {} }),
      ),
    ).toEqual([expect.stringMatching(/^sessions\.defaultTurns .*must not exceed sessions\.maxTurns \(20\)/)]);
    const twice = file("twice.json", {
      agents: [
        { name: "a", type: "echo" },
        { name: "a", type: "conformance" },
      ],
    });
    expect(problemsOf(() => loadConfig({ argv: ["--config", twice], env: {} }))).toEqual([
      expect.stringMatching(/^agents\[1\]\.name .*used twice/),
    ]);
    expect(problemsOf(() => loadConfig({ argv: ["--config", file("x.json", "{ nope")], env: {} }))[0]).toMatch(
      /cannot read it/,
    );
  });
});

describe("the promised names keep working", () => {
  // Every environment variable the README and the help text named before the schema existed.
  const promised: [env: string, value: string, path: string, expected: unknown][] = [
    ["PARLEY_HOST", "0.0.0.0", "host", "0.0.0.0"],
    ["PARLEY_GRPC_PORT", "9001", "port", 9001],
    ["PARLEY_STORE_URL", "postgres://db/parley", "storeUrl", "postgres://db/parley"],
    ["PARLEY_LEASE_TTL_MS", "5000", "scaleOut.leaseTtlMs", 5000],
    ["PARLEY_SWEEP_MS", "700", "scaleOut.sweepIntervalMs", 700],
    ["PARLEY_API_KEYS", "k1=alice, k2=bob", "apiKeys", { k1: "alice", k2: "bob" }],
    ["PARLEY_HISTORY_MESSAGES", "3", "history.maxMessages", 3],
    ["PARLEY_HISTORY_CHARS", "99", "history.maxChars", 99],
    ["PARLEY_STEP_TIMEOUT_MS", "1000", "limits.agentStepTimeoutMs", 1000],
    ["PARLEY_RATE_LIMIT", "0", "limits.requestsPerSecondPerTenant", 0],
    ["PARLEY_RATE_BURST", "7", "limits.requestBurstPerTenant", 7],
    ["PARLEY_SHUTDOWN_GRACE_MS", "0", "shutdownGraceMs", 0],
    ["PARLEY_STREAMING", "off", "capabilities.streaming", false],
    ["PARLEY_PUSH", "on", "capabilities.pushNotifications", true],
    ["PARLEY_EXTENDED_CARD", "yes", "capabilities.extendedAgentCard", true],
    ["PARLEY_REQUIRED_EXTENSIONS", "urn:a, urn:b", "capabilities.requiredExtensions", ["urn:a", "urn:b"]],
    ["PARLEY_PUSH_ALLOWED_HOSTS", "hooks.internal", "push.allowedHosts", ["hooks.internal"]],
    ["PARLEY_PUSH_ALLOWED_ADDRESSES", "10.0.0.5, fd00::/8", "push.allowedAddresses", ["10.0.0.5", "fd00::/8"]],
    ["PARLEY_LOG_LEVEL", "warn", "logLevel", "warn"],
    ["PARLEY_WRITE_BUFFER_MB", "8", "writeBufferMb", 8],
    ["PORT", "9080", "bridge.port", 9080],
    ["BRIDGE_HOST", "0.0.0.0", "bridge.host", "0.0.0.0"],
    ["BRIDGE_PUBLIC_URL", "https://a2a.example/", "bridge.publicUrl", "https://a2a.example/"],
    ["BRIDGE_KEEPALIVE_MS", "5000", "bridge.keepAliveMs", 5000],
  ];
  const at = (config: object, path: string) =>
    path.split(".").reduce<unknown>((v, k) => (v as Record<string, unknown>)[k], config);

  it.each(promised)("%s=%s sets %s", (env, value, path, expected) => {
    // The extended card requires API keys (it must be served to authenticated callers only).
    const keys = env === "PARLEY_EXTENDED_CARD" ? { PARLEY_API_KEYS: "key=tenant" } : {};
    expect(at(loadConfig({ env: { [env]: value, ...keys } }), path)).toEqual(expected);
  });

  it("every promised variable is in the schema or the agent shortcuts, so the help text lists it", () => {
    const names = new Set([...settingList.map((s) => s.meta.env), ...agentShortcuts.map((a) => a.env)]);
    for (const [env] of promised) expect(names.has(env), env).toBe(true);
    for (const env of ["PARLEY_DATA_DIR", "PARLEY_AGENT", "PARLEY_ECHO_DELAY_MS", "PARLEY_OPENAI_MODEL"]) {
      expect(names.has(env), env).toBe(true);
    }
  });

  it("agent shortcuts build the agent as before", () => {
    const openai = loadConfig({
      env: { PARLEY_AGENT: "openai", PARLEY_OPENAI_MODEL: "m", OPENAI_API_KEY: "sk" },
    }).agents;
    expect(openai).toEqual([
      expect.objectContaining({
        name: "openai",
        type: "openai",
        options: { baseUrl: "https://api.openai.com/v1", model: "m", apiKey: "sk" },
      }),
    ]);
    const echo = loadConfig({ argv: ["--agent", "echo"], env: { PARLEY_ECHO_DELAY_MS: "5" } }).agents;
    expect(echo[0]?.options).toEqual({ delayMs: 5 });
  });

  it("agent shortcuts fill in options the file leaves out, and a value the options refuse is the variable's", () => {
    const path = file("openai.json", { agents: [{ name: "gpt", type: "openai" }] });
    const env = { PARLEY_OPENAI_BASE_URL: "http://127.0.0.1:1/v1", PARLEY_OPENAI_MODEL: "m" };
    expect(loadConfig({ argv: ["--config", path], env }).agents[0]?.options).toEqual({
      baseUrl: "http://127.0.0.1:1/v1",
      model: "m",
    });
    // PARLEY_ECHO_DELAY_MS takes any whole number; a delay setTimeout cannot wait is refused by the option.
    expect(problemsOf(() => loadConfig({ env: { PARLEY_ECHO_DELAY_MS: "3000000000" } }))).toEqual([
      "agents[0].options.delayMs (environment PARLEY_ECHO_DELAY_MS): Too big: expected number to be <=2147483647",
    ]);
    // The file's bad option is the file's even where a variable overrides it.
    const chunks = file("chunks.json", { agents: [{ name: "echo", type: "echo", options: { chunks: -1 } }] });
    expect(problemsOf(() => loadConfig({ argv: ["--config", chunks], env: { PARLEY_ECHO_CHUNKS: "3" } }))).toEqual([
      `agents[0].options.chunks (config file ${chunks}): Too small: expected number to be >=1`,
    ]);
  });

  it("parley-server keeps --host and --port as the old spellings of --grpc-host and --grpc-port", () => {
    const config = loadConfig({ argv: ["--host", "::1", "--port", "0", "--data-dir", dir], env: {} });
    expect(config.host).toBe("::1");
    expect(config.port).toBe(0);
    expect(config.notices).toEqual([
      "--host is the old spelling of --grpc-host on parley-server; it keeps working",
      "--port is the old spelling of --grpc-port on parley-server; it keeps working",
    ]);
  });

  it("on parley-bridge --port is the JSON-RPC port and --grpc-port the h2c port", () => {
    const config = loadConfig({ program: "parley-bridge", argv: ["--port", "9080", "--grpc-port", "9081"], env: {} });
    expect(config.bridge.port).toBe(9080);
    expect(config.port).toBe(9081);
    expect(problemsOf(() => loadConfig({ argv: ["--public-url", "http://x/"], env: {} }))[0]).toMatch(
      /Unknown option '--public-url'/,
    );
  });

  it("flags win over the environment, which wins over the file", () => {
    const path = file("layers.json", { port: 1, history: { maxMessages: 1, maxChars: 1 } });
    const config = loadConfig({
      argv: ["--config", path, "--grpc-port", "3"],
      env: { PARLEY_GRPC_PORT: "2", PARLEY_HISTORY_MESSAGES: "2" },
    });
    expect([config.port, config.history.maxMessages, config.history.maxChars]).toEqual([3, 2, 1]);
    expect(config.limits).toEqual(defaultConfig.limits);
  });
});

describe("the per-tenant rate limit", () => {
  it("is off in open mode, where every caller is one tenant, unless configured", () => {
    expect(rateLimitPolicy(loadConfig({ env: {} }))).toMatchObject({ ratePerSecond: 0 });
    expect(rateLimitPolicy(loadConfig({ env: { PARLEY_RATE_LIMIT: "50" } }))).toMatchObject({ ratePerSecond: 50 });
  });

  it("is 200 requests/s per tenant, burst 400, once API keys name tenants", () => {
    const keyed = loadConfig({ env: { PARLEY_API_KEYS: "k=alice" } });
    expect(rateLimitPolicy(keyed)).toMatchObject({ ratePerSecond: keyedRequestsPerSecondPerTenant, burst: 400 });
    expect(keyedRequestsPerSecondPerTenant).toBe(200);
    expect(rateLimitPolicy(loadConfig({ env: { PARLEY_API_KEYS: "k=a", PARLEY_RATE_LIMIT: "0" } })).ratePerSecond).toBe(
      0,
    );
  });
});

describe("help text and docs/configuration.md come from the schema", spawning, () => {
  it("parley-server --help lists every server setting with its variable and flag", () => {
    const run = server(["--help"]);
    expect(run.status).toBe(0);
    expect(run.stdout).toBe(`${renderHelp("parley-server")}\n`);
    for (const s of settingList.filter((s) => !s.meta.bridgeOnly)) {
      expect(run.stdout).toContain(`  ${s.path}${s.meta.env ? `  ${s.meta.env}` : ""}`);
    }
    expect(run.stdout).not.toContain("bridge.port");
    for (const a of agentShortcuts) expect(run.stdout).toContain(a.env);
  });

  it("--help works even when the environment holds a bad value", () => {
    expect(server(["--help"], { PARLEY_GRPC_PORT: "lots" }).status).toBe(0);
  });

  it("docs/configuration.md's table is the generated one (npm run docs:config)", () => {
    const text = readFileSync(configurationDoc, "utf8");
    const start = text.indexOf("<!-- config-table:start");
    const end = text.indexOf("<!-- config-table:end -->");
    expect(start, "docs/configuration.md has the config-table markers").toBeGreaterThan(0);
    const table = text.slice(text.indexOf("\n", start) + 1, end).trim();
    expect(table).toBe(renderConfigTable());
  });
});
