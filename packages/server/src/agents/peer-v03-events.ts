import { create, type JsonObject, type JsonValue } from "@bufbuild/protobuf";
import { type StreamResponse, StreamResponseSchema, TaskState } from "@parley/proto";
import { answerFromV03, PeerError, type V03Object, v03Message, v03Parts, v03States } from "./peer-call.js";
import type { PeerConfig } from "./peer-options.js";

const stringOf = (value: JsonValue | undefined) => (typeof value === "string" ? value : "");
const objectOf = (value: JsonValue | undefined) =>
  value && typeof value === "object" && !Array.isArray(value) ? (value as JsonObject) : undefined;

/** One event of an A2A 0.3 `message/stream` (a message, a task, a status or an artifact update) in the 1.0 form. */
export function streamEventFromV03(peer: PeerConfig, result: JsonValue | undefined): StreamResponse {
  const o = (result ?? {}) as V03Object;
  if (o.kind === "message" || o.kind === "task") {
    const answer = answerFromV03(peer, result);
    return create(StreamResponseSchema, {
      payload:
        answer.kind === "message" ? { case: "message", value: answer.message } : { case: "task", value: answer.task },
    });
  }
  const metadata = objectOf(o.metadata);
  if (o.kind === "status-update") {
    const status = (o.status ?? {}) as V03Object;
    return create(StreamResponseSchema, {
      payload: {
        case: "statusUpdate",
        value: {
          taskId: stringOf(o.taskId),
          contextId: stringOf(o.contextId),
          status: {
            state: v03States[String(status.state)] ?? TaskState.UNSPECIFIED,
            ...(status.message ? { message: v03Message(status.message) } : {}),
          },
          ...(metadata ? { metadata } : {}),
        },
      },
    });
  }
  if (o.kind === "artifact-update") {
    const artifact = (o.artifact ?? {}) as V03Object;
    return create(StreamResponseSchema, {
      payload: {
        case: "artifactUpdate",
        value: {
          taskId: stringOf(o.taskId),
          contextId: stringOf(o.contextId),
          artifact: { artifactId: stringOf(artifact.artifactId), parts: v03Parts(artifact.parts) },
          append: o.append === true,
          lastChunk: o.lastChunk === true,
        },
      },
    });
  }
  throw new PeerError(
    `peer ${peer.name} (${peer.url}) sent a stream event of kind ${JSON.stringify(o.kind ?? null)}; expected message, task, status-update or artifact-update`,
  );
}
