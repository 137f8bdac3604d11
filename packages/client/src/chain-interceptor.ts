import type { JsonObject } from "@bufbuild/protobuf";
import type { Interceptor } from "@connectrpc/connect";
import {
  A2AService,
  extensionUris,
  headers,
  type SendMessageRequest,
  type SendMessageResponse,
  SessionService,
  type StreamResponse,
} from "@parley/proto";

/** One hop's share of a chain, as Parley's ChainLedger hands it out (`turn.chain.hand()`). */
export interface ChainHandOut {
  /** `metadata[extensionUris.chain]` of the message to the next hop. */
  readonly metadata: JsonObject;
  /** The same context as the `parley-chain` header (Converse). */
  readonly header: string;
  /** Charges what the hop used, from the reply's metadata (or one step when it reports nothing). */
  settle(reply: { readonly [key: string]: unknown } | undefined): void;
}

/** Where a client called from inside an agent gets its chain: the agent's `turn.chain`. */
export interface ChainSource {
  hand(): ChainHandOut;
}

function trailerReport(value: string | null): JsonObject | undefined {
  if (!value) return undefined;
  try {
    return { [extensionUris.chain]: JSON.parse(Buffer.from(value, "base64url").toString("utf8")) as JsonObject };
  } catch {
    return undefined;
  }
}

/**
 * Carries the chain of the agent turn this client works for: every A2A send
 * gets the chain context in its message metadata (unless the caller put one
 * there) and is charged what it used when its reply comes back; a Converse
 * gets the `parley-chain` header and is charged from the trailer. So a chain
 * that passes through an agent written with this library stays one chain,
 * with one budget, and its loops are caught.
 */
export function createChainInterceptor(source: ChainSource): Interceptor {
  return (next) => async (req) => {
    const isSend = req.service.typeName === A2AService.typeName && req.method.name.startsWith("SendMessage");
    const isSendStream = req.service.typeName === A2AService.typeName && req.method.name === "SendStreamingMessage";
    const isConverse = req.service.typeName === SessionService.typeName && req.method.name === "Converse";
    if (!isSend && !isSendStream && !isConverse) return next(req);
    const hand = source.hand();
    if (isConverse) {
      req.header.set(headers.chain, hand.header);
      const res = await next(req);
      if (!res.stream) return res;
      return {
        ...res,
        message: (async function* () {
          try {
            yield* res.message;
          } finally {
            hand.settle(trailerReport(res.trailer.get(headers.chain)));
          }
        })(),
      };
    }
    if (!req.stream) {
      const message = (req.message as SendMessageRequest).message;
      if (message && message.metadata?.[extensionUris.chain] === undefined) {
        message.metadata = { ...message.metadata, [extensionUris.chain]: hand.metadata };
      }
    }
    const res = await next(req);
    if (!res.stream) {
      const payload = (res.message as SendMessageResponse).payload;
      hand.settle(payload.case === "task" || payload.case === "message" ? payload.value.metadata : undefined);
      return res;
    }
    let report: JsonObject | undefined;
    return {
      ...res,
      message: (async function* () {
        try {
          for await (const event of res.message as AsyncIterable<StreamResponse>) {
            const p = event.payload;
            if (p.case === "statusUpdate" || p.case === "message" || p.case === "task")
              report = p.value.metadata ?? report;
            yield event;
          }
        } finally {
          hand.settle(report);
        }
      })() as typeof res.message,
    };
  };
}
