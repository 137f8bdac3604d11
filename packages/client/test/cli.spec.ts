import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createBridge, createBridgeLogger } from "@parley/bridge";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createConversation, createParleyClient, type ParleyClient } from "../src/index.js";
import { type CliResult, runCli, startServer, type TestServer, tempDir } from "./harness.js";

let server: TestServer;
let front: { url: string; close(): Promise<void> };
const home = tempDir("parley-cli-home-");
const configFile = join(home.path, "client.json");

/** The CLI with a clean environment: only PATH, a scratch HOME and the test's client config. */
function parley(
  args: string[],
  options: { stdin?: string; env?: NodeJS.ProcessEnv; cwd?: string } = {},
): Promise<CliResult> {
  return runCli(args, {
    stdin: options.stdin,
    ...(options.cwd ? { cwd: options.cwd } : {}),
    env: { PATH: process.env.PATH, HOME: home.path, PARLEY_CLIENT_CONFIG: configFile, ...options.env },
  });
}

beforeAll(async () => {
  server = await startServer({ PARLEY_ECHO_INPUT: "framed" });
  front = await createBridge({
    upstream: server.parley.inProcessTransport(),
    cards: server.parley,
    port: 0,
    logger: createBridgeLogger("silent"),
  });
  const grpcUrl = server.baseUrl;
  writeFileSync(
    configFile,
    JSON.stringify({
      server: server.baseUrl,
      protocol: "grpc",
      peers: {
        bridge: { url: front.url, protocol: "jsonrpc" },
        direct: { url: grpcUrl, protocol: "grpc" },
        echo: { url: grpcUrl, protocol: "connect" },
      },
    }),
  );
});

afterAll(async () => {
  await front.close();
  await server.close();
  home.remove();
});

function doneOf(stdout: string) {
  const lines = stdout
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as Record<string, unknown>);
  return { lines, done: lines.find((l) => l.type === "done") as Record<string, string> };
}

describe("parley send", () => {
  it("streams the default agent's reply to stdout and keeps a thread with --context", async () => {
    const first = await parley(["send", "--json", "hello from the cli"]);
    expect(first.code).toBe(0);
    const { lines, done } = doneOf(first.stdout);
    expect(lines.filter((l) => l.type === "delta").length).toBeGreaterThan(1);
    expect(done.state).toBe("TASK_STATE_COMPLETED");
    expect(done.contextId).toMatch(/^ctx-/);

    const second = await parley(["send", "--context", done.contextId!, "second"]);
    expect(second.code).toBe(0);
    expect(second.stdout).toContain("user: hello from the cli");
    expect(second.stdout.endsWith("second\n")).toBe(true);
    expect(second.stderr).toBe("");

    const third = await parley(["send", "--to", done.contextId!, "third"]);
    expect(third.code).toBe(0);
    expect(third.stdout).toContain("user: second");
  });

  it('reads TEXT from stdin when it is "-"', async () => {
    const result = await parley(["send", "-"], { stdin: "from a pipe\n" });
    expect(result).toMatchObject({ code: 0, stdout: "from a pipe\n" });
  });

  it("reaches a JSON-RPC peer by name and by a2a:NAME, and a gRPC peer, keeping the thread", async () => {
    const first = await parley(["send", "--to", "bridge", "--json", "over json-rpc"]);
    expect(first.code).toBe(0);
    const { done } = doneOf(first.stdout);
    expect(done.text).toBe("over json-rpc");
    const second = await parley(["send", "--to", "a2a:bridge", "--context", done.contextId!, "again"]);
    expect(second.code).toBe(0);
    expect(second.stdout).toContain("user: over json-rpc");
    const direct = await parley(["send", "--to", "direct", "--context", done.contextId!, "via grpc"]);
    expect(direct.stdout).toContain("user: again");
  });

  it("reaches URL targets: http(s) as JSON-RPC, grpc://host:port as gRPC", async () => {
    const [jsonRpc, grpc] = await Promise.all([
      parley(["send", "--to", front.url, "by url"]),
      parley(["send", "--to", server.baseUrl.replace("http://", "grpc://"), "by grpc url"]),
    ]);
    expect(jsonRpc).toMatchObject({ code: 0, stdout: "by url\n" });
    expect(grpc).toMatchObject({ code: 0, stdout: "by grpc url\n" });
  });

  it("an unknown target exits 3 and lists every rule tried and the known targets", async () => {
    const seeded = doneOf((await parley(["send", "--json", "seed a thread"])).stdout).done.contextId!;
    const [result, missingThread] = await Promise.all([
      parley(["send", "--to", "nobody", "hi"]),
      parley(["send", "--to", "ctx-00000000-dead", "hi"]),
    ]);
    expect(result.code).toBe(3);
    expect(result.stderr).toContain('target "nobody" not found');
    expect(result.stderr).toContain("URL: not an http://, https:// or grpc:// URL");
    expect(result.stderr).toContain(`no peer named "nobody" in the client config (${configFile})`);
    expect(result.stderr).toContain('the server hosts no agent named "nobody"');
    expect(result.stderr).toMatch(/a2a:bridge\s+peer/);
    expect(result.stderr).toContain(seeded);

    expect(missingThread.code).toBe(3);
    expect(missingThread.stderr).toContain("no live thread ctx-00000000-dead for this tenant");
  });

  it("an ambiguous name (a peer and a hosted agent) exits 2 and says how to pick one", async () => {
    const [result, agent] = await Promise.all([
      parley(["send", "--to", "echo", "hi"]),
      parley(["send", "--to", "agent:echo", "picked"]),
    ]);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('target "echo" is ambiguous');
    expect(result.stderr).toContain("say a2a:echo");
    expect(result.stderr).toContain("say agent:echo");
    expect(agent).toMatchObject({ code: 0, stdout: "picked\n" });
  });

  it("--list shows configured peers, hosted agents and live threads", async () => {
    const seeded = doneOf((await parley(["send", "--json", "listed"])).stdout).done.contextId!;
    const result = await parley(["send", "--list"]);
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/a2a:bridge\s+peer\s+http:\/\/127\.0\.0\.1:\d+\/ \(jsonrpc\)/);
    expect(result.stdout).toMatch(/^echo\s+agent/m);
    expect(result.stdout).toContain(seeded);
  });

  it("usage errors exit 2 and name what was wrong", async () => {
    const [noText, badOption, badScheme, badConfig] = await Promise.all([
      parley(["send"]),
      parley(["send", "--bogus", "x"]),
      parley(["send", "--to", "ftp://x", "hi"]),
      parley(["send", "hi"], { env: { PARLEY_CLIENT_CONFIG: join(home.path, "absent.json") } }),
    ]);
    expect(noText.code).toBe(2);
    expect(noText.stderr).toContain("send needs TEXT");
    expect(badOption.code).toBe(2);
    expect(badOption.stderr).toContain("unknown option '--bogus'");
    expect(badScheme.code).toBe(2);
    expect(badScheme.stderr).toContain('unsupported URL scheme "ftp://"');
    expect(badConfig.code).toBe(2);
    expect(badConfig.stderr).toContain("cannot read the client config");
  });

  it("--help on every command documents the exit codes", async () => {
    const commands = [["--help"], ["send", "--help"], ["threads", "--help"], ["threads", "show", "--help"]];
    for (const result of await Promise.all(commands.map((args) => parley(args)))) {
      expect(result.code).toBe(0);
      expect(result.stdout).toContain("4  busy or conflict");
    }
  });
});

describe("parley threads", () => {
  it("lists, shows (both orders, limited) and deletes a thread", async () => {
    const { done } = doneOf((await parley(["send", "--json", "one"])).stdout);
    const contextId = done.contextId!;
    await parley(["send", "--context", contextId, "two"]);

    const list = await parley(["threads", "list", "--limit", "100"]);
    expect(list.code).toBe(0);
    expect(list.stdout).toMatch(new RegExp(`^${contextId} +4 {2}\\d{4}-`, "m"));

    const [oldest, newest] = await Promise.all([
      parley(["threads", "show", contextId, "--oldest-first", "--limit", "2"]),
      parley(["threads", "show", contextId, "--limit", "1"]),
    ]);
    expect(oldest.stdout).toMatch(/^\[1\] user: one\n\[2\] agent: one\nnext page token: [A-Za-z0-9_-]+\n$/);
    expect(newest.stdout).toMatch(/^\[4\] agent: /);

    const deleted = await parley(["threads", "delete", contextId]);
    expect(deleted).toMatchObject({ code: 0, stdout: `deleted ${contextId} (4 messages, 2 tasks, 0 sessions)\n` });
    const again = await parley(["threads", "delete", contextId]);
    expect(again.code).toBe(3);
    expect(again.stderr).toContain(`no thread ${contextId}`);
    const gone = await parley(["threads", "show", contextId]);
    expect(gone.code).toBe(3);
    expect(gone.stderr).toContain(contextId);
  });
});

describe("busy thread", () => {
  let slow: TestServer;
  let client: ParleyClient;

  beforeAll(async () => {
    // Slow enough that the task is certainly still running while the CLI's send arrives; it is canceled afterwards.
    slow = await startServer({ PARLEY_ECHO_DELAY_MS: "1500" });
    client = createParleyClient({ baseUrl: slow.baseUrl, protocol: "grpc" });
  });

  afterAll(async () => {
    client.close();
    await slow.close();
  });

  it("a send into a thread with a running task exits 4", async () => {
    const conversation = createConversation(client);
    const running = conversation.stream("take your time")[Symbol.asyncIterator]();
    const first = await running.next();
    expect(first.done).toBe(false);
    const contextId = conversation.contextId!;
    const result = await parley(["send", "--server", slow.baseUrl, "--context", contextId, "me too"]);
    expect(result.code).toBe(4);
    expect(result.stderr).toContain("(Aborted)");
    await client.a2a.cancelTask({ id: conversation.taskId! });
    await running.return?.();
  });
});

describe("- stands for standard input and output wherever a command takes a file", () => {
  it("threads export --out - writes stdout, threads import - reads stdin, and so do export --all and import", async () => {
    const { done } = doneOf((await parley(["send", "--json", "piped through"])).stdout);
    const contextId = done.contextId!;
    const exported = await parley(["threads", "export", contextId, "--out", "-"], { cwd: home.path });
    expect(exported.code, exported.stderr).toBe(0);
    expect(existsSync(join(home.path, "-")), "no file named -").toBe(false);
    const records = exported.stdout.trimEnd().split("\n");
    expect(JSON.parse(records[0]!)).toMatchObject({ header: { format: "parley.thread", contextId } });
    expect(JSON.parse(records.at(-1)!)).toMatchObject({ end: { messageCount: "2" } });

    // The thread goes, and comes back from standard input.
    expect((await parley(["threads", "delete", contextId])).code).toBe(0);
    const imported = await parley(["threads", "import", "-", "--json"], { stdin: exported.stdout });
    expect(imported.code, imported.stderr).toBe(0);
    expect(JSON.parse(imported.stdout)).toMatchObject({ type: "imported", contextId, addedMessages: 2 });
    const shown = await parley(["threads", "show", contextId, "--oldest-first"]);
    expect(shown.stdout).toMatch(/^\[1\] user: piped through\n\[2\] agent: piped through\n$/);

    const tenant = await parley(["export", "--all", "--out", "-"], { cwd: home.path });
    expect(tenant.code, tenant.stderr).toBe(0);
    expect(existsSync(join(home.path, "-"))).toBe(false);
    expect(JSON.parse(tenant.stdout.split("\n")[0]!)).toMatchObject({ format: "parley.tenant" });
    expect(tenant.stdout).toContain(JSON.stringify(contextId));
    // import reads - from standard input too: its errors name it.
    const notTenant = await parley(["import", "-"], { stdin: "[]\n" });
    expect(notTenant.code).toBe(2);
    expect(notTenant.stderr).toMatch(/^parley: standard input:1: /);

    const bad = await parley(["threads", "import", "-"], { stdin: "not a thread file\n" });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/^parley: standard input:1: /);
  });
});
