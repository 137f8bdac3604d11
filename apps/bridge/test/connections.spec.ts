// The JSON-RPC port's timeouts and limits (the same `connections` settings as the h2c port), and the 413 for an
// oversize body delivered as an answer, not a reset: the bridge reads the rest of the body and throws it away
// before answering. Before, Node fetch with an 8 MB body saw ECONNRESET 6 times in 10.

import { randomUUID } from "node:crypto";
import { connect, type Socket } from "node:net";
import { SendMessageRequest } from "@a2a-js/sdk";
import { ClientFactory } from "@a2a-js/sdk/client";
import { defaultConnectionLimits } from "@parley/serving";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { dribble, untilClosed } from "../../../packages/server/test/fixtures/slow-clients.js";
import { rpc, startStack, type TestStack } from "./harness.js";

const connections = {
  ...defaultConnectionLimits,
  headersTimeoutMs: 400,
  bodyTimeoutMs: 600,
  http1IdleTimeoutMs: 300,
};
/** Well below every default, so a close before it is the configured timeout's doing. */
const soonMs = 4_000;

function sendBody(text: string): string {
  return rpc("SendMessage", {
    message: { messageId: randomUUID(), role: "ROLE_USER", parts: [{ text }] },
  });
}

/**
 * Sends the whole body before reading anything, as a client that writes and then reads does: a server that
 * answers early and closes with the body unread resets the connection, and the client never sees its answer.
 */
function sendThenRead(port: number, body: Buffer): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect({ host: "127.0.0.1", port });
    socket.pause();
    const chunks: Buffer[] = [];
    let failure = "";
    socket.on("data", (chunk: Buffer) => chunks.push(chunk));
    socket.on("error", (error: NodeJS.ErrnoException) => {
      failure = error.code ?? String(error);
    });
    socket.on("close", () => {
      const text = Buffer.concat(chunks).toString("latin1");
      resolve(text.startsWith("HTTP/1.1 413 ") ? "413" : `lost (${failure || "closed"}, ${text.length} bytes)`);
    });
    socket.on("connect", () => {
      socket.write(
        `POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nA2A-Version: 1.0\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n`,
      );
      socket.write(body, () => socket.resume());
    });
  });
}

describe("an oversize JSON-RPC body", () => {
  let stack: TestStack;
  beforeAll(async () => {
    stack = await startStack();
  });
  afterAll(() => stack.close());

  it("is answered 413 naming the limit, to fetch with an 8 MB body 10 times in 10", async () => {
    const body = sendBody("x".repeat(8 * 1024 * 1024));
    const outcomes: string[] = [];
    let last: { error: { code: number; message: string; data: unknown[] } } | undefined;
    for (let i = 0; i < 10; i++) {
      try {
        const res = await fetch(stack.bridge.url, {
          method: "POST",
          headers: { "content-type": "application/json", "a2a-version": "1.0" },
          body,
        });
        last = (await res.json()) as typeof last;
        outcomes.push(String(res.status));
      } catch (error) {
        const cause = (error as { cause?: { code?: string } }).cause;
        outcomes.push(`failed: ${cause?.code ?? String(error)}`);
      }
    }
    expect(outcomes).toEqual(Array(10).fill("413"));
    expect(last?.error.code).toBe(-32600);
    expect(last?.error.message).toMatch(/request body too large: \d+ bytes, the limit is 1048576 bytes/);
    expect(JSON.stringify(last?.error.data)).toContain('"limit":"maxBodyBytes"');
  });

  it("is answered 413 to a client that sends its whole 8 MB body before it reads, 10 times in 10", async () => {
    // Before, this client got a reset and no answer 10 times in 10.
    const body = Buffer.from(sendBody("x".repeat(8 * 1024 * 1024)));
    const outcomes: string[] = [];
    for (let i = 0; i < 10; i++) outcomes.push(await sendThenRead(stack.bridge.port, body));
    expect(outcomes).toEqual(Array(10).fill("413"));
  });

  it("keeps the connection after a 413 whose body was read to its end", async () => {
    const closed = await untilClosed(stack.bridge.port, (s: Socket) => {
      const body = Buffer.from(sendBody("y".repeat(2 * 1024 * 1024)));
      s.write(
        `POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nA2A-Version: 1.0\r\nContent-Length: ${body.length}\r\n\r\n`,
      );
      s.write(body);
      let seen = "";
      s.on("data", (chunk: Buffer) => {
        seen += chunk.toString("latin1");
        // The 413 arrived on a connection that stays open: a second request on it is answered too.
        if (seen.includes("HTTP/1.1 413") && !seen.includes("/healthz-seen")) {
          seen += "/healthz-seen";
          s.write("GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        }
      });
    });
    const text = closed.received.toString("latin1");
    expect(text).toMatch(/^HTTP\/1\.1 413 /);
    expect(text).toContain("HTTP/1.1 200 OK");
  });

  it("gets the official @a2a-js/sdk client a clear error with a 4 MB text, not a socket reset", async () => {
    const client = await new ClientFactory().createFromUrl(stack.bridge.url);
    for (let i = 0; i < 5; i++) {
      const error = await client
        .sendMessage(
          SendMessageRequest.fromJSON({
            message: { messageId: randomUUID(), role: "ROLE_USER", parts: [{ text: "z".repeat(4 * 1024 * 1024) }] },
          }),
        )
        .then(
          () => new Error("the 4 MB message was accepted"),
          (e: unknown) => e as Error,
        );
      expect(String(error.message)).toMatch(/413|too large/i);
      expect(String(error.message)).not.toMatch(/ECONNRESET|fetch failed|socket/i);
    }
  });
});

describe("the bound on what is thrown away", () => {
  it("closes the connection once more than maxDiscardBytes past the limit came, without reading the rest", async () => {
    const stack = await startStack({}, { connections: { ...defaultConnectionLimits, maxDiscardBytes: 1024 * 1024 } });
    try {
      const total = 256 * 1024 * 1024;
      let written = 0;
      const closed = await untilClosed(stack.bridge.port, (s) => {
        s.write(
          `POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nA2A-Version: 1.0\r\nContent-Length: ${total}\r\n\r\n`,
        );
        const chunk = Buffer.alloc(64 * 1024, 0x20);
        const pump = () => {
          while (!s.destroyed && written < total) {
            written += chunk.length;
            if (!s.write(chunk)) {
              s.once("drain", pump);
              return;
            }
          }
        };
        pump();
      });
      // The server stopped reading long before the 256 MB were sent (what it took is bounded by socket buffers).
      expect(written).toBeLessThan(total / 4);
      const text = closed.received.toString("latin1");
      if (text.length > 0) expect(text).toMatch(/^HTTP\/1\.1 413 /);
    } finally {
      await stack.close();
    }
  });
});

describe("timeouts on the JSON-RPC port", () => {
  let stack: TestStack;
  beforeAll(async () => {
    stack = await startStack({}, { connections });
  });
  afterAll(() => stack.close());

  it("closes a TCP connection that sends nothing within headersTimeoutMs", async () => {
    const closed = await untilClosed(stack.bridge.port);
    expect(closed.afterMs).toBeGreaterThanOrEqual(connections.headersTimeoutMs - 50);
    expect(closed.afterMs).toBeLessThan(soonMs);
  });

  it("closes a connection whose headers come a byte at a time, with 408", async () => {
    const closed = await untilClosed(stack.bridge.port, (s) =>
      dribble(s, "POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-Padding: aaaaaaaaaaaa\r\n", 50),
    );
    expect(closed.received.toString("latin1")).toMatch(/^HTTP\/1\.1 408 /);
    expect(closed.afterMs).toBeLessThan(soonMs);
  });

  it("answers a body at 10 bytes/s with a JSON-RPC 408 naming bodyTimeoutMs, and closes", async () => {
    const body = sendBody("slow");
    const closed = await untilClosed(stack.bridge.port, (s) => {
      s.write(
        `POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nA2A-Version: 1.0\r\nContent-Length: ${body.length}\r\n\r\n`,
      );
      dribble(s, body, 100);
    });
    const text = closed.received.toString("latin1");
    expect(text).toMatch(/^HTTP\/1\.1 408 /);
    const json = JSON.parse(text.slice(text.indexOf("\r\n\r\n") + 4)) as { error: { code: number; message: string } };
    expect(json.error.code).toBe(-32600);
    expect(json.error.message).toMatch(/did not arrive within 600 ms \(connections\.bodyTimeoutMs\)/);
    expect(closed.afterMs).toBeLessThan(soonMs);
  });

  it("closes an idle keep-alive connection after http1IdleTimeoutMs (plus Node's second)", async () => {
    const closed = await untilClosed(stack.bridge.port, (s) =>
      s.write("GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n\r\n"),
    );
    expect(closed.received.toString("latin1")).toMatch(/^HTTP\/1\.1 200 /);
    expect(closed.afterMs).toBeGreaterThanOrEqual(connections.http1IdleTimeoutMs - 50);
    expect(closed.afterMs).toBeLessThan(soonMs);
  });
});

describe("maxConnections on the JSON-RPC port", () => {
  it("closes connections past the limit as they arrive", async () => {
    const stack = await startStack(
      {},
      { connections: { ...connections, maxConnections: 2, headersTimeoutMs: 10_000 } },
    );
    const held: Socket[] = [];
    const pending: Promise<unknown>[] = [];
    try {
      for (let i = 0; i < 2; i++) pending.push(untilClosed(stack.bridge.port, (s) => held.push(s)).catch(() => {}));
      while (held.length < 2) await new Promise((r) => setTimeout(r, 20));
      await new Promise((r) => setTimeout(r, 200));
      const refused = await untilClosed(stack.bridge.port);
      expect(refused.received.length).toBe(0);
      expect(refused.afterMs).toBeLessThan(soonMs);
      expect(held.every((s) => !s.destroyed)).toBe(true);
    } finally {
      for (const s of held) s.destroy();
      await Promise.all(pending);
      await stack.close();
    }
  });
});
