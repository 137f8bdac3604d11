// ThreadService.ExportThread / ImportThread through a real server: the records and the server's own checks of
// them (the CLI checks files first, so a client that calls the RPC directly meets these), tenants kept apart.
import { clone } from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";
import { Provenance, type ThreadRecord, ThreadRecordSchema } from "@parley/proto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { failure, startTestServer, type TestServer, userMessage } from "./harness.js";

describe("ThreadService export and import", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({ apiKeys: { "key-a": "tenant-a", "key-b": "tenant-b" } });
  });
  afterAll(async () => {
    await server.close();
  });
  const as = (key: string) => ({ authorization: `Bearer ${key}` });

  async function exported(key: string, contextId: string): Promise<ThreadRecord[]> {
    const records: ThreadRecord[] = [];
    for await (const r of server.threads(as(key)).exportThread({ contextId })) records.push(r.record!);
    return records;
  }

  it("streams a header, the messages oldest first, the tasks and an end record; another tenant imports it as its own", async () => {
    const a2a = server.a2a("connect", as("key-a"));
    await a2a.sendMessage({ message: userMessage("one", { contextId: "src" }) });
    await a2a.sendMessage({ message: userMessage("two", { contextId: "src" }) });
    const records = await exported("key-a", "src");
    expect(records.map((r) => r.record.case)).toEqual([
      "header",
      "message",
      "message",
      "message",
      "message",
      "task",
      "task",
      "end",
    ]);
    const messages = records.flatMap((r) => (r.record.case === "message" ? [r.record.value] : []));
    expect(messages.map((m) => [Number(m.sequence), m.provenance])).toEqual([
      [1, Provenance.USER],
      [2, Provenance.AGENT],
      [3, Provenance.USER],
      [4, Provenance.AGENT],
    ]);
    // Tenant b holds none of a's tasks, so the same records import whole there, and once only.
    const b = server.threads(as("key-b"));
    const first = await b.importThread({ records });
    expect(first).toMatchObject({ contextId: "src", addedMessageCount: 4n, addedTaskCount: 2n });
    expect(first.thread?.messageCount).toBe(4n);
    const again = await b.importThread({ records });
    expect(again).toMatchObject({ addedMessageCount: 0n, skippedMessageCount: 4n, skippedTaskCount: 2n });
    const back = await exported("key-b", "src");
    const strip = (rs: ThreadRecord[]) => rs.filter((r) => r.record.case !== "header");
    expect(strip(back)).toEqual(strip(records));
    await expect(failure(exported("key-a", "nothing here"))).resolves.toMatchObject({ code: Code.NotFound });
  });

  it("refuses records it cannot read, naming the record", async () => {
    const records = await exported("key-a", "src");
    const header = records[0]!;
    const threads = server.threads(as("key-b"));
    const refused = async (rs: ThreadRecord[]) => failure(threads.importThread({ contextId: "refused", records: rs }));
    const v2 = clone(ThreadRecordSchema, header);
    if (v2.record.case === "header") v2.record.value.version = 2;
    await expect(refused([v2, ...records.slice(1)])).resolves.toMatchObject({
      code: Code.InvalidArgument,
      rawMessage: expect.stringContaining('record 1: unknown format "parley.thread" version 2'),
    });
    await expect(refused(records.slice(1))).resolves.toMatchObject({
      rawMessage: expect.stringContaining("record 1: the first record must be the header"),
    });
    await expect(refused([header, records[2]!, records[1]!])).resolves.toMatchObject({
      rawMessage: expect.stringContaining("record 3: sequence 1 does not follow 2"),
    });
    await expect(refused([...records.slice(0, 3), records.at(-1)!])).resolves.toMatchObject({
      rawMessage: expect.stringContaining("record 4: the end record counts 4 messages and 2 tasks, but 2 and 0"),
    });
    expect((await threads.listThreads({})).threads.map((t) => t.contextId)).not.toContain("refused");
  });
});
