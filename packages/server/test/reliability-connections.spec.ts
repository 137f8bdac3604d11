// Idle, slow and greedy clients on the h2c port (gRPC, Connect, gRPC-Web over HTTP/2 and HTTP/1.1): each is
// closed within the short timeouts set here (the defaults are 5 s to 120 s; before, such connections stayed
// open for more than 100 s), and the connection limits hold.

import * as http2 from "node:http2";
import type { Socket } from "node:net";
import { performance } from "node:perf_hooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { dribble, frameType, http2Frame, http2FrameTypes, http2Preface, untilClosed } from "./fixtures/slow-clients.js";
import { startTestServer, type TestServer } from "./harness.js";

const limits = {
  headersTimeoutMs: 400,
  bodyTimeoutMs: 600,
  http1IdleTimeoutMs: 300,
  http2IdleTimeoutMs: 500,
  maxConcurrentStreams: 7,
};
/** Well below every default, so a close before it is the configured timeout's doing. */
const soonMs = 4_000;

function portOf(server: TestServer): number {
  return Number(server.address.slice(server.address.lastIndexOf(":") + 1));
}

/** A gRPC request head for SendMessage. */
const grpcHead = {
  ":method": "POST",
  ":path": "/lf.a2a.v1.A2AService/SendMessage",
  "content-type": "application/grpc",
  te: "trailers",
};

describe("timeouts on the h2c port", () => {
  let server: TestServer;
  let port: number;
  beforeAll(async () => {
    server = await startTestServer({ connections: limits });
    port = portOf(server);
  });
  afterAll(() => server.close());

  it("closes a TCP connection that sends nothing within headersTimeoutMs", async () => {
    const closed = await untilClosed(port);
    expect(closed.afterMs).toBeGreaterThanOrEqual(limits.headersTimeoutMs - 50);
    expect(closed.afterMs).toBeLessThan(soonMs);
  });

  it("closes a connection that sends half of the HTTP/2 preface", async () => {
    const closed = await untilClosed(port, (s) => s.write(http2Preface.subarray(0, 10)));
    expect(closed.afterMs).toBeLessThan(soonMs);
    expect(closed.received.length).toBe(0);
  });

  it("closes an HTTP/2 connection that sends the preface but never its SETTINGS", async () => {
    const closed = await untilClosed(port, (s) => s.write(http2Preface));
    expect(closed.afterMs).toBeGreaterThanOrEqual(limits.headersTimeoutMs - 50);
    expect(closed.afterMs).toBeLessThan(soonMs);
  });

  it("sends GOAWAY to an HTTP/2 session that never opens a stream, after http2IdleTimeoutMs", async () => {
    const closed = await untilClosed(port, (s) =>
      s.write(Buffer.concat([http2Preface, http2Frame(frameType.settings, 0, 0)])),
    );
    expect(http2FrameTypes(closed.received)).toContain(frameType.goaway);
    expect(closed.afterMs).toBeGreaterThanOrEqual(limits.http2IdleTimeoutMs - 50);
    expect(closed.afterMs).toBeLessThan(soonMs);
  });

  it("closes an HTTP/2 session whose first stream's headers never end", async () => {
    // HEADERS without END_HEADERS (":method: GET", HPACK index 2), and no CONTINUATION ever.
    const headers = http2Frame(frameType.headers, 0, 1, Buffer.from([0x82]));
    const closed = await untilClosed(port, (s) =>
      s.write(Buffer.concat([http2Preface, http2Frame(frameType.settings, 0, 0), headers])),
    );
    expect(closed.afterMs).toBeLessThan(soonMs);
  });

  it("closes an HTTP/2 session http2IdleTimeoutMs after its last stream ended, with GOAWAY", async () => {
    const session = http2.connect(`http://127.0.0.1:${port}`);
    session.on("error", () => {});
    const goaway = new Promise<number>((resolve) => session.once("goaway", () => resolve(performance.now())));
    const closed = new Promise<void>((resolve) => session.once("close", () => resolve()));
    const status = await new Promise<number>((resolve, reject) => {
      const req = session.request({ ":path": "/healthz" });
      req.on("response", (h) => resolve(Number(h[":status"])));
      req.on("error", reject);
      req.resume();
    });
    const ended = performance.now();
    expect(status).toBe(200);
    const at = await goaway;
    await closed;
    expect(at - ended).toBeGreaterThanOrEqual(limits.http2IdleTimeoutMs - 100);
    expect(at - ended).toBeLessThan(soonMs);
  });

  it("answers a gRPC request whose body does not end within bodyTimeoutMs with DEADLINE_EXCEEDED, and keeps the connection", async () => {
    const session = http2.connect(`http://127.0.0.1:${port}`);
    session.on("error", () => {});
    try {
      const outcome = await new Promise<{ headers: http2.IncomingHttpHeaders; rstCode: number }>((resolve) => {
        const req = session.request(grpcHead);
        let headers: http2.IncomingHttpHeaders = {};
        req.on("response", (h) => {
          headers = h;
        });
        req.on("error", () => {});
        req.on("close", () => resolve({ headers, rstCode: req.rstCode ?? -1 }));
        req.resume();
        // The envelope promises 100 bytes; they come one every 100 ms, far too slowly.
        req.write(Buffer.from([0, 0, 0, 0, 100]));
        const timer = setInterval(() => (req.writable ? req.write(Buffer.from([0x0a])) : clearInterval(timer)), 100);
        req.once("close", () => clearInterval(timer));
      });
      expect(outcome.headers["grpc-status"]).toBe("4");
      expect(decodeURIComponent(String(outcome.headers["grpc-message"]))).toMatch(
        /did not arrive within 600 ms \(connections\.bodyTimeoutMs\)/,
      );
      // The stream was told to stop sending (NO_ERROR): the session itself goes on.
      expect(outcome.rstCode).toBe(http2.constants.NGHTTP2_NO_ERROR);
      const next = await new Promise<number>((resolve, reject) => {
        const req = session.request({ ":path": "/healthz" });
        req.on("response", (h) => resolve(Number(h[":status"])));
        req.on("error", reject);
        req.resume();
      });
      expect(next).toBe(200);
    } finally {
      session.destroy();
    }
  });

  it("answers a Connect request over HTTP/1.1 whose body is too slow with 408 deadline_exceeded and closes", async () => {
    const closed = await untilClosed(port, (s: Socket) => {
      s.write(
        "POST /lf.a2a.v1.A2AService/SendMessage HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n",
      );
      dribble(s, "x".repeat(100), 100);
    });
    const text = closed.received.toString("latin1");
    expect(text).toMatch(/^HTTP\/1\.1 408 /);
    expect(text).toContain('"code":"deadline_exceeded"');
    expect(text).toContain("connections.bodyTimeoutMs");
    expect(closed.afterMs).toBeLessThan(soonMs);
  });

  it("closes an HTTP/1.1 connection whose request headers come too slowly, with 408", async () => {
    const closed = await untilClosed(port, (s) => {
      dribble(
        s,
        "POST /lf.a2a.v1.A2AService/SendMessage HTTP/1.1\r\nHost: x\r\nX-Padding: aaaaaaaaaaaaaaaaaaaaaaaaaa\r\n",
        50,
      );
    });
    expect(closed.received.toString("latin1")).toMatch(/^HTTP\/1\.1 408 /);
    expect(closed.afterMs).toBeLessThan(soonMs);
  });

  it("closes an idle HTTP/1.1 keep-alive connection after http1IdleTimeoutMs (plus Node's second)", async () => {
    let answered = 0;
    const closed = await untilClosed(port, (s) => {
      s.write("GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n\r\n");
      s.once("data", () => {
        answered = performance.now();
      });
    });
    expect(closed.received.toString("latin1")).toMatch(/^HTTP\/1\.1 200 /);
    expect(answered).toBeGreaterThan(0);
    expect(closed.afterMs).toBeLessThan(soonMs);
  });

  it("advertises maxConcurrentStreams in its SETTINGS", async () => {
    const session = http2.connect(`http://127.0.0.1:${port}`);
    session.on("error", () => {});
    const settings = await new Promise<http2.Settings>((resolve) => session.once("remoteSettings", resolve));
    session.destroy();
    expect(settings.maxConcurrentStreams).toBe(limits.maxConcurrentStreams);
  });
});

describe("maxConnections on the h2c port", () => {
  it("closes connections past the limit as they arrive and keeps the ones it holds", async () => {
    const server = await startTestServer({ connections: { maxConnections: 3, headersTimeoutMs: 10_000 } });
    const port = portOf(server);
    const held: Socket[] = [];
    const pending: Promise<unknown>[] = [];
    try {
      for (let i = 0; i < 3; i++) {
        pending.push(untilClosed(port, (s) => held.push(s)).catch(() => {}));
      }
      while (held.length < 3) await new Promise((r) => setTimeout(r, 20));
      // Give the server the moment it needs to accept the three.
      await new Promise((r) => setTimeout(r, 200));
      const refused = await untilClosed(port);
      expect(refused.received.length).toBe(0);
      expect(refused.afterMs).toBeLessThan(soonMs);
      expect(held.every((s) => !s.destroyed)).toBe(true);
      // One leaves, and a new connection is served again.
      held[0]!.destroy();
      await new Promise((r) => setTimeout(r, 200));
      const served = await untilClosed(port, (s) =>
        s.write("GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"),
      );
      expect(served.received.toString("latin1")).toMatch(/^HTTP\/1\.1 200 /);
    } finally {
      for (const s of held) s.destroy();
      await Promise.all(pending);
      await server.close();
    }
  });
});
