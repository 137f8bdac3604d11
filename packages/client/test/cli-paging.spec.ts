// `parley threads list|show` follow page tokens: --limit, --page-token and --all against a real server and the real CLI.
import { create, toBinary } from "@bufbuild/protobuf";
import { MessageSchema, Role } from "@parley/proto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type CliResult, runCli, startServer, type TestServer, tempDir } from "./harness.js";

const tenant = "pager";
const home = tempDir("parley-cli-paging-home-");
let server: TestServer;

function parley(args: string[]): Promise<CliResult> {
  return runCli(["--server", server.baseUrl, "--token", "pager-key", ...args], {
    env: { PATH: process.env.PATH, HOME: home.path },
  });
}

function payload(text: string, n: number) {
  return toBinary(
    MessageSchema,
    create(MessageSchema, {
      messageId: `m-${n}`,
      role: n % 2 === 1 ? Role.USER : Role.AGENT,
      parts: [{ content: { case: "text", value: text } }],
    }),
  );
}

/** Stores `count` messages in a thread of the pager tenant through the server's own store. */
async function fill(contextId: string, count: number) {
  for (let n = 1; n <= count; n++) {
    await server.parley.store.append(
      { tenant, contextId },
      { messageId: `m-${n}`, provenance: n % 2 === 1 ? "user" : "agent", payload: payload(`message ${n}`, n) },
    );
  }
}

const lines = (stdout: string) => stdout.trimEnd().split("\n");
const tokenOf = (stdout: string) => /^next page token: ([A-Za-z0-9_-]+)$/m.exec(stdout)?.[1];

beforeAll(async () => {
  server = await startServer({ PARLEY_API_KEYS: "pager-key=pager" });
  // Five threads, "t5" the most recently updated; "long" holds more than one page of the largest size (500).
  await fill("long", 1203);
  for (let i = 1; i <= 5; i++) {
    // Distinct update times, so the listing order (newest first) is the fill order reversed.
    await new Promise((resolve) => setTimeout(resolve, 3));
    await fill(`t${i}`, 1);
  }
}, 120_000);

afterAll(async () => {
  await server.close();
  home.remove();
});

describe("parley threads list paging", () => {
  it("--limit 2 prints a token, --page-token continues, --all lists every thread", async () => {
    const first = await parley(["threads", "list", "--limit", "2"]);
    expect(first.code).toBe(0);
    expect(lines(first.stdout).map((l) => l.split(" ")[0])).toEqual([
      "CONTEXT",
      "t5",
      "t4",
      expect.stringMatching(/^next/),
    ]);
    const token = tokenOf(first.stdout);
    expect(token).toBeDefined();

    const second = await parley(["threads", "list", "--limit", "2", "--page-token", token!]);
    expect(second.code).toBe(0);
    expect(
      lines(second.stdout)
        .slice(1, 3)
        .map((l) => l.split(" ")[0]),
    ).toEqual(["t3", "t2"]);

    const rest = await parley(["threads", "list", "--page-token", tokenOf(second.stdout)!]);
    expect(lines(rest.stdout).map((l) => l.split(" ")[0])).toEqual(["CONTEXT", "t1", "long"]);
    expect(tokenOf(rest.stdout)).toBeUndefined();

    const all = await parley(["threads", "list", "--all", "--json"]);
    expect(all.code).toBe(0);
    const rows = lines(all.stdout).map((l) => JSON.parse(l) as { contextId?: string; nextPageToken?: string });
    expect(rows.map((r) => r.contextId)).toEqual(["t5", "t4", "t3", "t2", "t1", "long"]);

    // The JSON form carries the token as a last line of its own.
    const json = await parley(["threads", "list", "--limit", "5", "--json"]);
    const last = JSON.parse(lines(json.stdout).at(-1)!) as { nextPageToken?: string };
    expect(last.nextPageToken).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(lines(json.stdout)).toHaveLength(6);
  });

  it("prints one table: a header, ids padded, counts right-aligned, times in one column", async () => {
    const all = await parley(["threads", "list", "--all"]);
    expect(all.code, all.stderr).toBe(0);
    const rows = lines(all.stdout);
    expect(rows[0]).toMatch(/^CONTEXT ID +MESSAGES {2}UPDATED$/);
    const countEnd = rows[0]!.indexOf("MESSAGES") + "MESSAGES".length;
    const timeAt = rows[0]!.indexOf("UPDATED");
    expect(rows.slice(1).map((r) => r.split(/ +/).slice(0, 2))).toEqual([
      ["t5", "1"],
      ["t4", "1"],
      ["t3", "1"],
      ["t2", "1"],
      ["t1", "1"],
      ["long", "1203"],
    ]);
    for (const row of rows.slice(1)) {
      expect(row.slice(0, countEnd), row).toMatch(/\d$/);
      expect(row.slice(timeAt), row).toMatch(/^\d{4}-\d\d-\d\dT[\d:.]+Z$/);
    }
  });

  it("more than the server's page maximum is fetched page by page, not cut off", async () => {
    const many = await parley(["threads", "list", "--limit", "250"]);
    expect(many.code).toBe(0);
    expect(lines(many.stdout)).toHaveLength(7);
  });

  it("refuses a foreign token and conflicting flags as usage errors", async () => {
    const history = await parley(["threads", "show", "long", "--limit", "1"]);
    const foreign = await parley(["threads", "list", "--page-token", tokenOf(history.stdout)!]);
    expect(foreign.code).toBe(2);
    expect(foreign.stderr).toContain("--page-token");
    expect(foreign.stderr).toContain("listThreads cursor");
    const both = await parley(["threads", "list", "--all", "--limit", "3"]);
    expect(both.code).toBe(2);
    expect(both.stderr).toContain("--all and --limit exclude each other");
    const zero = await parley(["threads", "list", "--limit", "0"]);
    expect(zero.code).toBe(2);
  });
});

describe("parley threads show paging", () => {
  it("--limit 2 then --page-token in both orders, and --all shows all 1203 messages", async () => {
    const newest = await parley(["threads", "show", "long", "--limit", "2"]);
    expect(newest.code).toBe(0);
    expect(lines(newest.stdout).slice(0, 2)).toEqual(["[1203] user: message 1203", "[1202] agent: message 1202"]);
    const next = await parley(["threads", "show", "long", "--limit", "2", "--page-token", tokenOf(newest.stdout)!]);
    expect(lines(next.stdout).slice(0, 2)).toEqual(["[1201] user: message 1201", "[1200] agent: message 1200"]);

    // A newest-first token does not continue an oldest-first listing.
    const wrongOrder = await parley([
      "threads",
      "show",
      "long",
      "--oldest-first",
      "--page-token",
      tokenOf(newest.stdout)!,
    ]);
    expect(wrongOrder.code).toBe(2);
    expect(wrongOrder.stderr).toContain("different query");

    const all = await parley(["threads", "show", "long", "--oldest-first", "--all", "--json"]);
    expect(all.code).toBe(0);
    const rows = lines(all.stdout).map((l) => JSON.parse(l) as { sequence: number; nextPageToken?: string });
    expect(rows).toHaveLength(1203);
    expect(rows.map((r) => r.sequence)).toEqual(Array.from({ length: 1203 }, (_, i) => i + 1));

    // 600 > the 500 maximum page: two requests, one listing, then the token of what is left.
    const six = await parley(["threads", "show", "long", "--oldest-first", "--limit", "600"]);
    const sixLines = lines(six.stdout);
    expect(sixLines).toHaveLength(601);
    expect(sixLines[599]).toBe("[600] agent: message 600");
    const after = await parley([
      "threads",
      "show",
      "long",
      "--oldest-first",
      "--limit",
      "1",
      "--page-token",
      tokenOf(six.stdout)!,
    ]);
    expect(lines(after.stdout)[0]).toBe("[601] user: message 601");
  });
});
