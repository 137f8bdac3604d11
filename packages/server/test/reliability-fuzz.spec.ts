import * as http2 from "node:http2";
import { type Task, TaskState } from "@parley/proto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { generate, maxMessageBytes } from "./fixtures/fuzz-requests.js";
import { type FuzzResponse, judge, percentDecoded, send, serverFaultCodes } from "./fixtures/fuzz-responses.js";
import { createRng, seedFrom } from "./fixtures/prng.js";
import { startTestServer, type TestServer, userMessage } from "./harness.js";

const requestCount = Number(process.env.PARLEY_FUZZ_REQUESTS ?? 2000);
const concurrency = 24;

describe("fuzzing the Connect endpoint", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({
      // Every request reaches the parsers rather than the rate limiter.
      limits: { maxMessageBytes, requestsPerSecondPerTenant: 0 },
    });
  });
  afterAll(async () => {
    await server.close();
  });

  it(`answers ${requestCount} malformed requests over all three protocols with well-formed errors and keeps serving`, async () => {
    // A fixed seed in CI so the suite is reproducible; PARLEY_FUZZ_SEED explores others.
    const rng = createRng(seedFrom("PARLEY_FUZZ_SEED", 1));
    const codes = new Map<string, number>();
    const problems: string[] = [];
    let next = 0;
    let failed = false;
    const sessions: http2.ClientHttp2Session[] = [];
    const connect = () => {
      const session = http2.connect(server.baseUrl);
      session.on("error", () => {});
      sessions.push(session);
      return session;
    };
    try {
      // A connection per lane: node's HTTP/2 guard drops a connection that carries too many
      // frames for streams the server already answered and reset, and that should cost one lane.
      const lane = async () => {
        let session = connect();
        while (next < requestCount && !failed) {
          const only = process.env.PARLEY_FUZZ_ONLY;
          if (only !== undefined && next !== Number(only)) {
            next++;
            codes.set("skipped", (codes.get("skipped") ?? 0) + 1);
            continue;
          }
          const index = next++;
          // One generator per request, so a request replays from the seed whatever the interleaving.
          const own = createRng((rng.seed + Math.imul(index, 0x9e3779b1)) >>> 0);
          const req = generate(own, index);
          let res: FuzzResponse | "abandoned" | "calm" | undefined;
          if (req.abandon) {
            // Resets count against node's rapid-reset guard per connection: keep them off the shared one.
            const lone = http2.connect(server.baseUrl);
            lone.on("error", () => {});
            res = await send(lone, req, own);
            lone.destroy();
          }
          for (let attempt = 0; res === undefined || res === "calm"; attempt++) {
            if (attempt > 3) throw new Error(`${req.label}: the connection was refused ${attempt} times in a row`);
            if (session.closed || session.destroyed) session = connect();
            res = await send(session, req, own);
            if (res === "calm") codes.set("connection-guard", (codes.get("connection-guard") ?? 0) + 1);
          }
          if (res === "abandoned") {
            codes.set("abandoned", (codes.get("abandoned") ?? 0) + 1);
            continue;
          }
          const verdict = judge(res);
          if ("problem" in verdict) problems.push(`${req.label}: ${verdict.problem}`);
          else {
            codes.set(verdict.code, (codes.get(verdict.code) ?? 0) + 1);
            // connect-es files undecodable requests under internal; Parley answers them invalid_argument
            // (decode-errors.ts), so every internal is a server fault now (issue 20 item 8).
            if (serverFaultCodes.has(verdict.code)) {
              const said = percentDecoded(
                `${res.body.toString("utf8")} ${res.trailers["grpc-message"] ?? res.headers["grpc-message"] ?? ""}`,
              );
              problems.push(`${req.label}: server fault ${verdict.code}: ${said.slice(0, 300)}`);
            }
          }
        }
      };
      await Promise.all(
        Array.from({ length: concurrency }, () =>
          lane().catch((error: unknown) => {
            failed = true;
            throw error;
          }),
        ),
      );
      expect(problems.slice(0, 20), `seed ${rng.seed}; codes ${JSON.stringify([...codes])}`).toEqual([]);
      // Still serving: a normal send over a fresh client succeeds.
      const res = await server.a2a("grpc").sendMessage({ message: userMessage("still there?") });
      expect((res.payload.value as Task).status?.state).toBe(TaskState.COMPLETED);
    } catch (error) {
      process.stderr.write(`fuzz failed; replay with PARLEY_FUZZ_SEED=${rng.seed}\n`);
      throw error;
    } finally {
      for (const session of sessions) session.destroy();
    }
    const answered = [...codes].filter(([code]) => code !== "connection-guard").reduce((sum, [, n]) => sum + n, 0);
    expect(answered).toBe(requestCount);
  }, 60_000);
});
