import type { IncomingMessage, ServerResponse } from "node:http";
import { toJsonString } from "@bufbuild/protobuf";
import { type AgentCard, AgentCardSchema } from "@parley/proto";
import { noteRequest } from "@parley/server";
import type { AgentCheck, CardSource } from "./card-source.js";
import { createCardValidators, notModified } from "./card-validators.js";
import { sendJson } from "./http-response.js";
import type { Logger } from "./logger.js";
import { negotiateVersion } from "./protocol-version.js";
import { headerValue } from "./request-headers.js";
import { agentCardToV03 } from "./v03/agent-card.js";

export interface CardHandlerOptions {
  readonly cards: CardSource;
  readonly checkAgent: AgentCheck;
  /** The JSON-RPC URL a card advertises for an agent (known once the bridge listens). */
  readonly jsonRpcUrlOf: (agent: string | undefined) => string;
  readonly grpcAddress?: string;
  readonly logger: Logger;
}

/** Serves GET/HEAD of an agent card, with ETag and Last-Modified so a client polling it gets 304s. */
export type CardHandler = (req: IncomingMessage, res: ServerResponse, url: URL, agent?: string) => Promise<void>;

export function createCardHandler(options: CardHandlerOptions): CardHandler {
  const { cards, checkAgent, jsonRpcUrlOf, logger } = options;
  const cardValidators = createCardValidators();
  return async (req, res, url, agent) => {
    noteRequest(res, { method: "agent-card" });
    if (req.method !== "GET" && req.method !== "HEAD") {
      sendJson(
        res,
        405,
        { error: `method ${req.method} is not allowed on ${url.pathname}; use GET` },
        { Allow: "GET, HEAD" },
      );
      return;
    }
    const unknown = await checkAgent(agent);
    if (unknown) {
      sendJson(res, 404, { error: unknown.message, agents: unknown.known });
      return;
    }
    let card: AgentCard;
    try {
      card = await cards.agentCard({ jsonRpcUrl: jsonRpcUrlOf(agent), grpcAddress: options.grpcAddress, agent });
    } catch (error) {
      logger.error({ err: error, agent }, "agent card unavailable");
      sendJson(res, 502, { error: `the agent card could not be built: ${(error as Error).message}` });
      return;
    }
    // A client that asks for 0.3 explicitly gets the card shape 0.3 clients parse; everyone else the 1.0 card,
    // which lists the 0.3 interface too: a card is how a client learns the versions, before it has picked one.
    const { version, explicit } = negotiateVersion(req, url);
    const body =
      explicit && version === "0.3" ? JSON.stringify(agentCardToV03(card)) : toJsonString(AgentCardSchema, card);
    const validators = cardValidators.of(body);
    const headers = {
      ETag: validators.etag,
      "Last-Modified": validators.lastModified,
      "Cache-Control": "public, max-age=60",
      Vary: "A2A-Version",
    };
    if (notModified(validators, headerValue(req, "if-none-match"), headerValue(req, "if-modified-since"))) {
      res.writeHead(304, headers);
      res.end();
      return;
    }
    res.writeHead(200, {
      ...headers,
      "Content-Type": "application/json",
      "Content-Length": Buffer.byteLength(body),
    });
    res.end(req.method === "HEAD" ? undefined : body);
  };
}
