import { randomUUID } from "node:crypto";
import { defaultConfig } from "@parley/server";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
// The seeded PRNG the server's fuzz and crash tests use, so every seed replays the same way across packages.
import { createRng, seedFrom } from "../../../packages/server/test/fixtures/prng.js";
import { JsonRpcCode } from "../src/json-rpc-error.js";
import { generate } from "./fuzz-requests.js";
import { judge } from "./fuzz-verdict.js";
import { postRaw, rpc, startStack, type TestStack } from "./harness.js";
import { rawExchange } from "./raw-http.js";

const requestCount = Number(process.env.PARLEY_FUZZ_REQUESTS ?? 2000);
const concurrency = 32;

describe("fuzzing the JSON-RPC bridge", () => {
  let stack: TestStack;
  /** Lines the bridge logged at error level: any one means a request broke something rather than being refused. */
  const faults: string[] = [];
  beforeAll(async () => {
    stack = await startStack(
      // Every request reaches the bridge's parsers and the engine, not the rate limiter.
      { limits: { ...defaultConfig.limits, requestsPerSecondPerTenant: 0 } },
      { logger: pino({ level: "error" }, { write: (line: string) => faults.push(line) }) },
    );
  });
  afterAll(async () => {
    await stack?.close();
  });

  it("pins what earlier fuzz seeds found: each of these is a client mistake, named, never an internal error", async () => {
    const v1 = { "A2A-Version": "1.0" };
    const cases: Array<{ body: string; headers?: Record<string, string>; code: number; message: RegExp }> = [
      {
        // Seed 6: an open enum lets any number through fromJson, and the store refused it as a fault.
        body: rpc("ListTasks", { status: -7 }),
        headers: v1,
        code: JsonRpcCode.InvalidParams,
        message: /status must be a TaskState, got -7/,
      },
      {
        // Seed 1: protobuf-es names the enum type, not the field.
        body: rpc("ListTasks", { status: "text" }),
        headers: v1,
        code: JsonRpcCode.InvalidParams,
        message: /^invalid params for ListTasks: status: cannot decode enum/,
      },
      {
        // Seed 4: the same for a Struct, which appears at several depths of one request.
        body: rpc("SendMessage", {
          message: { messageId: "m", role: "ROLE_USER", parts: [{ text: "a" }], metadata: { ok: 1 } },
          metadata: 42,
        }),
        headers: v1,
        code: JsonRpcCode.InvalidParams,
        message: /: metadata: cannot decode message google\.protobuf\.Struct/,
      },
      {
        body: rpc("SendMessage", {
          message: { messageId: "m", role: "ROLE_USER", parts: [{ text: "a" }, { text: 5 }] },
        }),
        headers: v1,
        code: JsonRpcCode.InvalidParams,
        message: /: message\.parts\.1\.text: /,
      },
      {
        // Seed 1: half a surrogate pair is valid JSON but not Unicode, and protobuf could not encode it upstream.
        body: rpc("SendMessage", { message: { messageId: "m\ud800", role: "ROLE_USER", parts: [{ text: "a" }] } }),
        headers: v1,
        code: JsonRpcCode.ParseError,
        message: /params\.message\.messageId contains an unpaired UTF-16 surrogate/,
      },
      {
        body: rpc("message/send", {
          message: { messageId: "m", role: "user", parts: [{ kind: "text", text: "\udc00" }] },
        }),
        code: JsonRpcCode.ParseError,
        message: /params\.message\.parts\.0\.text contains an unpaired/,
      },
    ];
    for (const c of cases) {
      const res = await postRaw(stack.bridge.url, c.body, c.headers);
      expect(res.status, c.body).toBe(200);
      const error = res.json.error as { code: number; message: string };
      expect(error, c.body).toMatchObject({ code: c.code, message: expect.stringMatching(c.message) });
    }
    expect(faults).toEqual([]);
  });

  it(`answers ${requestCount} malformed requests with well-formed errors, never crashes, and keeps serving`, async () => {
    const rng = createRng(seedFrom("PARLEY_FUZZ_SEED", 1));
    const only = process.env.PARLEY_FUZZ_ONLY;
    const codes = new Map<string, number>();
    const categories = new Map<string, number>();
    const problems: string[] = [];
    let next = 0;
    try {
      const lane = async () => {
        while (next < requestCount) {
          const index = next++;
          if (only !== undefined && index !== Number(only)) continue;
          // One generator per request, so any request replays from the seed alone.
          const req = generate(createRng((rng.seed + Math.imul(index, 0x9e3779b1)) >>> 0), index);
          categories.set(req.category, (categories.get(req.category) ?? 0) + 1);
          const verdict = judge(req, await rawExchange(stack.bridge.port, req));
          if ("problem" in verdict) problems.push(`${req.label}: ${verdict.problem}`);
          else codes.set(verdict.code, (codes.get(verdict.code) ?? 0) + 1);
        }
      };
      await Promise.all(Array.from({ length: concurrency }, lane));
      const figures = `seed ${rng.seed}; categories ${JSON.stringify([...categories])}; codes ${JSON.stringify([...codes])}`;
      expect(problems.slice(0, 20), figures).toEqual([]);
      expect(faults.slice(0, 5), figures).toEqual([]);
      if (only === undefined) expect([...categories.values()].reduce((a, b) => a + b, 0)).toBe(requestCount);

      // Still serving: an ordinary send completes.
      const res = await postRaw(
        stack.bridge.url,
        rpc("SendMessage", {
          message: { messageId: randomUUID(), role: "ROLE_USER", parts: [{ text: "still there?" }] },
        }),
        { "A2A-Version": "1.0" },
      );
      expect(res.status).toBe(200);
      const task = (res.json.result as { task?: { status?: { state?: string } } }).task;
      expect(task?.status?.state).toBe("TASK_STATE_COMPLETED");
    } catch (error) {
      process.stderr.write(
        `bridge fuzz failed; replay with PARLEY_FUZZ_SEED=${rng.seed} (one request: PARLEY_FUZZ_ONLY=<#>)\n`,
      );
      throw error;
    }
  }, 60_000);
});
