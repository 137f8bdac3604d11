import type { ParleyErrorReason } from "@parley/proto";
import { extensionUris } from "@parley/proto";

/** The error reasons with which a hop refuses a chain. */
export const chainRefusalReasons: ReadonlySet<string> = new Set<ParleyErrorReason>([
  "LOOP_DETECTED",
  "HOP_LIMIT",
  "BUDGET_EXHAUSTED",
]);

export type ChainRefusalReason = "LOOP_DETECTED" | "HOP_LIMIT" | "BUDGET_EXHAUSTED";

/**
 * A later hop refused the chain. Thrown by whatever forwarded the work, so
 * the task of this hop fails with the refusal's text and reports its reason
 * in `metadata[extensionUris.chain].refused`, and the hop before it does the
 * same, back to the first caller.
 */
export class ChainRefusedError extends Error {
  override readonly name = "ChainRefusedError";
  constructor(
    readonly reason: ChainRefusalReason,
    message: string,
  ) {
    super(message);
  }
}

export function isChainRefusalReason(reason: string | undefined): reason is ChainRefusalReason {
  return reason !== undefined && chainRefusalReasons.has(reason);
}

/** The refusal a reply's metadata reports, if any. */
export function chainRefusalOf(
  metadata: { readonly [key: string]: unknown } | undefined,
): ChainRefusalReason | undefined {
  const report = metadata?.[extensionUris.chain];
  if (typeof report !== "object" || report === null || Array.isArray(report)) return undefined;
  const refused = (report as { refused?: unknown }).refused;
  return typeof refused === "string" && isChainRefusalReason(refused) ? refused : undefined;
}
