import { randomUUID } from "node:crypto";
import { create, fromJson, type JsonValue, toJson } from "@bufbuild/protobuf";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import {
  A2AService,
  type Message,
  type SendMessageRequest,
  SendMessageRequestSchema,
  SendMessageResponseSchema,
  type StreamResponse,
  TaskState,
} from "@parley/proto";
import type { PeerConfig } from "../config.js";
import { messageText } from "../engine/history.js";
import { parleyMetadataKey } from "../engine/parley-metadata.js";
import { injectTraceHeaders } from "../observability/tracing.js";
import type { Agent, AgentEvent, AgentTurn } from "./agent.js";
import { peerRequestHeaders } from "./peer-headers.js";

/**
 * A remote A2A agent. Each turn is forwarded with the same contextId (the
 * remote keeps its own history of the thread, so only the raw text goes),
 * and the message carries its hop trace so chains of Parley servers can
 * stop loops.
 */
export function createA2APeerAgent(options: {
  readonly name: string;
  readonly peer: PeerConfig;
  readonly self: string;
}): Agent {
  const { peer } = options;
  const headers = peerRequestHeaders(peer);
  const grpc =
    peer.protocol === "grpc" ? createClient(A2AService, createGrpcTransport({ baseUrl: peer.url })) : undefined;

  function request(turn: AgentTurn): SendMessageRequest {
    return create(SendMessageRequestSchema, {
      message: {
        messageId: randomUUID(),
        contextId: turn.contextId,
        role: 1,
        parts: [{ content: { case: "text", value: turn.text } }],
        metadata: { [parleyMetadataKey]: { hops: [...turn.hops, options.self] } },
      },
    });
  }

  return {
    name: options.name,
    description: peer.description ?? `Remote A2A agent ${peer.name} (${peer.protocol}, ${peer.url})`,
    async *run(turn: AgentTurn): AsyncIterable<AgentEvent> {
      if (grpc) {
        for await (const event of grpc.sendStreamingMessage(request(turn), {
          signal: turn.signal,
          headers: injectTraceHeaders({ ...headers }),
        })) {
          yield* eventsOf(event);
        }
        return;
      }
      const response = await fetch(peer.url, {
        method: "POST",
        signal: turn.signal,
        headers: injectTraceHeaders({ "content-type": "application/json", ...headers }),
        body: JSON.stringify({
          jsonrpc: "2.0",
          id: 1,
          method: "SendMessage",
          params: toJson(SendMessageRequestSchema, request(turn)),
        }),
      });
      const body = (await response.json().catch(() => undefined)) as
        | { result?: JsonValue; error?: { code: number; message: string } }
        | undefined;
      if (!body) throw new Error(`peer ${peer.name} answered HTTP ${response.status} without a JSON-RPC body`);
      if (body.error) throw new Error(`peer ${peer.name} answered error ${body.error.code}: ${body.error.message}`);
      const result = fromJson(SendMessageResponseSchema, body.result ?? null, { ignoreUnknownFields: true });
      if (result.payload.case === "message") {
        yield { type: "text", text: messageText(result.payload.value) };
        return;
      }
      if (result.payload.case === "task") {
        const task = result.payload.value;
        const text = task.artifacts.map((a) => messageText(a)).join("");
        const status = task.status?.message ? messageText(task.status.message) : "";
        if (text !== "") yield { type: "text", text };
        yield { type: "state", state: task.status?.state ?? TaskState.COMPLETED, ...(status ? { text: status } : {}) };
      }
    },
  };
}

function* eventsOf(event: StreamResponse): Iterable<AgentEvent> {
  switch (event.payload.case) {
    case "message":
      yield { type: "text", text: messageText(event.payload.value as Message) };
      return;
    case "artifactUpdate": {
      const text = messageText(event.payload.value.artifact ?? { parts: [] });
      if (text !== "") yield { type: "text", text };
      return;
    }
    case "statusUpdate": {
      const status = event.payload.value.status;
      const state = status?.state ?? TaskState.UNSPECIFIED;
      if (state === TaskState.SUBMITTED || state === TaskState.WORKING || state === TaskState.UNSPECIFIED) return;
      yield {
        type: "state",
        state,
        ...(status?.message ? { text: messageText(status.message) } : {}),
      };
      return;
    }
    default:
      return;
  }
}
