// `parley sessions list|show` run as child processes against a real server (a spawned parley-server on LevelDB)
// that hosts scripted agents: aligned columns, --json, filters, paging, not found.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type CliResult, runCli, startServer, type TestServer, tempDir } from "./harness.js";

const scratch = tempDir("parley-sessions-");
let server: TestServer;
const ids: string[] = [];

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
        { name: "alice", type: "script", options: { replies: ["thanks", "REPLY_SKIP"] } },
        { name: "bob", type: "script", options: { replies: ["bob answers", "ANNOUNCE_SKIP"] } },
        { name: "carol-the-long-named", type: "script", options: { replies: ["carol answers", "ANNOUNCE_SKIP"] } },
      ],
    }),
  );
  server = await startServer({}, ["--config", serverConfig]);
  for (const [i, to] of ["bob", "carol-the-long-named", "bob"].entries()) {
    const result = await parley(["converse", "--json", "--from", `alice/a-${i}`, "--to", `${to}/t-${i}`, "hello"]);
    expect(result.code).toBe(0);
    ids.unshift(JSON.parse(result.stdout.split("\n")[0]!).conversationId);
  }
}, 120_000);

afterAll(async () => {
  await server.close();
  scratch.remove();
});

describe("parley sessions", () => {
  it("lists sessions newest first in aligned columns", async () => {
    const { code, stdout, stderr } = await parley(["sessions", "list"]);
    expect(stderr).toBe("");
    expect(code).toBe(0);
    const lines = stdout.trimEnd().split("\n");
    expect(lines).toHaveLength(4);
    expect(lines[0]).toMatch(/^ID\s+STATE\s+UPDATED\s+STEPS\s+STOP\s+REQUESTER -> TARGET$/);
    expect(lines.slice(1).map((l) => l.split(/\s+/)[0])).toEqual(ids);
    // Every column starts at the same offset on every line.
    for (const title of ["STATE", "UPDATED", "STOP", "REQUESTER"]) {
      const at = lines[0]!.indexOf(title);
      for (const line of lines.slice(1)) expect(line[at - 1]).toBe(" ");
      for (const line of lines.slice(1)) expect(line[at]).not.toBe(" ");
    }
    expect(lines[2]).toMatch(/ done {4}/);
    expect(lines[2]).toContain("silence");
    expect(lines[2]).toContain("alice/a-1 -> carol-the-long-named/t-1");
  });

  it("filters by agent and state, pages with --limit, and prints --json", async () => {
    const carol = await parley(["sessions", "list", "--agent", "carol-the-long-named", "--json"]);
    expect(carol.code).toBe(0);
    const rows = carol.stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(rows.map((r) => r.conversationId)).toEqual([ids[1]]);
    expect(rows[0]).toMatchObject({ state: "CONVERSATION_STATE_DONE", targetAgent: "carol-the-long-named" });
    const running = await parley(["sessions", "list", "--state", "running"]);
    expect(running.stdout).toBe("no sessions\n");
    const first = await parley(["sessions", "list", "--limit", "1", "--json"]);
    const [one, next] = first.stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(one.conversationId).toBe(ids[0]);
    const rest = await parley(["sessions", "list", "--page-token", next.nextPageToken, "--json"]);
    expect(
      rest.stdout
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l).conversationId),
    ).toEqual(ids.slice(1));
    const bad = await parley(["sessions", "list", "--state", "sleeping"]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/running or done/);
  });

  it("shows a session's steps, and answers a missing one with exit code 3", async () => {
    const shown = await parley(["sessions", "show", ids[2]!]);
    expect(shown.code).toBe(0);
    const lines = shown.stdout.trim().split("\n");
    expect(lines[0]).toMatch(/^\[accepted\] /);
    expect(lines).toContain("[round one] target: bob answers");
    expect(shown.stdout).toMatch(/\[done\] SILENCE: /);
    expect(lines[lines.length - 1]).toBe("(done)");
    const json = await parley(["sessions", "show", "--json", ids[2]!]);
    expect(JSON.parse(json.stdout.split("\n")[0]!).conversationId).toBe(ids[2]);
    const missing = await parley(["sessions", "show", "conv-missing"]);
    expect(missing.code).toBe(3);
    expect(missing.stderr).toMatch(/no session "?conv-missing"? for this tenant/);
  });
});
