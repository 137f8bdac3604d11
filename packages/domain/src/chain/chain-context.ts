import { randomUUID } from "node:crypto";
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { extensionUris } from "@parley/proto";
import { createTypedError, invalidArgument } from "../errors.js";

/**
 * One hop of a chain: an agent on a server. Tenant-independent on purpose:
 * a ring whose hops authenticate as different tenants is still the same ring.
 */
export interface ChainHop {
  /** The stable id of the server (config `serverId`, or the one generated into its data dir). */
  readonly server: string;
  readonly agent: string;
}

/**
 * Everything one request causes, across servers: the chain id, the hops it
 * passed (oldest first), the hop limit and the budget that every hop draws
 * from. A2A messages carry it in `metadata[extensionUris.chain]`.
 */
export interface ChainContext {
  readonly id: string;
  readonly hops: readonly ChainHop[];
  /** The lowest hop limit of every server the chain passed. */
  readonly maxHops: number;
  /** Agent steps the whole chain may still run. */
  readonly stepsLeft: number;
  /** Epoch milliseconds after which no hop of the chain may start. */
  readonly deadline: number;
}

/** What this server allows a chain, whatever the chain says. */
export interface ChainLimits {
  readonly maxHops: number;
  readonly stepBudget: number;
  readonly deadlineMs: number;
}

/** Bounds on what a peer may send, so a chain context cannot be used to make the server do unbounded work. */
export const chainBounds = { idChars: 128, hops: 64, nameChars: 256 } as const;

export function hopName(hop: ChainHop): string {
  return `${hop.server}/${hop.agent}`;
}

function trace(hops: readonly ChainHop[]): string {
  return hops.map(hopName).join(" → ");
}

function isObject(value: JsonValue | undefined): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function bad(why: string): never {
  throw invalidArgument(`metadata["${extensionUris.chain}"] ${why}`);
}

function boundedString(value: JsonValue | undefined, field: string, max: number): string {
  if (typeof value !== "string" || value === "") bad(`.${field} must be a non-empty string`);
  if (value.length > max) bad(`.${field} has ${value.length} characters; the limit is ${max}`);
  return value;
}

function count(value: JsonValue | undefined, field: string): number {
  if (typeof value !== "number" || !Number.isInteger(value) || value < 0) {
    bad(`.${field} must be a non-negative integer, got ${JSON.stringify(value ?? null)}`);
  }
  return value;
}

/**
 * The chain context a message carries, or undefined when it carries none.
 * A malformed one is refused with a message naming the field, never ignored:
 * ignoring it would let a loop through.
 */
export function chainOf(metadata: JsonObject | undefined): ChainContext | undefined {
  const raw = metadata?.[extensionUris.chain];
  if (raw === undefined) return undefined;
  return decodeChain(raw);
}

export function decodeChain(raw: JsonValue): ChainContext {
  if (!isObject(raw)) bad("must be an object");
  const id = boundedString(raw.id, "id", chainBounds.idChars);
  if (!Array.isArray(raw.hops)) bad(".hops must be an array of { server, agent }");
  if (raw.hops.length > chainBounds.hops) bad(`.hops has ${raw.hops.length} entries; the limit is ${chainBounds.hops}`);
  const hops = raw.hops.map((hop, i): ChainHop => {
    if (!isObject(hop)) bad(`.hops[${i}] must be an object { server, agent }`);
    return {
      server: boundedString(hop.server, `hops[${i}].server`, chainBounds.nameChars),
      agent: boundedString(hop.agent, `hops[${i}].agent`, chainBounds.nameChars),
    };
  });
  const hopCount = count(raw.hopCount, "hopCount");
  if (hopCount !== hops.length) bad(`.hopCount is ${hopCount} but .hops lists ${hops.length} hops`);
  const deadline = typeof raw.deadline === "string" ? Date.parse(raw.deadline) : Number.NaN;
  if (Number.isNaN(deadline)) bad(`.deadline must be an RFC 3339 time, got ${JSON.stringify(raw.deadline ?? null)}`);
  return {
    id,
    hops,
    maxHops: count(raw.maxHops, "maxHops"),
    stepsLeft: count(raw.stepsLeft, "stepsLeft"),
    deadline,
  };
}

/** The JSON form carried under `metadata[extensionUris.chain]`. */
export function encodeChain(chain: ChainContext): JsonObject {
  return {
    id: chain.id,
    hops: chain.hops.map((h) => ({ server: h.server, agent: h.agent })),
    hopCount: chain.hops.length,
    maxHops: chain.maxHops,
    stepsLeft: chain.stepsLeft,
    deadline: new Date(chain.deadline).toISOString(),
  };
}

/** The chain as a header value (Converse requests): base64url of its JSON form. */
export function encodeChainHeader(chain: ChainContext): string {
  return Buffer.from(JSON.stringify(encodeChain(chain))).toString("base64url");
}

export function decodeChainHeader(header: string, name: string): ChainContext {
  let raw: JsonValue;
  try {
    raw = JSON.parse(Buffer.from(header, "base64url").toString("utf8")) as JsonValue;
  } catch {
    throw invalidArgument(`header ${name} must be base64url-encoded JSON of a chain context`);
  }
  return decodeChain(raw);
}

/** A chain that starts here: nothing passed yet, this server's full budget. */
export function startChain(limits: ChainLimits, now: number): ChainContext {
  return {
    // Flat: randomUUID builds its text as a rope of many pieces, kept as long as the turn's ledger.
    id: `chain-${randomUUID()}`.normalize(),
    hops: [],
    maxHops: limits.maxHops,
    stepsLeft: limits.stepBudget,
    deadline: now + limits.deadlineMs,
  };
}

/**
 * Clamps a chain to this server's limits: a peer can hand on less than it got,
 * never more, and a caller cannot grant itself more than this server allows.
 */
export function clampChain(chain: ChainContext, limits: ChainLimits, now: number): ChainContext {
  return {
    ...chain,
    maxHops: Math.min(chain.maxHops, limits.maxHops),
    stepsLeft: Math.min(chain.stepsLeft, limits.stepBudget),
    deadline: Math.min(chain.deadline, now + limits.deadlineMs),
  };
}

/**
 * Refuses a chain that must not take one more step (as a budget check) or
 * one more hop at `here`: a loop first (the trace already holds this server
 * and agent), then the hop limit, then the budget. The errors name the chain
 * and the hop, so the text that travels back to the first caller says where
 * the chain stopped.
 */
export function checkChain(chain: ChainContext, here: ChainHop | undefined, now: number): void {
  const metadata = (extra: Record<string, string>) => ({ chainId: chain.id, trace: trace(chain.hops), ...extra });
  if (here) {
    const earlier = chain.hops.findIndex((h) => h.server === here.server && h.agent === here.agent);
    if (earlier >= 0) {
      throw createTypedError(
        "LOOP_DETECTED",
        `chain ${chain.id} came back to ${hopName(here)}, which it already passed at hop ${earlier + 1} of ${chain.hops.length} (${trace([...chain.hops, here])}); refused before anything was stored`,
        metadata({ hop: hopName(here), firstSeenAt: String(earlier + 1) }),
      );
    }
    if (chain.hops.length + 1 > chain.maxHops) {
      throw createTypedError(
        "HOP_LIMIT",
        `chain ${chain.id} would take hop ${chain.hops.length + 1} at ${hopName(here)}, above its limit of ${chain.maxHops} hops (${trace(chain.hops)})`,
        metadata({ hop: hopName(here), maxHops: String(chain.maxHops) }),
      );
    }
  }
  const at = here ? ` at ${hopName(here)}` : "";
  if (chain.stepsLeft <= 0) {
    throw createTypedError(
      "BUDGET_EXHAUSTED",
      `chain ${chain.id} has no agent steps left${at}: its whole budget was used by earlier hops (${trace(chain.hops) || "no hops yet"})`,
      metadata({ budget: "steps" }),
    );
  }
  if (now >= chain.deadline) {
    throw createTypedError(
      "BUDGET_EXHAUSTED",
      `chain ${chain.id} passed its deadline ${new Date(chain.deadline).toISOString()}${at} (${trace(chain.hops) || "no hops yet"})`,
      metadata({ budget: "deadline", deadline: new Date(chain.deadline).toISOString() }),
    );
  }
}

/** The chain after `here` took its hop and one agent step. */
export function enterChain(chain: ChainContext, here: ChainHop): ChainContext {
  return { ...chain, hops: [...chain.hops, here], stepsLeft: chain.stepsLeft - 1 };
}
