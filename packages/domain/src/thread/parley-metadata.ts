import type { JsonObject } from "@bufbuild/protobuf";
import type { Message } from "@parley/proto";
import type { Provenance } from "@parley/store";

/** Metadata key under which Parley keeps its own annotations on messages and artifacts. */
export const parleyMetadataKey = "parley";

/** What Parley itself reads from a message's annotations. */
export interface ParleyMetadata {
  /** The message is a step of an agent-to-agent session, not a user's. */
  readonly interSession: boolean;
  /** The sessions the message passed through. */
  readonly hops: string[];
  /** Who wrote the message (a session's name), when it says so. */
  readonly source: string | undefined;
}

/**
 * The Parley annotation object of a metadata map, if it holds one. The one
 * reader of `metadata.parley`: every field a caller can send is checked here
 * before anything trusts its shape.
 */
export function parleyAnnotations(metadata: JsonObject | undefined): JsonObject | undefined {
  const meta = metadata?.[parleyMetadataKey];
  return meta && typeof meta === "object" && !Array.isArray(meta) ? meta : undefined;
}

/** The Parley annotations of a message, with defaults for what is absent or malformed. */
export function parleyMetadataOf(message: Pick<Message, "metadata">): ParleyMetadata {
  const meta = parleyAnnotations(message.metadata);
  if (!meta) return { interSession: false, hops: [], source: undefined };
  const hops = meta.hops;
  return {
    interSession: Boolean(meta.interSession),
    hops: Array.isArray(hops) ? hops.filter((h): h is string => typeof h === "string") : [],
    source: typeof meta.source === "string" ? meta.source : undefined,
  };
}

/** Who a stored inbound message counts as coming from. */
export function provenanceOf(message: Message): Provenance {
  return parleyMetadataOf(message).interSession ? "inter-session" : "user";
}

/** The sessions a message passed through, from its Parley metadata. */
export function hopsOf(message: Message): string[] {
  return parleyMetadataOf(message).hops;
}
