// `parley --protocol rest`, and the library's HTTP+JSON client, against a real bridge on loopback: sends, streams
// and GetTask go over A2A's HTTP+JSON binding (/message:send, /message:stream, /tasks/{id}), never JSON-RPC.
import { writeFileSync } from "node:fs";
import type { IncomingMessage } from "node:http";
import { join } from "node:path";
import { Code, ConnectError } from "@connectrpc/connect";
import { createBridge, createBridgeLogger } from "@parley/bridge";
import { TaskState } from "@parley/proto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createRestA2AClient } from "../src/rest-client.js";
import { type CliResult, runCli, startServer, type TestServer, tempDir } from "./harness.js";

let server: TestServer;
let bridge: { url: string; server: import("node:http").Server; close(): Promise<void> };
const home = tempDir("parley-cli-rest-home-");
/** Method and path of every request the bridge received. */
const seen: string[] = [];

function parley(args: string[], env: NodeJS.ProcessEnv = {}): Promise<CliResult> {
  return runCli(args, { env: { PATH: process.env.PATH, HOME: home.path, ...env } });
}

beforeAll(async () => {
  server = await startServer();
  bridge = await createBridge({
    upstream: server.parley.inProcessTransport(),
    cards: server.parley,
    port: 0,
    logger: createBridgeLogger("silent"),
  });
  bridge.server.prependListener("request", (req: IncomingMessage) => seen.push(`${req.method} ${req.url}`));
});

afterAll(async () => {
  await bridge?.close();
  await server?.close();
  home.remove();
});

describe("parley --protocol rest", () => {
  it("sends and streams to the server's bridge port over HTTP+JSON, turn after turn on one thread", async () => {
    seen.length = 0;
    const first = await parley(["--server", bridge.url, "--protocol", "rest", "send", "--context", "rest-cli", "hi"]);
    expect(first, first.stderr).toMatchObject({ code: 0, stdout: "hi\n" });
    const second = await parley([
      "--server",
      bridge.url,
      "--protocol",
      "rest",
      "send",
      "--json",
      "--context",
      "rest-cli",
      "again",
    ]);
    expect(second.code, second.stderr).toBe(0);
    const done = second.stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { type: string; contextId?: string; text?: string })
      .find((l) => l.type === "done");
    expect(done?.contextId).toBe("rest-cli");
    // The echo agent says what reached it: the first turn came with the second.
    expect(done?.text).toContain('turn 2 of thread "rest-cli"');
    expect(done?.text).toContain("2 earlier messages arrived with it (1 from user, 1 from agent)");
    expect(seen).toEqual(["POST /message:stream", "POST /message:stream"]);
  });

  it("sends to a URL target over HTTP+JSON, and names the binding's error", async () => {
    seen.length = 0;
    const sent = await parley(["--protocol", "rest", "send", "--to", bridge.url, "url target"]);
    expect(sent, sent.stderr).toMatchObject({ code: 0, stdout: "url target\n" });
    expect(seen).toEqual(["POST /message:stream"]);

    const missing = await parley(["--protocol", "rest", "send", "--to", `${bridge.url}agents/nope`, "x"]);
    expect(missing.code).not.toBe(0);
    expect(missing.stderr).toContain('no agent named "nope"');
  });

  it("takes a configured peer of protocol rest", async () => {
    const config = join(home.path, "rest-peer.json");
    writeFileSync(config, JSON.stringify({ peers: { bridged: { url: bridge.url, protocol: "rest" } } }));
    seen.length = 0;
    const sent = await parley(["send", "--to", "a2a:bridged", "via a peer"], { PARLEY_CLIENT_CONFIG: config });
    expect(sent, sent.stderr).toMatchObject({ code: 0, stdout: "via a peer\n" });
    expect(seen).toEqual(["POST /message:stream"]);
  });
});

describe("createRestA2AClient", () => {
  it("sends, streams and gets a task, and turns a google.rpc.Status into a ConnectError", async () => {
    const client = createRestA2AClient({ url: bridge.url });
    const sent = await client.sendMessage({
      message: { messageId: crypto.randomUUID(), role: 1, parts: [{ content: { case: "text", value: "blocking" } }] },
    });
    expect(sent.payload.case).toBe("task");
    const task = sent.payload.case === "task" ? sent.payload.value : undefined;
    expect(task?.status?.state).toBe(TaskState.COMPLETED);

    const events = [];
    for await (const event of client.sendStreamingMessage({
      message: {
        messageId: crypto.randomUUID(),
        role: 1,
        contextId: task!.contextId,
        parts: [{ content: { case: "text", value: "streamed" } }],
      },
    })) {
      events.push(event);
    }
    expect(events[0]?.payload.case).toBe("task");
    expect(events.at(-1)?.payload.case).toBe("statusUpdate");

    const fetched = await client.getTask({ id: task!.id, historyLength: 1 });
    expect(fetched.id).toBe(task!.id);
    expect(fetched.history).toHaveLength(1);

    const error = await client.getTask({ id: "no-such-task" }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConnectError);
    expect((error as ConnectError).code).toBe(Code.NotFound);
    expect((error as ConnectError).rawMessage).toContain("HTTP 404 TASK_NOT_FOUND");
  });
});
