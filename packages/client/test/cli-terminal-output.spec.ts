// Ids and texts are chosen by any caller of a tenant: the CLI's human output shows their control and invisible
// characters as escapes (and quotes ids that are not plain), while --json keeps them exact.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createConversation, createParleyClient, type ParleyClient } from "../src/index.js";
import { type CliResult, runCli, startServer, type TestServer, tempDir } from "./harness.js";

const home = tempDir("parley-cli-terminal-home-");
let server: TestServer;
let client: ParleyClient;

/** ANSI colour, an OSC window title ended by BEL. */
const ansiId = "qa-\u001b[31mRED\u001b[0m-\u001b]0;TITLE\u0007";
const nulId = "nul-\u0000-id";
const blankId = " ";
/** A right-to-left override and a C1 CSI (U+009B), which some terminals act on as ESC [. */
const bidiId = "bidi-\u202egnp.exe-\u009b2J";
const hostileText = "say \u001b[2J\u001b]0;owned\u0007 and \u0000 and \r overwritten";

function parley(args: string[]): Promise<CliResult> {
  return runCli(["--server", server.baseUrl, ...args], { env: { PATH: process.env.PATH, HOME: home.path } });
}

/** What a terminal must never be sent: any control character but newline. */
function expectNoControls(output: string) {
  expect(output.replace(/\n/g, "")).not.toMatch(/[\p{Cc}\p{Cf}]/u);
}

beforeAll(async () => {
  server = await startServer({ PARLEY_ECHO_INPUT: "text" });
  client = createParleyClient({ baseUrl: server.baseUrl });
  for (const contextId of [ansiId, nulId, blankId, bidiId]) {
    await createConversation(client, { contextId }).send(hostileText);
  }
});

afterAll(async () => {
  client.close();
  await server.close();
  home.remove();
});

describe("the CLI's human output", () => {
  it("threads list quotes and escapes ids that are not plain; --json keeps them exact", async () => {
    const [text, json] = await Promise.all([parley(["threads", "list"]), parley(["threads", "list", "--json"])]);
    expect(text.code, text.stderr).toBe(0);
    expectNoControls(text.stdout);
    const names = text.stdout
      .trimEnd()
      .split("\n")
      .slice(1)
      .map((line) => line.split(/ {2,}\d+ {2}/)[0]);
    expect(names.sort()).toEqual(
      [
        String.raw`"qa-\u001b[31mRED\u001b[0m-\u001b]0;TITLE\u0007"`,
        String.raw`"nul-\u0000-id"`,
        '" "',
        String.raw`"bidi-\u202egnp.exe-\u009b2J"`,
      ].sort(),
    );
    // The quoted form is JSON: it reads back as the exact id.
    expect(names.map((n) => JSON.parse(n!)).sort()).toEqual([ansiId, nulId, blankId, bidiId].sort());
    expect(json.code).toBe(0);
    const ids = json.stdout
      .trimEnd()
      .split("\n")
      .map((line) => (JSON.parse(line) as { contextId: string }).contextId);
    expect(ids.sort()).toEqual([ansiId, nulId, blankId, bidiId].sort());
  });

  it("threads show escapes message texts, keeping their newlines; --json keeps the text exact", async () => {
    const [text, json] = await Promise.all([
      parley(["threads", "show", ansiId, "--oldest-first"]),
      parley(["threads", "show", ansiId, "--oldest-first", "--json"]),
    ]);
    expect(text.code, text.stderr).toBe(0);
    expectNoControls(text.stdout);
    const shown = String.raw`say \u001b[2J\u001b]0;owned\u0007 and \u0000 and \r overwritten`;
    expect(text.stdout).toBe(`[1] user: ${shown}\n[2] agent: ${shown}\n`);
    expect(
      json.stdout
        .trimEnd()
        .split("\n")
        .map((l) => (JSON.parse(l) as { text: string }).text),
    ).toEqual([hostileText, hostileText]);
  });

  it("send streams the reply escaped and names the thread escaped; --json is exact", async () => {
    const reply = "colour \u001b[31mred\u001b[0m, title \u001b]0;x\u0007";
    const [text, json] = await Promise.all([
      parley(["send", "--context", ansiId, reply]),
      parley(["send", "--context", bidiId, "--json", reply]),
    ]);
    expect(text.code, text.stderr).toBe(0);
    expectNoControls(text.stdout);
    expect(text.stdout).toBe(`${String.raw`colour \u001b[31mred\u001b[0m, title \u001b]0;x\u0007`}\n`);
    const done = json.stdout
      .trimEnd()
      .split("\n")
      .map((l) => JSON.parse(l) as { type: string; text: string; contextId: string })
      .find((l) => l.type === "done");
    expect(done).toMatchObject({ text: reply, contextId: bidiId });
  });

  it("send --list and error lines show ids escaped", async () => {
    const list = await parley(["send", "--list"]);
    expect(list.code, list.stderr).toBe(0);
    expectNoControls(list.stdout);
    expect(list.stdout).toContain(String.raw`"thread:qa-\u001b[31mRED\u001b[0m-\u001b]0;TITLE\u0007"`);
    expect(list.stdout).toMatch(/^"thread: " +thread/m);

    const missing = `${ansiId}-gone`;
    const [deleted, show] = await Promise.all([
      parley(["threads", "delete", missing]),
      // The server quotes the id in its message as JSON, which leaves C1 and format characters as they are.
      parley(["threads", "show", "nope-\u009b2J-\u202e"]),
    ]);
    expect(deleted.code).toBe(3);
    expectNoControls(deleted.stderr);
    expect(deleted.stderr).toBe(
      `${String.raw`parley: no thread "qa-\u001b[31mRED\u001b[0m-\u001b]0;TITLE\u0007-gone" for this tenant`}\n`,
    );
    expect(show.code).toBe(3);
    expectNoControls(show.stderr);
    expect(show.stderr).toContain(String.raw`nope-\u009b2J-\u202e`);
  });
});
