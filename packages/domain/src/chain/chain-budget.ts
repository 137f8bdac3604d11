import type { JsonObject } from "@bufbuild/protobuf";
import { chainReportOf, extensionUris } from "@parley/proto";
import { type ChainContext, encodeChain, encodeChainHeader } from "./chain-context.js";

/** What one hop was handed: the context to send on, and how to charge what it used. */
export interface ChainHand {
  readonly context: ChainContext;
  /** `metadata[extensionUris.chain]` of the message to the next hop. */
  readonly metadata: JsonObject;
  /** The same context as the `parley-chain` header (Converse). */
  readonly header: string;
  /**
   * Charges the hop's work to the chain: the steps the reply reports left
   * (from its metadata), or one step when it reports nothing (a peer that is
   * not Parley). A report can lower what is left, never raise it.
   */
  settle(reply: { readonly [key: string]: unknown } | undefined): void;
}

/**
 * The budget of a chain as one hop holds it while its agent runs. Whatever
 * the agent forwards (an `a2a` peer, a session step, a nested conversation,
 * a client call) is handed what is left and charged what it used when its
 * reply comes back, so a chain's total work stays within the budget it
 * started with, whatever its shape.
 */
export class ChainLedger {
  private left: number;

  constructor(readonly context: ChainContext) {
    this.left = context.stepsLeft;
  }

  get id(): string {
    return this.context.id;
  }

  get stepsLeft(): number {
    return this.left;
  }

  /** Takes one step out of the budget (a step this hop runs itself, such as a conversation step). */
  spend(steps: number): void {
    this.left = Math.max(0, this.left - steps);
  }

  /** The context for the next hop: the trace so far and what is left of the budget. */
  hand(): ChainHand {
    const context: ChainContext = { ...this.context, stepsLeft: this.left };
    return {
      context,
      metadata: encodeChain(context),
      header: encodeChainHeader(context),
      settle: (reply) => {
        const report = chainReportOf(reply, context.id);
        const used = report === undefined ? 1 : context.stepsLeft - report.stepsLeft;
        this.spend(Math.min(context.stepsLeft, Math.max(1, used)));
      },
    };
  }

  /** What this hop reports back in its reply's metadata. */
  report(): JsonObject {
    return { id: this.context.id, stepsLeft: this.left, hopCount: this.context.hops.length };
  }
}

/** The chain report of a finished conversation as the `parley-chain` response trailer. */
export function encodeChainReportTrailer(ledger: ChainLedger): string {
  return Buffer.from(JSON.stringify(ledger.report())).toString("base64url");
}

/** The `parley-chain` trailer as the metadata a ChainHand settles from (undefined when absent or unreadable). */
export function chainReportFromTrailer(value: string | null | undefined): JsonObject | undefined {
  if (!value) return undefined;
  try {
    return { [extensionUris.chain]: JSON.parse(Buffer.from(value, "base64url").toString("utf8")) as JsonObject };
  } catch {
    return undefined;
  }
}

/** Reply metadata carrying a chain report, merged into metadata the reply already has. */
export function withChainReport(metadata: JsonObject | undefined, ledger: ChainLedger): JsonObject {
  return { ...metadata, [extensionUris.chain]: ledger.report() };
}
