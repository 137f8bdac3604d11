import type { Message, Part } from "@parley/proto";
import { createTypedError } from "../errors.js";

/**
 * The media type a message part is judged by against the agent's input modes: a text part is text/plain, a data
 * part application/json unless it names its own, a file (raw bytes or URL) its mediaType, or
 * application/octet-stream when it names none.
 */
export function partMediaType(part: Part): string {
  const named = part.mediaType.split(";", 1)[0]!.trim().toLowerCase();
  switch (part.content.case) {
    case "text":
      return "text/plain";
    case "data":
      return named || "application/json";
    default:
      return named || "application/octet-stream";
  }
}

/** True when `mediaType` is one of `modes`, which may hold `type/*` and `*` + `/*` wildcards. */
function accepted(modes: readonly string[], mediaType: string): boolean {
  const type = mediaType.split("/", 1)[0];
  return modes.some((mode) => mode === mediaType || mode === "*/*" || mode === `${type}/*`);
}

/**
 * Refuses a message with a part whose media type is not among the agent's input modes (the card's
 * defaultInputModes) with ContentTypeNotSupportedError (section 3.1.1), naming the part and the modes.
 */
export function createInputModeCheck(modes: readonly string[]): (message: Message) => void {
  const normalized = modes.map((mode) => mode.split(";", 1)[0]!.trim().toLowerCase());
  return (message) => {
    const parts = message.parts;
    for (let i = 0; i < parts.length; i++) {
      const part = parts[i]!;
      // The common case, text in an agent that takes text, without building strings.
      if (part.content.case === "text" && part.mediaType === "" && normalized.includes("text/plain")) continue;
      const mediaType = partMediaType(part);
      if (accepted(normalized, mediaType)) continue;
      throw createTypedError(
        "CONTENT_TYPE_NOT_SUPPORTED",
        `message.parts[${i}] has media type ${JSON.stringify(mediaType)}, which this agent does not accept; its input modes are ${modes.join(", ")}`,
        { mediaType, part: String(i), inputModes: modes.join(",") },
      );
    }
  };
}
