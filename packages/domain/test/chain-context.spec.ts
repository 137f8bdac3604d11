import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ConnectError } from "@connectrpc/connect";
import { extensionUris } from "@parley/proto";
import { describe, expect, it } from "vitest";
import { ChainLedger } from "../src/chain/chain-budget.js";
import {
  type ChainContext,
  chainOf,
  decodeChainHeader,
  encodeChain,
  encodeChainHeader,
} from "../src/chain/chain-context.js";
import { createChainGuard } from "../src/chain/chain-guard.js";
import { resolveServerId, serverIdFile } from "../src/chain/server-id.js";
import { errorReasonOf } from "../src/errors.js";
import { isSilentReply, isSilentRequest, silenceHoldFrom, silenceTokenSet } from "../src/sessions/silence.js";

const limits = { maxHops: 3, stepBudget: 10, deadlineMs: 60_000 };
const t0 = Date.parse("2026-12-01T12:00:00Z");

function guard(server: string, now = () => t0) {
  return createChainGuard({ serverId: server, limits, now });
}

function carrying(chain: ChainContext) {
  return { metadata: { [extensionUris.chain]: encodeChain(chain) } };
}

function refusal(fn: () => unknown): { reason: string | undefined; message: string } {
  try {
    fn();
  } catch (error) {
    return { reason: errorReasonOf(error), message: ConnectError.from(error).rawMessage };
  }
  throw new Error("expected a refusal");
}

describe("chain context", () => {
  it("starts a chain for a message without one and hands on the trace and what is left", () => {
    const ledger = guard("srv-a").admit({ metadata: undefined }, "fwd");
    expect(ledger.context.hops).toEqual([{ server: "srv-a", agent: "fwd" }]);
    expect(ledger.stepsLeft).toBe(9);
    expect(ledger.context.deadline).toBe(t0 + 60_000);
    const hand = ledger.hand();
    const next = chainOf({ [extensionUris.chain]: hand.metadata })!;
    expect(next).toEqual(hand.context);
    expect(decodeChainHeader(hand.header, "parley-chain")).toEqual(hand.context);
    expect(encodeChainHeader(next)).toBe(hand.header);
  });

  it("refuses a loop before the hop limit and the budget, naming the chain and the repeated hop", () => {
    const a = guard("srv-a").admit({ metadata: undefined }, "fwd");
    const b = guard("srv-b").admit(carrying(a.hand().context), "fwd");
    const c = guard("srv-c").admit(carrying(b.hand().context), "fwd");
    expect(c.context.hops.map((h) => h.server)).toEqual(["srv-a", "srv-b", "srv-c"]);
    const back = { ...c.hand().context, stepsLeft: 0 };
    const loop = refusal(() => guard("srv-a").admit(carrying(back), "fwd"));
    expect(loop.reason).toBe("LOOP_DETECTED");
    expect(loop.message).toContain(`chain ${a.id} came back to srv-a/fwd, which it already passed at hop 1 of 3`);
    expect(loop.message).toContain("srv-a/fwd → srv-b/fwd → srv-c/fwd → srv-a/fwd");
    // The same server with another agent is another hop: here the fourth, above the limit of 3.
    const hop = refusal(() => guard("srv-a").admit(carrying(c.hand().context), "other"));
    expect(hop.reason).toBe("HOP_LIMIT");
    expect(hop.message).toContain("would take hop 4 at srv-a/other, above its limit of 3 hops");
  });

  it("refuses an exhausted budget and a passed deadline", () => {
    const a = guard("srv-a").admit({ metadata: undefined }, "x");
    const spent = refusal(() => guard("srv-b").admit(carrying({ ...a.hand().context, stepsLeft: 0 }), "y"));
    expect(spent.reason).toBe("BUDGET_EXHAUSTED");
    expect(spent.message).toContain("has no agent steps left at srv-b/y");
    const late = refusal(() => guard("srv-b", () => t0 + 60_001).admit(carrying(a.hand().context), "y"));
    expect(late.reason).toBe("BUDGET_EXHAUSTED");
    expect(late.message).toContain("passed its deadline 2026-12-01T12:01:00.000Z");
  });

  it("never lets a peer raise the budget, the hop limit or the deadline it was handed", () => {
    const raised: ChainContext = { id: "chain-x", hops: [], maxHops: 99, stepsLeft: 1_000, deadline: t0 + 9e9 };
    const ledger = guard("srv-a").admit(carrying(raised), "x");
    expect(ledger.context.maxHops).toBe(3);
    expect(ledger.stepsLeft).toBe(9);
    expect(ledger.context.deadline).toBe(t0 + 60_000);
  });

  it("charges what a hop used, at least one step, never more than it was handed", () => {
    const ledger = new ChainLedger({ id: "chain-y", hops: [], maxHops: 8, stepsLeft: 20, deadline: t0 });
    const report = (stepsLeft: number, id = "chain-y") => ({ [extensionUris.chain]: { id, stepsLeft } });
    ledger.hand().settle(report(15));
    expect(ledger.stepsLeft).toBe(15);
    ledger.hand().settle(undefined); // a peer that is not Parley: one step
    expect(ledger.stepsLeft).toBe(14);
    ledger.hand().settle(report(100)); // a report that would raise the budget counts as one step
    expect(ledger.stepsLeft).toBe(13);
    ledger.hand().settle(report(3, "chain-other")); // another chain's report is no report
    expect(ledger.stepsLeft).toBe(12);
    ledger.hand().settle(report(0));
    expect(ledger.stepsLeft).toBe(0);
  });

  it("refuses a malformed chain context with the field that is wrong", () => {
    const g = guard("srv-a");
    const bad = (value: unknown) =>
      refusal(() => g.admit({ metadata: { [extensionUris.chain]: value as never } }, "x"));
    expect(bad("nope").message).toContain(`metadata["${extensionUris.chain}"] must be an object`);
    const good = encodeChain({ id: "c", hops: [{ server: "s", agent: "a" }], maxHops: 8, stepsLeft: 3, deadline: t0 });
    expect(bad({ ...good, hopCount: 0 }).message).toContain(".hopCount is 0 but .hops lists 1 hops");
    expect(bad({ ...good, stepsLeft: -1 }).message).toContain(".stepsLeft must be a non-negative integer");
    expect(bad({ ...good, hops: [{ server: "s" }] }).message).toContain(".hops[0].agent must be a non-empty string");
    expect(bad({ ...good, deadline: "soon" }).message).toContain(".deadline must be an RFC 3339 time");
    expect(bad({ ...good, hops: Array(65).fill({ server: "s", agent: "a" }), hopCount: 65 }).message).toContain(
      "has 65 entries; the limit is 64",
    );
  });

  it("keeps a generated server id in the data dir, and takes the configured one first", () => {
    const dir = mkdtempSync(join(tmpdir(), "parley-server-id-"));
    try {
      const first = resolveServerId({ serverId: "", storeUrl: "", dataDir: dir });
      expect(first).toMatch(/^parley-[0-9a-f-]{36}$/);
      expect(readFileSync(join(dir, serverIdFile), "utf8").trim()).toBe(first);
      expect(resolveServerId({ serverId: "", storeUrl: "", dataDir: dir })).toBe(first);
      expect(resolveServerId({ serverId: "srv-b", storeUrl: "", dataDir: dir })).toBe("srv-b");
      expect(() => resolveServerId({ serverId: "a b", storeUrl: "", dataDir: dir })).toThrow(/serverId "a b" must be/);
      writeFileSync(join(dir, serverIdFile), "not valid!\n");
      expect(() => resolveServerId({ serverId: "", storeUrl: "", dataDir: dir })).toThrow(/holds no valid server id/);
      // Replicas of one database are one server, whatever their credentials.
      const one = resolveServerId({ serverId: "", storeUrl: "postgres://a:x@db:5432/p", dataDir: dir });
      expect(resolveServerId({ serverId: "", storeUrl: "postgres://b:y@db:5432/p", dataDir: dir })).toBe(one);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("silence on plain sends", () => {
  const tokens = silenceTokenSet(["NO_REPLY", "HEARTBEAT_OK"]);

  it("holds back a last line that could still become a token, and nothing else", () => {
    expect(silenceHoldFrom("", tokens)).toBe(0);
    expect(silenceHoldFrom("\n", tokens)).toBe(0);
    expect(silenceHoldFrom("a\n\n", tokens)).toBe(3);
    expect(silenceHoldFrom("NO_", tokens)).toBe(0);
    expect(silenceHoldFrom("**NO_REPLY**", tokens)).toBe(0);
    expect(silenceHoldFrom("Hello", tokens)).toBe(5);
    expect(silenceHoldFrom("Hello\nHEART", tokens)).toBe(6);
    expect(silenceHoldFrom("Hello\nNO_REPLY\n\n", tokens)).toBe(6);
    expect(silenceHoldFrom("NO_REPLY please", tokens)).toBe(15);
    // Case, separators and decoration do not matter; a finished line that is no token is passed on.
    expect(silenceHoldFrom("Hello\n(no re", tokens)).toBe(6);
    expect(silenceHoldFrom("Hello\nno\n", tokens)).toBe(9);
    expect(silenceHoldFrom("Hello\nNo-Reply.\n", tokens)).toBe(6);
  });

  it("judges a request as silent only when it is one token line", () => {
    expect(isSilentRequest(" NO_REPLY \n", tokens)).toBe(true);
    expect(isSilentRequest("`HEARTBEAT_OK`.", tokens)).toBe(true);
    expect(isSilentRequest("hello\nNO_REPLY", tokens)).toBe(false);
    expect(isSilentReply("hello\nNO_REPLY", tokens)).toBe(true);
  });
});
