import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { ErrorInfoSchema, parleyErrorDomain } from "@parley/proto";
import { describe, expect, it } from "vitest";
import { describeError, isNetworkError } from "../src/logic/errors.js";

function typed(reason: string, code: Code, message: string, metadata: Record<string, string>) {
  return new ConnectError(message, code, undefined, [
    { desc: ErrorInfoSchema, value: create(ErrorInfoSchema, { reason, domain: parleyErrorDomain, metadata }) },
  ]);
}

describe("describeError", () => {
  it("says a context is busy and names the running task", () => {
    const shown = describeError(typed("CONTEXT_BUSY", Code.Aborted, "context c1 is busy", { taskId: "t7" }));
    expect(shown.title).toMatch(/busy/);
    expect(shown.taskId).toBe("t7");
    expect(shown.reason).toBe("CONTEXT_BUSY");
  });

  it("explains loops, rate and size limits with what the server said", () => {
    expect(describeError(typed("LOOP_DETECTED", Code.FailedPrecondition, "hop a again", {})).title).toMatch(/Loop/);
    const rate = describeError(typed("RATE_LIMITED", Code.ResourceExhausted, "slow down", { retryAfterMs: "120" }));
    expect(rate.detail).toBe("slow down; retry in 120 ms");
    const size = describeError(
      typed("LIMIT_EXCEEDED", Code.ResourceExhausted, "too big", { limit: "maxMessageBytes" }),
    );
    expect(size.detail).toContain("limit: maxMessageBytes");
  });

  it("falls back to the status code, and tells network failures apart", () => {
    expect(describeError(new ConnectError("unknown API key", Code.Unauthenticated)).title).toBe(
      "The API key was refused",
    );
    expect(isNetworkError(new ConnectError("fetch failed", Code.Unavailable))).toBe(true);
    expect(isNetworkError(new TypeError("Failed to fetch"))).toBe(true);
    expect(isNetworkError(new ConnectError("no", Code.NotFound))).toBe(false);
  });
});
