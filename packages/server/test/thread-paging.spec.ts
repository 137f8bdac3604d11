// ThreadService page sizes: up to the documented maximum a page comes with a token for the rest; above it the
// request is refused with the maximum named, never answered with a silently shorter page.
import { Code } from "@connectrpc/connect";
import { HistoryOrder } from "@parley/proto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { failure, startTestServer, type TestServer } from "./harness.js";

let server: TestServer;
const key = { tenant: "default", contextId: "paged" };

beforeAll(async () => {
  server = await startTestServer();
  for (let n = 1; n <= 520; n++) {
    await server.parley.store.append(key, { messageId: `m${n}`, provenance: "user", payload: new Uint8Array() });
  }
}, 60_000);
afterAll(() => server.close());

describe("ThreadService page sizes", () => {
  it("GetThreadHistory: 500 messages and a token at most; 501 is refused naming the maximum", async () => {
    const threads = server.threads();
    const page = await threads.getThreadHistory({
      contextId: "paged",
      pageSize: 500,
      order: HistoryOrder.OLDEST_FIRST,
    });
    expect(page.messages).toHaveLength(500);
    expect(page.nextPageToken).not.toBe("");
    const rest = await threads.getThreadHistory({
      contextId: "paged",
      pageSize: 500,
      order: HistoryOrder.OLDEST_FIRST,
      pageToken: page.nextPageToken,
    });
    expect(rest.messages.map((m) => Number(m.sequence))).toEqual(Array.from({ length: 20 }, (_, i) => 501 + i));
    expect(rest.nextPageToken).toBe("");
    const refused = await failure(threads.getThreadHistory({ contextId: "paged", pageSize: 501 }));
    expect(refused.code).toBe(Code.InvalidArgument);
    expect(refused.rawMessage).toBe(
      "GetThreadHistory page_size must be between 1 and 500 (the server's maximum page size; 0 = 50), got 501: ask for at most 500 and follow next_page_token",
    );
  });

  it("ListThreads: 101 is refused naming the maximum of 100", async () => {
    const refused = await failure(server.threads().listThreads({ pageSize: 101 }));
    expect(refused.code).toBe(Code.InvalidArgument);
    expect(refused.rawMessage).toContain("ListThreads page_size must be between 1 and 100");
    expect((await server.threads().listThreads({ pageSize: 100 })).threads.map((t) => t.contextId)).toEqual(["paged"]);
  });
});
